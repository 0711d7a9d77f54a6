package credentials

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Data keys of an issued certificate, as Gardener's secrets utilities name them.
const (
	DataKeyCertificate = "tls.crt"
	DataKeyPrivateKey  = "tls.key"
)

// LabelIssuedBy marks a certificate's secret with the CA secret that signed it.
const LabelIssuedBy = "issued-by"

// certValidity is how long an issued certificate is valid: a year, as the secrets manager's default; a new CA or
// configuration issues a new one at once.
const certValidity = 365 * 24 * time.Hour

// CertConfig describes a certificate signed by one of the shoot's CAs.
type CertConfig struct {
	// Name names the certificate's secrets ("kube-apiserver", "etcd-server", ...).
	Name string
	// CA is the secret of the CA that signs it (ca.crt, ca.key).
	CA *corev1.Secret
	// CommonName and Organization are the subject.
	CommonName   string
	Organization []string
	// DNSNames and IPs are the subject alternative names of a serving certificate.
	DNSNames []string
	IPs      []net.IP
	// Server and Client are the extended key usages.
	Server, Client bool
}

// key is what the certificate's secret name depends on: a change of any part issues a new certificate.
func (c CertConfig) key() string {
	ips := make([]string, 0, len(c.IPs))
	for _, ip := range c.IPs {
		ips = append(ips, ip.String())
	}
	h := sha256.Sum256([]byte(strings.Join([]string{c.Name, c.CA.Name, string(c.CA.Data[DataKeyCertificateCA]), c.CommonName,
		strings.Join(c.Organization, ","), strings.Join(c.DNSNames, ","), strings.Join(ips, ","),
		fmt.Sprint(c.Server, c.Client)}, "|")))
	return c.Name + "-" + hex.EncodeToString(h[:])[:8]
}

// Certificate returns the secret holding the certificate cfg describes (tls.crt, tls.key, ca.crt), issuing it when
// there is none for this configuration and CA yet. Certificates of earlier configurations of the same name are
// deleted: the workloads that mount them roll to the new secret's name.
func (m *Manager) Certificate(ctx context.Context, cfg CertConfig) (*corev1.Secret, error) {
	if cfg.CA == nil || len(cfg.CA.Data[DataKeyCertificateCA]) == 0 {
		return nil, fmt.Errorf("certificate %s: no CA", cfg.Name)
	}
	name := cfg.key()
	s := &corev1.Secret{}
	err := m.c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		data, ierr := m.issue(cfg)
		if ierr != nil {
			return nil, fmt.Errorf("certificate %s: %w", cfg.Name, ierr)
		}
		s = &corev1.Secret{
			ObjectMeta: kmetav1.ObjectMeta{Name: name, Namespace: m.ns, Labels: map[string]string{
				LabelName: cfg.Name, LabelManagedBy: managedBy, LabelManagerIdentity: managerIdentity, LabelIssuedBy: cfg.CA.Name,
			}},
			Type: corev1.SecretTypeOpaque, Data: data, Immutable: ptr(true),
		}
		err = m.c.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			err = m.c.Get(ctx, client.ObjectKeyFromObject(s), s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", m.ns, name, err)
	}
	l := &corev1.SecretList{}
	if err := m.c.List(ctx, l, client.InNamespace(m.ns), client.MatchingLabels{LabelName: cfg.Name, LabelManagedBy: managedBy}); err != nil {
		return nil, fmt.Errorf("list the %s secrets in %s: %w", cfg.Name, m.ns, err)
	}
	for i := range l.Items {
		if old := &l.Items[i]; old.Name != name && old.Labels[LabelIssuedBy] != "" {
			if err := m.c.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("delete secret %s/%s: %w", m.ns, old.Name, err)
			}
		}
	}
	return s, nil
}

// issue makes an ECDSA P-256 key and a certificate for it signed by cfg.CA.
func (m *Manager) issue(cfg CertConfig) (map[string][]byte, error) {
	caKey, err := parsePrivateKey(cfg.CA.Data[DataKeyPrivateKeyCA])
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", cfg.CA.Name, err)
	}
	b, _ := pem.Decode(cfg.CA.Data[DataKeyCertificateCA])
	if b == nil {
		return nil, fmt.Errorf("CA %s: no PEM certificate", cfg.CA.Name)
	}
	caCert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", cfg.CA.Name, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), m.rand)
	if err != nil {
		return nil, err
	}
	tmpl, err := m.template(certValidity)
	if err != nil {
		return nil, err
	}
	tmpl.Subject = pkix.Name{CommonName: cfg.CommonName, Organization: slices.Clone(cfg.Organization)}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.DNSNames, tmpl.IPAddresses = slices.Clone(cfg.DNSNames), slices.Clone(cfg.IPs)
	if cfg.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if cfg.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if len(tmpl.ExtKeyUsage) == 0 {
		return nil, errors.New("neither a server nor a client certificate")
	}
	der, err := x509.CreateCertificate(m.rand, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		DataKeyCertificate:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		DataKeyPrivateKey:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		DataKeyCertificateCA: cfg.CA.Data[DataKeyCertificateCA],
	}, nil
}
