package credentials

import (
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
)

// rsaBits is the size of the RSA keys generated. Gardener generates the SSH keypair (and the service account key)
// with 4096 bits; 2048 bits keep a rotation within a second on small machines, and no shoot control plane here
// depends on the keys' strength (docs/shoot-operations.md).
const rsaBits = 2048

// caValidity is how long a generated CA is valid, as Gardener's CAs (10 years).
const caValidity = 10 * 365 * 24 * time.Hour

func (m *Manager) rsaKey() (*rsa.PrivateKey, error) { return rsa.GenerateKey(m.rand, rsaBits) }

func privateKeyPEM(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

func parsePrivateKey(p []byte) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "RSA PRIVATE KEY" {
		return nil, errors.New("no PEM RSA private key")
	}
	return x509.ParsePKCS1PrivateKey(b.Bytes)
}

// publicKeyPEM returns the PEM public key of a PEM RSA private key.
func publicKeyPEM(private []byte) ([]byte, error) {
	k, err := parsePrivateKey(private)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// generateCA returns the generator of a self-signed CA named name. Its common name is unique per generation, as the
// secrets manager makes it, so that clients tell the old and the new CA apart during a rotation.
func (m *Manager) generateCA(name string) func([]corev1.Secret) (map[string][]byte, error) {
	return func([]corev1.Secret) (map[string][]byte, error) { return m.newCA(name) }
}

func (m *Manager) newCA(name string) (map[string][]byte, error) {
	key, err := m.rsaKey()
	if err != nil {
		return nil, err
	}
	tmpl, err := m.template(caValidity)
	if err != nil {
		return nil, err
	}
	tmpl.Subject = pkix.Name{CommonName: fmt.Sprintf("%s-%s", name, tmpl.SerialNumber.Text(16)[:8])}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	der, err := x509.CreateCertificate(m.rand, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		DataKeyCertificateCA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		DataKeyPrivateKeyCA:  privateKeyPEM(key),
	}, nil
}

// template is a certificate template with a random serial, valid from a minute ago for validity.
func (m *Manager) template(validity time.Duration) (*x509.Certificate, error) {
	serial, err := randSerial(m)
	if err != nil {
		return nil, err
	}
	now := m.now()
	return &x509.Certificate{SerialNumber: serial, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity)}, nil
}

func randSerial(m *Manager) (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	n, err := randInt(m, limit)
	if err != nil {
		return nil, err
	}
	return n.Add(n, limit), nil // 128 bits, so that its hex has 32 digits
}

func randInt(m *Manager, limit *big.Int) (*big.Int, error) {
	b := make([]byte, (limit.BitLen()+7)/8)
	if _, err := m.rand.Read(b); err != nil {
		return nil, err
	}
	return new(big.Int).Mod(new(big.Int).SetBytes(b), limit), nil
}

// generateRSAKey makes the service account signing key.
func (m *Manager) generateRSAKey([]corev1.Secret) (map[string][]byte, error) {
	key, err := m.rsaKey()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{DataKeyRSAPrivateKey: privateKeyPEM(key)}, nil
}

// generateSSHKeypair makes the workers' SSH keypair: id_rsa and id_rsa.pub in authorized_keys format.
func (m *Manager) generateSSHKeypair([]corev1.Secret) (map[string][]byte, error) {
	key, err := m.rsaKey()
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{DataKeyRSAPrivateKey: privateKeyPEM(key), DataKeySSHAuthorizedKeys: ssh.MarshalAuthorizedKey(pub)}, nil
}

// generateETCDKey makes an AES-CBC key for etcd encryption at rest, named key<unix seconds> as Gardener names them;
// a name an existing key has (two keys made within a second) moves on by a second, as the configuration needs
// distinct names.
func (m *Manager) generateETCDKey(existing []corev1.Secret) (map[string][]byte, error) {
	secret := make([]byte, 32)
	if _, err := m.rand.Read(secret); err != nil {
		return nil, err
	}
	at := m.now().Unix()
	for taken := true; taken; {
		taken = false
		for _, s := range existing {
			if string(s.Data[DataKeyEncryptionKeyName]) == "key"+strconv.FormatInt(at, 10) {
				taken, at = true, at+1
			}
		}
	}
	return map[string][]byte{
		DataKeyEncryptionKeyName: []byte("key" + strconv.FormatInt(at, 10)),
		DataKeyEncryptionSecret:  []byte(base64.StdEncoding.EncodeToString(secret)),
	}, nil
}

// encryptionConfiguration is the kube-apiserver's EncryptionConfiguration for the keys in use: the first encrypts,
// all decrypt, and unencrypted data stays readable.
func encryptionConfiguration(keys []*corev1.Secret) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources:\n  - secrets\n  providers:\n  - aescbc:\n      keys:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "      - name: %s\n        secret: %s\n", k.Data[DataKeyEncryptionKeyName], k.Data[DataKeyEncryptionSecret])
	}
	b.WriteString("  - identity: {}\n")
	return []byte(b.String())
}
