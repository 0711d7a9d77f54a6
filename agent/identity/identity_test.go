package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestRotationDeadlineBounds(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(100 * time.Hour)
	for _, r := range []float64{0, 0.25, 0.5, 0.999999} {
		d := identity.RotationDeadline(nb, na, 70, 90, r)
		if d.Before(nb.Add(70*time.Hour)) || d.After(nb.Add(90*time.Hour)) {
			t.Fatalf("r=%v: deadline %v outside [70h, 90h] after NotBefore", r, d.Sub(nb))
		}
	}
	if d := identity.RotationDeadline(nb, na, 70, 90, 0); d != nb.Add(70*time.Hour) {
		t.Fatalf("r=0: %v, want 70h", d.Sub(nb))
	}
	if d := identity.RotationDeadline(nb, na, 70, 90, 0.5); d != nb.Add(80*time.Hour) {
		t.Fatalf("r=0.5: %v, want 80h", d.Sub(nb))
	}
	if d := identity.RotationDeadline(nb, na, 50, 50, 0.9); d != nb.Add(50*time.Hour) {
		t.Fatalf("min=max: %v, want 50h", d.Sub(nb))
	}
	if d := identity.RotationDeadline(na, nb, 70, 90, 0.5); !d.Equal(na) {
		t.Fatalf("inverted validity: %v, want NotBefore", d)
	}
}

func TestNewRequest(t *testing.T) {
	req, err := identity.NewRequest("local")
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(req.CSRPEM)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		t.Fatalf("CSR PEM: %q", req.CSRPEM)
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatal(err)
	}
	if csr.Subject.CommonName != "gardener.cloud:system:seed:local" || !slices.Equal(csr.Subject.Organization, []string{"gardener.cloud:system:seeds"}) {
		t.Fatalf("subject %v", csr.Subject)
	}
	if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses)+len(csr.URIs) != 0 {
		t.Fatal("CSR has SANs")
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", csr.PublicKey)
	}
	if !slices.Equal(identity.Usages, []string{"digital signature", "key encipherment", "client auth"}) {
		t.Fatalf("usages %v", identity.Usages)
	}
}

// sign issues a certificate for req's CSR from a throwaway CA; it returns the CA's and the certificate's PEM.
func sign(t *testing.T, req *identity.Request, cn string) (caPEM, certPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	blk, _ := pem.Decode(req.CSRPEM)
	csr, _ := x509.ParseCertificateRequest(blk.Bytes)
	subject := csr.Subject
	if cn != "" {
		subject.CommonName = cn
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: subject,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		ca, csr.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestCredentialsKubeconfigRoundTrip(t *testing.T) {
	req, err := identity.NewRequest("local")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, certPEM := sign(t, req, "")
	c, err := req.Complete("https://hub.example.com:8443", caPEM, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSubject("local"); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSubject("other"); err == nil {
		t.Fatal("CheckSubject accepted another seed")
	}
	kc, err := c.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != "gardenlet" || raw.Clusters["gardenlet"].Server != "https://hub.example.com:8443" ||
		raw.AuthInfos["gardenlet"] == nil || raw.Contexts["gardenlet"].AuthInfo != "gardenlet" {
		t.Fatalf("kubeconfig layout: %+v", raw)
	}
	back, err := identity.ParseKubeconfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if back.Server != c.Server || string(back.CAPEM) != string(caPEM) || string(back.CertPEM) != string(certPEM) || string(back.KeyPEM) != string(req.KeyPEM) {
		t.Fatal("kubeconfig round trip lost data")
	}

	// A certificate for another key is refused.
	other, _ := identity.NewRequest("local")
	if _, err := other.Complete("https://hub", caPEM, certPEM); err == nil {
		t.Fatal("Complete accepted a certificate for another key")
	}
}

func TestHolder(t *testing.T) {
	var h identity.Holder
	c, err := h.GetClientCertificate(nil)
	if err != nil || len(c.Certificate) != 0 {
		t.Fatalf("empty holder presents %v, %v", c, err)
	}
	req, _ := identity.NewRequest("local")
	caPEM, certPEM := sign(t, req, "")
	creds, err := req.Complete("https://hub", caPEM, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	h.Set(creds)
	c, _ = h.GetClientCertificate(nil)
	if c.Leaf == nil || c.Leaf.Subject.CommonName != "gardener.cloud:system:seed:local" {
		t.Fatal("holder does not present the set certificate")
	}
}

func TestMain(m *testing.M) { seedtest.Main(m) }

func TestSecretStore(t *testing.T) {
	ctx := context.Background()
	seed := seedtest.StartShared(t) // a real kube-apiserver
	client, ns := seed.Client, seed.Namespace(t)
	s := &identity.SecretStore{Client: client.CoreV1(), Namespace: ns, Name: "gardenlet-kubeconfig"}
	if c, err := s.Load(ctx); c != nil || err != nil {
		t.Fatalf("Load without a secret = %v, %v", c, err)
	}
	req, _ := identity.NewRequest("local")
	caPEM, certPEM := sign(t, req, "")
	creds, _ := req.Complete("https://hub", caPEM, certPEM)
	if err := s.Save(ctx, creds); err != nil {
		t.Fatal(err)
	}
	// An existing secret keeps its other keys and gets the new kubeconfig.
	sec, _ := client.CoreV1().Secrets(ns).Get(ctx, "gardenlet-kubeconfig", metav1.GetOptions{})
	sec.Data["other"] = []byte("x")
	if _, err := client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	req2, _ := identity.NewRequest("local")
	caPEM2, certPEM2 := sign(t, req2, "")
	creds2, _ := req2.Complete("https://hub", caPEM2, certPEM2)
	if err := s.Save(ctx, creds2); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.CertPEM) != string(certPEM2) {
		t.Fatal("Load does not return the last saved certificate")
	}
	sec, _ = client.CoreV1().Secrets(ns).Get(ctx, "gardenlet-kubeconfig", metav1.GetOptions{})
	if string(sec.Data["other"]) != "x" || sec.Type != corev1.SecretTypeOpaque {
		t.Fatalf("secret data %v, type %s", sec.Data, sec.Type)
	}
	// A secret without the kubeconfig key holds no credentials; a broken one is an error.
	delete(sec.Data, "kubeconfig")
	if sec, err = client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Load(ctx); c != nil || err != nil {
		t.Fatalf("Load without key = %v, %v", c, err)
	}
	sec.Data["kubeconfig"] = []byte("not: [a kubeconfig")
	if _, err := client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx); err == nil {
		t.Fatal("Load accepted a broken kubeconfig")
	}
}
