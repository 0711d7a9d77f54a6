package hub_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// servingVerifies dials the hub and verifies its serving certificate against pool.
func servingVerifies(t *testing.T, addr string, pool *x509.CertPool) error {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}

func poolOf(ca *pki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// A CA rotation as a replica sees it across restarts: after Start the published bundle holds both CAs and the hub
// still serves under the old one (agents without the new bundle keep connecting); after Complete the bundle and the
// serving certificate are the new CA's only, and the old CA verifies nothing.
func TestCARotationAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	bundleCerts := func() int { return bundleCertsIn(t, dir) }
	stop := func() {}
	defer func() { stop() }()
	restart := func() *hub.Hub {
		t.Helper()
		stop()
		stop = func() {}
		h, s, err := runHub(t, dir, "")
		if err != nil {
			t.Fatal(err)
		}
		stop = s
		return h
	}
	h := restart()
	old := h.CA()
	status, err := h.Authority().Start(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	h = restart()
	if got := h.Authority().Status(); got.Phase != pki.PhasePreparing || got.NextSerial != status.NextSerial {
		t.Errorf("after a restart in Preparing: %+v, want the rotation started before", got)
	}
	if n := bundleCerts(); n != 2 {
		t.Errorf("published bundle holds %d certificates in Preparing, want 2", n)
	}
	if err := servingVerifies(t, h.Addr(), poolOf(old)); err != nil {
		t.Errorf("in Preparing a client trusting only the old CA cannot connect: %v", err)
	}
	next := h.Authority().Signer()
	if next == h.CA() {
		t.Error("the old CA still signs in Preparing")
	}
	if err := h.Authority().MarkPrepared(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Authority().Complete(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}

	h = restart()
	if n := bundleCerts(); n != 1 {
		t.Errorf("published bundle holds %d certificates after Completed, want 1", n)
	}
	if err := servingVerifies(t, h.Addr(), poolOf(next)); err != nil {
		t.Errorf("after Completed the hub does not serve under the new CA: %v", err)
	}
	if err := servingVerifies(t, h.Addr(), poolOf(old)); err == nil {
		t.Error("after Completed the old CA still verifies the hub")
	}
}

func pemCerts(b []byte) []*pem.Block {
	var out []*pem.Block
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out
		}
		out = append(out, blk)
	}
}

// A CA rotation applies to a running replica without a restart, whichever replica moved the phase (the replica
// follows the CA's keys in etcd): after Start the published bundle holds both CAs, the hub still serves under the
// old CA and accepts client certificates of the new one; after Complete it serves under the new CA only and refuses
// client certificates of the old one.
func TestCARotationWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	h, stop, err := runHub(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	bundleCerts := func() int { return bundleCertsIn(t, dir) }
	old := h.CA()
	// Another replica's start: a second Authority on the same etcd moves the phase; this replica follows.
	other, err := pki.OpenAuthority(context.Background(), h.Store().Client(), h.Store().Prefix()+"/pki/ca", h.Store())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Start(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	next := other.Signer()
	eventually(t, "the published bundle holds both CAs", func() bool { return bundleCerts() == 2 })
	eventually(t, "the replica signs with the new CA", func() bool { return h.Authority().Signer().Cert.Equal(next.Cert) })
	if err := servingVerifies(t, h.Addr(), poolOf(old)); err != nil {
		t.Errorf("in Preparing a client trusting only the old CA cannot connect: %v", err)
	}
	if !clientCertAccepted(t, h.Addr(), next, poolOf(old)) {
		t.Error("in Preparing a client certificate of the new CA is refused")
	}
	if !clientCertAccepted(t, h.Addr(), old, poolOf(old)) {
		t.Error("in Preparing a client certificate of the old CA is refused")
	}

	if err := other.MarkPrepared(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := other.Complete(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the published bundle holds the new CA only", func() bool { return bundleCerts() == 1 })
	eventually(t, "the hub serves under the new CA", func() bool { return servingVerifies(t, h.Addr(), poolOf(next)) == nil })
	if err := servingVerifies(t, h.Addr(), poolOf(old)); err == nil {
		t.Error("after Completed the old CA still verifies the hub")
	}
	if !clientCertAccepted(t, h.Addr(), next, poolOf(next)) {
		t.Error("after Completed a client certificate of the new CA is refused")
	}
	if clientCertAccepted(t, h.Addr(), old, poolOf(next)) {
		t.Error("after Completed a client certificate of the old CA is accepted")
	}
}

// clientCertAccepted reports whether the TLS handshake of the hub at addr, verified with servingPool, accepts a
// client certificate issued by ca.
func clientCertAccepted(t *testing.T, addr string, ca *pki.CA, servingPool *x509.CertPool) bool {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: servingPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{clientCertOf(t, ca)}})
	if err != nil {
		return false
	}
	defer conn.Close()
	// With TLS 1.3 the server checks the client's certificate after the client's handshake ended: a refusal arrives
	// as an alert on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	return err == nil || errors.As(err, &ne) && ne.Timeout()
}

// bundleCertsIn counts the certificates of the trust bundle the hub on dir published.
func bundleCertsIn(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return len(pemCerts(b))
}

// clientCertOf issues a seed client certificate from ca.
func clientCertOf(t *testing.T, ca *pki.CA) tls.Certificate {
	t.Helper()
	key, csrPEM, err := agentsim.CSR("s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignClientCert(csr, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatal("no certificate")
	}
	return tls.Certificate{Certificate: [][]byte{blk.Bytes}, PrivateKey: key}
}
