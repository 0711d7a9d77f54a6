package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestServingCertVerifiesAgainstCA(t *testing.T) {
	ca, _, err := newCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServingCert([]string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "example.com"}); err == nil {
		t.Error("certificate verified for a host it was not issued for")
	}
	other, _, _ := newCA()
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "localhost"}); err == nil {
		t.Error("certificate verified against a foreign CA")
	}
}
