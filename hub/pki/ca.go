package pki

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sealer encrypts values at rest; the store provides it.
type Sealer interface {
	Seal(key string, plain []byte) ([]byte, error)
	Open(key string, stored []byte) ([]byte, error)
}

// CA is the hub's certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// caValidity is the CA's lifetime; rotation (a Preparing→Completing bundle) comes with the agent link.
const caValidity = 10 * 365 * 24 * time.Hour

// LoadOrCreate reads the CA from etcd at key, or creates it there. Creation is a create-if-absent transaction, so
// replicas starting together agree on one CA.
func LoadOrCreate(ctx context.Context, cli *clientv3.Client, key string, sealer Sealer) (*CA, error) {
	for range 3 {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read CA: %w", err)
		}
		if len(resp.Kvs) == 1 {
			plain, err := sealer.Open(key, resp.Kvs[0].Value)
			if err != nil {
				return nil, fmt.Errorf("unseal CA: %w", err)
			}
			return parseCA(plain)
		}
		ca, bundle, err := newCA()
		if err != nil {
			return nil, err
		}
		sealed, err := sealer.Seal(key, bundle)
		if err != nil {
			return nil, err
		}
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(sealed))).Commit()
		if err != nil {
			return nil, fmt.Errorf("store CA: %w", err)
		}
		if txn.Succeeded {
			return ca, nil
		}
	}
	return nil, errors.New("could not create or read the CA")
}

func newCA() (*CA, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "trellis-ca", Organization: []string{"trellis"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	bundle := append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	ca, err := parseCA(bundle)
	return ca, bundle, err
}

func parseCA(bundle []byte) (*CA, error) {
	cert, err := tls.X509KeyPair(bundle, bundle)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	signer, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	x, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	return &CA{Cert: x, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), key: signer}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// ServingCert issues a TLS server certificate for the given DNS names and IPs.
func (ca *CA) ServingCert(hosts []string, validity time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "trellis-hub"},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// Pool returns a cert pool holding the CA, for clients and for verifying client certificates.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}
