package pki_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

// clientCert has ca sign a client certificate and returns it parsed.
func clientCert(t *testing.T, ca *pki.CA) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "gardener.cloud:system:seed:s1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignClientCert(csr, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func verifies(a *pki.Authority, cert *x509.Certificate) bool {
	_, err := cert.Verify(x509.VerifyOptions{Roots: a.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func TestRotationPhases(t *testing.T) {
	st := storetest.NewStore(t)
	ctx := t.Context()
	key := st.Prefix() + "/pki/ca"
	a, err := pki.OpenAuthority(ctx, st.Client(), key, st)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := pki.OpenAuthority(ctx, st.Client(), key, st)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Current()
	if replica.Current().Cert.SerialNumber.Cmp(old.Cert.SerialNumber) != 0 {
		t.Fatal("two authorities on one store hold different CAs")
	}
	oldCert := clientCert(t, a.Signer())
	if err := a.Complete(ctx, time.Now()); !errors.Is(err, pki.ErrPhase) {
		t.Fatalf("complete without a rotation: %v, want ErrPhase", err)
	}

	status, err := a.Start(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if status.Phase != pki.PhasePreparing || status.NextSerial == "" {
		t.Fatalf("after start: %+v", status)
	}
	if _, err := a.Start(ctx, time.Now()); !errors.Is(err, pki.ErrPhase) {
		t.Fatalf("second start: %v, want ErrPhase", err)
	}
	if a.Signer() == a.Current() {
		t.Fatal("the old CA still signs during Preparing")
	}
	newCert := clientCert(t, a.Signer())
	if !verifies(a, oldCert) || !verifies(a, newCert) {
		t.Fatal("during Preparing the bundle must trust certificates of both CAs")
	}
	if n := len(pemBlocks(a.BundlePEM())); n != 2 {
		t.Fatalf("bundle holds %d certificates during Preparing, want 2", n)
	}
	if err := replica.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if replica.Status().Phase != pki.PhasePreparing || !verifies(replica, newCert) {
		t.Fatalf("replica after reload: %+v", replica.Status())
	}
	if err := a.Complete(ctx, time.Now()); !errors.Is(err, pki.ErrPhase) {
		t.Fatalf("complete from Preparing: %v, want ErrPhase", err)
	}

	if err := replica.MarkPrepared(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	s := a.Status()
	if s.Phase != pki.PhaseCompleted || s.NextSerial != "" || s.LastCompletion.IsZero() {
		t.Fatalf("after complete: %+v", s)
	}
	if verifies(a, oldCert) {
		t.Fatal("a certificate of the old CA is still trusted after Completed")
	}
	if !verifies(a, newCert) {
		t.Fatal("a certificate of the new CA is refused after Completed")
	}
	if n := len(pemBlocks(a.BundlePEM())); n != 1 {
		t.Fatalf("bundle holds %d certificates after Completed, want 1", n)
	}

	// A hub starting now loads the new CA as its only CA.
	fresh, err := pki.OpenAuthority(ctx, st.Client(), key, st)
	if err != nil {
		t.Fatal(err)
	}
	if verifies(fresh, oldCert) || !verifies(fresh, newCert) || fresh.Status().Phase != pki.PhaseCompleted {
		t.Fatalf("a fresh authority after complete: %+v", fresh.Status())
	}
	// And the next rotation may start.
	if _, err := fresh.Start(ctx, time.Now()); err != nil {
		t.Fatalf("start after Completed: %v", err)
	}
}

func pemBlocks(b []byte) []*pem.Block {
	var out []*pem.Block
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		out = append(out, blk)
	}
}
