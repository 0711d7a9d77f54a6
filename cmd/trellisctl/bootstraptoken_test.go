package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/hubtest"
)

func TestSeedBootstrapTokenCreate(t *testing.T) {
	h := hubtest.Start(t)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, h.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"--hub", h.URL, "--ca", ca, "--token", h.Token, "seed", "bootstrap-token", "create", "local", "--validity", "10m"}, &out, &errb); err != nil {
		t.Fatalf("create: %v\n%s", err, errb.String())
	}
	token := strings.TrimSpace(out.String())
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(token) {
		t.Fatalf("printed %q, want a bootstrap token <id>.<secret>", token)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	cert, err := agentsim.Bootstrap(context.Background(), agentsim.Dialer{Target: h.Addr(), CA: pool}, token, "local", nil, nil)
	if err != nil {
		t.Fatalf("bootstrap with the CLI's token: %v", err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if leaf.Subject.CommonName != "gardener.cloud:system:seed:local" {
		t.Fatalf("certificate for %q", leaf.Subject.CommonName)
	}
	if err := run([]string{"--hub", h.URL, "--ca", ca, "--token", h.Token, "seed", "bootstrap-token", "create", "local", "--validity", "-1s"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "--validity") {
		t.Fatalf("negative validity: %v", err)
	}
}
