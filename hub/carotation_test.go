package hub_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/pki"
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
	bundleCerts := func() int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return len(pemCerts(b))
	}
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
