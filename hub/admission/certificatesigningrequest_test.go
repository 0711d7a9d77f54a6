package admission_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
)

func csrPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "gardener.cloud:system:seed:local", Organization: []string{"gardener.cloud:system:seeds"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCertificateSigningRequestValidation(t *testing.T) {
	valid := &certificatesv1.CertificateSigningRequest{
		Metadata: meta("seed-csr-abcde", ""),
		Spec: &certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM(t),
			SignerName: "kubernetes.io/kube-apiserver-client",
			Usages:     []string{"digital signature", "key encipherment", "client auth"},
		},
	}
	csr := func(f func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
		return with(valid, f)
	}
	runCases(t, []validationCase{
		{name: "valid", obj: valid},
		{name: "empty", obj: &certificatesv1.CertificateSigningRequest{Metadata: meta("c", "")},
			paths: []string{"spec.request", "spec.signerName", "spec.usages"}},
		{name: "request is not PEM", obj: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") }),
			paths: []string{"spec.request"}},
		{name: "request is a certificate", obj: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})
		}), paths: []string{"spec.request"}},
		{name: "request does not parse", obj: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte("x")})
		}), paths: []string{"spec.request"}},
		{name: "signer name must be domain/path", obj: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kube-apiserver-client" }),
			paths: []string{"spec.signerName"}},
		{name: "signer domain needs a dot", obj: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" }),
			paths: []string{"spec.signerName"}},
		{name: "legacy-unknown signer", obj: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" }),
			paths: []string{"spec.signerName"}},
		{name: "usages known and unique", obj: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []string{"client auth", "telepathy", "client auth"}
		}), paths: []string{"spec.usages[1]", "spec.usages[2]"}},
		{name: "expiration at least 10 minutes", obj: csr(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr(int32(60)) }),
			paths: []string{"spec.expirationSeconds"}},
		{name: "spec is immutable", old: valid, obj: csr(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = "kubernetes.io/kubelet-serving"
			c.Spec.Usages = []string{"server auth"}
		}), paths: []string{"spec.signerName", "spec.usages"}},
	})
}
