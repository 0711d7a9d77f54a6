package hubtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// CA is a certificate authority made for a test, as a seed's agent makes a shoot's CAs.
type CA struct {
	Cert            *x509.Certificate
	Key             crypto.Signer
	CertPEM, KeyPEM []byte
}

// NewCA makes a CA valid for ten years, with an RSA key (as the agent's shoot CAs have) or an ECDSA one.
func NewCA(t testing.TB, cn string, rsaKey bool) CA {
	t.Helper()
	var key crypto.Signer
	var keyPEM []byte
	if rsaKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		key, keyPEM = k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		key, keyPEM = k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}
}

// ServingCert issues a serving certificate for the DNS name or IP address, valid for a day.
func (c CA) ServingCert(t testing.TB, name string) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, k.Public(), c.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// PublishShootCAs writes what a shoot's seed agent publishes in the shoot's project namespace, past the API: the
// client CA as InternalSecret <shoot>.ca-client (ca.crt, ca.key, and bundle.crt: client and the extra trusted CAs)
// and the cluster CA bundle as ConfigMap <shoot>.ca-cluster. A nil client publishes the cluster CA only.
func (h *Hub) PublishShootCAs(t testing.TB, namespace, shoot string, cluster CA, client *CA, trusted ...CA) {
	t.Helper()
	ctx := context.Background()
	if client != nil {
		bundle := append([]byte{}, client.CertPEM...)
		for _, c := range trusted {
			bundle = append(bundle, c.CertPEM...)
		}
		is, _ := h.Registry().Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "internalsecrets"})
		if _, err := is.Create(ctx, &corev1beta1.InternalSecret{Metadata: &metav1.ObjectMeta{Name: shoot + ".ca-client", Namespace: namespace},
			Data: map[string][]byte{"ca.crt": client.CertPEM, "ca.key": client.KeyPEM, "bundle.crt": bundle}}); err != nil {
			t.Fatal(err)
		}
	}
	cms, _ := h.Registry().Collection(schema.GroupResource{Resource: "configmaps"})
	if _, err := cms.Create(ctx, &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Name: shoot + ".ca-cluster", Namespace: namespace},
		Data: map[string]string{"ca.crt": string(cluster.CertPEM)}}); err != nil {
		t.Fatal(err)
	}
}
