package ctl_test

import (
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

// TestContextsAndEnvironment: login saves a context, which commands use without environment; TRELLIS_* override
// it; --context picks another; a context's token never goes to a hub the environment names instead.
func TestContextsAndEnvironment(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	hub, token := c.env["TRELLIS_HUB"], c.env["TRELLIS_TOKEN"]
	for _, k := range []string{"TRELLIS_HUB", "TRELLIS_CA", "TRELLIS_TOKEN"} {
		c.setenv(k, "")
	}
	cfg := filepath.Join(t.TempDir(), "trellis", "config")
	c.setenv("TRELLISCONFIG", cfg)

	contains(t, "login with a wrong token", c.fails("login", "--hub", hub, "--ca", c.ca, "--token", "wrong", "--context", "test"), "Error from server (Unauthorized): ")
	if _, err := os.Stat(cfg); err == nil {
		t.Fatal("a failed login wrote the configuration")
	}
	if out := c.ok("login", "--hub", hub, "--ca", c.ca, "--token", token, "--context", "test", "-n", "kube-system"); !strings.Contains(out, `context "test" is the current context`) {
		t.Fatalf("login: %q", out)
	}
	c.ok("seed", "bootstrap-token", "create", "local") // a Secret in kube-system, the context's namespace
	contains(t, "get with the context", c.ok("get", "secrets", "-o", "name"), "secret/bootstrap-token-")
	c.ok("config", "set-context", "other", "--hub", "127.0.0.1:1", "--token", "t2")
	contains(t, "get-contexts", c.ok("config", "get-contexts"), "*         test    https://"+hub, "other   https://127.0.0.1:1")
	view := c.ok("config", "view")
	contains(t, "view", view, "token: REDACTED", "certificate-authority-data: DATA+OMITTED", "current-context: test")
	if strings.Contains(view, token) {
		t.Fatal("config view shows the token")
	}
	contains(t, "view --raw", c.ok("config", "view", "--raw"), token)
	if out := c.ok("config", "current-context"); out != "test\n" {
		t.Fatalf("current-context: %q", out)
	}

	c.ok("config", "use-context", "other")
	contains(t, "unreachable hub", c.fails("get", "namespaces"), "cannot reach the hub")
	c.ok("get", "namespaces", "--context", "test")
	// The environment overrides the context: TRELLIS_HUB names the hub, and other's token is not sent to it.
	c.setenv("TRELLIS_HUB", hub)
	c.setenv("TRELLIS_CA", c.ca)
	contains(t, "no token for another hub", c.fails("get", "namespaces"), "Error from server (Unauthorized): ")
	c.setenv("TRELLIS_TOKEN", token)
	c.ok("get", "namespaces")
	c.ok("config", "delete-context", "other")
	contains(t, "deleted current context", c.fails("config", "current-context"), "no current context")
	contains(t, "use of a missing context", c.fails("config", "use-context", "nope"), `no context "nope"`)
}

// TestHubErrors: every failure of authentication or authorization prints the hub's own message, exits non-zero
// and prints no data.
func TestHubErrors(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	c.setenv("TRELLIS_TOKEN", "")
	missing := c.fails("get", "namespaces")
	c.setenv("TRELLIS_TOKEN", "wrong")
	wrong := c.fails("get", "namespaces")
	for _, msg := range []string{missing, wrong} {
		if !strings.HasPrefix(msg, "Error from server (Unauthorized): ") || strings.Contains(msg, "rpc error") || strings.Count(msg, "\n") != 1 {
			t.Fatalf("401 message: %q", msg)
		}
	}
	c.setenv("TRELLIS_TOKEN", h.Token)

	// A bootstrap token authenticates but may do nothing but the bootstrap exchange: Forbidden, worded by the hub.
	bt := strings.TrimSpace(c.ok("seed", "bootstrap-token", "create", "local", "--validity", "10m"))
	forbidden := c.fails("delete", "namespace", "kube-system", "--token", bt)
	if !strings.HasPrefix(forbidden, "Error from server (Forbidden): ") || strings.Contains(forbidden, "rpc error") || !strings.Contains(forbidden, "system:bootstrap:") {
		t.Fatalf("403 message: %q", forbidden)
	}
}

func TestSeedBootstrapToken(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	token := strings.TrimSpace(c.ok("seed", "bootstrap-token", "create", "local", "--validity", "10m"))
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
	contains(t, "negative validity", c.fails("seed", "bootstrap-token", "create", "local", "--validity", "-1s"), "--validity")
}

// TestAccessTokens: a user token works once created, and stops working when revoked, with the hub's message.
func TestAccessTokens(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	token := strings.TrimSpace(c.ok("token", "create", "alice-token", "--user", "alice@example.com", "--group", "dev", "--expires-in", "1h", "--description", "test"))
	if token == "" || strings.Contains(token, "\n") {
		t.Fatalf("token create printed %q", token)
	}
	if _, errOut, code := c.run("get", "projects", "--token", token); code != 0 && !strings.Contains(errOut, "(Forbidden)") {
		t.Fatalf("the new token is not accepted: %s", errOut)
	}
	contains(t, "get accesstokens", c.ok("get", "accesstokens", "-n", "trellis-system"), "alice-token")
	if out := c.ok("token", "revoke", "alice-token", "-n", "trellis-system"); out != "accesstoken.auth.trellis.dev/alice-token revoked\n" {
		t.Fatalf("revoke: %q", out)
	}
	contains(t, "revoked token", c.fails("get", "projects", "--token", token), "Error from server (Unauthorized): ", "revoked")
	contains(t, "user token elsewhere", c.fails("token", "create", "--user", "bob", "-n", "garden-dev"), "trellis-system")

	// A project viewer (bob in Gardener's example project) reads the project's shoots with -p, and is refused a
	// delete with the hub's Forbidden message.
	c.ok("apply", "-f", filepath.Join(gardenerExamples, "00-namespace-garden-dev.yaml"), "-f", filepath.Join(gardenerExamples, "05-project-dev.yaml"))
	bob := strings.TrimSpace(c.ok("token", "create", "--user", "bob.doe@example.com"))
	c.setenv("TRELLIS_TOKEN", bob)
	if out, errOut, code := c.run("get", "shoots", "-p", "dev"); code != 0 || out != "" || errOut != "No resources found in garden-dev namespace.\n" {
		t.Fatalf("viewer get shoots -p dev: exit %d %q %q", code, out, errOut)
	}
	denied := c.fails("delete", "project", "dev", "--confirm")
	if !strings.HasPrefix(denied, "Error from server (Forbidden): ") || !strings.Contains(denied, "bob.doe@example.com") || strings.Count(denied, "\n") != 1 {
		t.Fatalf("viewer delete: %q", denied)
	}
	contains(t, "neither user nor robot", c.fails("token", "create"), "--user or --service-account")
}
