package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// The seed client certificate's subject and usages (Gardener's IsSeedClientCert).
const (
	CommonNamePrefix = "gardener.cloud:system:seed:"
	Organization     = "gardener.cloud:system:seeds"
)

// Usages are the key usages a seed client certificate is requested with, as Kubernetes spells them.
var Usages = []string{"digital signature", "key encipherment", "client auth"}

// KubeconfigName names the context, cluster and user of the kubeconfig (gardenlet's).
const KubeconfigName = "gardenlet"

// Subject is the subject of seed seedName's client certificate.
func Subject(seedName string) pkix.Name {
	return pkix.Name{CommonName: CommonNamePrefix + seedName, Organization: []string{Organization}}
}

// Request is a new private key and a CSR for it.
type Request struct {
	// KeyPEM is the private key (PEM, "EC PRIVATE KEY").
	KeyPEM []byte
	// CSRPEM is the PKCS#10 request (PEM) with the seed's subject and no SANs.
	CSRPEM []byte
}

// NewRequest makes an ECDSA P-256 key and a CSR for seed seedName's client certificate.
func NewRequest(seedName string) (*Request, error) {
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return nil, fmt.Errorf("make key: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	signer, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("unexpected key type %T", key)
	}
	subject := Subject(seedName)
	csrPEM, err := cert.MakeCSR(signer, &subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make CSR: %w", err)
	}
	return &Request{KeyPEM: keyPEM, CSRPEM: csrPEM}, nil
}

// Credentials are the agent's client certificate and key and the CA bundle that verifies the hub.
type Credentials struct {
	// Server is the hub's URL, "https://<host:port>".
	Server string
	// CAPEM verifies the hub (and signed the client certificate).
	CAPEM []byte
	// CertPEM is the client certificate (PEM, possibly with intermediates).
	CertPEM []byte
	// KeyPEM is its private key (PEM).
	KeyPEM []byte
	// Certificate is CertPEM and KeyPEM parsed, with Leaf set.
	Certificate tls.Certificate
}

// NewCredentials parses and checks a certificate, its key and the CA bundle.
func NewCredentials(server string, caPEM, certPEM, keyPEM []byte) (*Credentials, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate and key: %w", err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
	}
	if len(caPEM) > 0 {
		if _, err := ParseCertificates(caPEM); err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
	}
	return &Credentials{Server: server, CAPEM: caPEM, CertPEM: certPEM, KeyPEM: keyPEM, Certificate: c}, nil
}

// Complete turns a signed certificate for r into credentials, checking that it certifies r's key.
func (r *Request) Complete(server string, caPEM, certPEM []byte) (*Credentials, error) {
	return NewCredentials(server, caPEM, certPEM, r.KeyPEM)
}

// NotBefore is the start of the client certificate's validity.
func (c *Credentials) NotBefore() time.Time { return c.Certificate.Leaf.NotBefore }

// NotAfter is the end of the client certificate's validity.
func (c *Credentials) NotAfter() time.Time { return c.Certificate.Leaf.NotAfter }

// CheckSubject reports whether the client certificate is seed seedName's client certificate.
func (c *Credentials) CheckSubject(seedName string) error {
	s := c.Certificate.Leaf.Subject
	want := Subject(seedName)
	if s.CommonName != want.CommonName || !slices.Equal(s.Organization, want.Organization) {
		return fmt.Errorf("client certificate subject is CN=%q O=%q, want CN=%q O=%q", s.CommonName, s.Organization, want.CommonName, want.Organization)
	}
	if !slices.Contains(c.Certificate.Leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return errors.New("client certificate is not valid for client auth")
	}
	return nil
}

// Kubeconfig encodes the credentials as a kubeconfig whose context, cluster and user are named "gardenlet".
func (c *Credentials) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigName] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.CAPEM}
	cfg.AuthInfos[KubeconfigName] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertPEM, ClientKeyData: c.KeyPEM}
	cfg.Contexts[KubeconfigName] = &clientcmdapi.Context{Cluster: KubeconfigName, AuthInfo: KubeconfigName}
	cfg.CurrentContext = KubeconfigName
	return clientcmd.Write(*cfg)
}

// ParseKubeconfig reads credentials from a kubeconfig written by Kubeconfig (its current context, else "gardenlet";
// certificate, key and CA as inline data).
func ParseKubeconfig(data []byte) (*Credentials, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	name := cfg.CurrentContext
	if name == "" {
		name = KubeconfigName
	}
	kctx, ok := cfg.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("kubeconfig: no context %q", name)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("kubeconfig: no cluster %q", kctx.Cluster)
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("kubeconfig: no user %q", kctx.AuthInfo)
	}
	if len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0 {
		return nil, fmt.Errorf("kubeconfig: user %q has no client-certificate-data and client-key-data", kctx.AuthInfo)
	}
	return NewCredentials(cluster.Server, cluster.CertificateAuthorityData, user.ClientCertificateData, user.ClientKeyData)
}

// ParseCertificates parses every CERTIFICATE block of a PEM bundle; it fails when there is none.
func ParseCertificates(pemData []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := pemData; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificates")
	}
	return out, nil
}

// Pool returns a pool of the certificates of the given PEM bundles (nil and empty bundles are skipped); nil when there
// are none, which makes crypto/tls use the system roots.
func Pool(bundles ...[]byte) (*x509.CertPool, error) {
	var pool *x509.CertPool
	for _, b := range bundles {
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		certs, err := ParseCertificates(b)
		if err != nil {
			return nil, err
		}
		if pool == nil {
			pool = x509.NewCertPool()
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
	}
	return pool, nil
}

// Holder holds the credentials in use. New TLS connections present its certificate (GetClientCertificate), so a
// rotated certificate takes effect without a restart.
type Holder struct {
	p atomic.Pointer[Credentials]
}

// Set makes c the credentials in use.
func (h *Holder) Set(c *Credentials) { h.p.Store(c) }

// Get returns the credentials in use; nil before any are set.
func (h *Holder) Get() *Credentials { return h.p.Load() }

// GetClientCertificate is a tls.Config.GetClientCertificate that presents the current certificate (none when no
// credentials are set).
func (h *Holder) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c := h.p.Load()
	if c == nil {
		return &tls.Certificate{}, nil
	}
	return &c.Certificate, nil
}

// RotationDeadline is when to rotate a certificate valid from notBefore to notAfter: notBefore plus a fraction of the
// lifetime between minPercent and maxPercent, chosen by r in [0, 1) (Gardener and client-go's certificate manager:
// "80% ± 10%" by default).
func RotationDeadline(notBefore, notAfter time.Time, minPercent, maxPercent int32, r float64) time.Time {
	lifetime := notAfter.Sub(notBefore)
	if lifetime <= 0 {
		return notBefore
	}
	lo := max(min(minPercent, 100), 0)
	hi := max(min(maxPercent, 100), lo)
	r = math.Min(math.Max(r, 0), 1)
	onePercent := lifetime / 100 // in integers, so that 70 % is exactly 70 %
	span := onePercent * time.Duration(hi-lo)
	return notBefore.Add(onePercent*time.Duration(lo) + time.Duration(r*float64(span)))
}
