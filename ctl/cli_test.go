package ctl_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/ctl"
	"github.com/trellis-dev/trellis/ctl/kinds"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// cli runs trellisctl in-process against a hub, with its own environment (HOME, TRELLIS_*, EDITOR).
type cli struct {
	t   *testing.T
	h   *hubtest.Hub
	ca  string
	env map[string]string
	mu  sync.Mutex
}

// newCLI returns a CLI whose environment points at h with the admin token, as `. .trellis/local/env` does.
func newCLI(t *testing.T, h *hubtest.Hub) *cli {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, h.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cli{t: t, h: h, ca: ca, env: map[string]string{
		"HOME": dir, "TRELLIS_HUB": strings.TrimPrefix(h.URL, "https://"), "TRELLIS_CA": ca, "TRELLIS_TOKEN": h.Token,
	}}
}

func (c *cli) setenv(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.env[k] = v
}

func (c *cli) getenv(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.env[k]
}

// run runs one command; stdin is "" unless given with runIn.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	return c.runIn(context.Background(), "", args...)
}

func (c *cli) runIn(ctx context.Context, stdin string, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := c.runTo(ctx, strings.NewReader(stdin), &out, &errb, args...)
	return out.String(), errb.String(), code
}

func (c *cli) runTo(ctx context.Context, stdin io.Reader, out, errw io.Writer, args ...string) int {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return ctl.Main(ctx, args, ctl.Options{Kinds: kinds.All, In: stdin, Out: out, Err: errw, Getenv: c.getenv, Version: "test"})
}

// ok runs a command that must succeed and returns its standard output.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("trellisctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail, with nothing on stdout, and returns its standard error.
func (c *cli) fails(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code == 0 {
		c.t.Fatalf("trellisctl %s succeeded\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	}
	if out != "" {
		c.t.Fatalf("trellisctl %s failed but printed to stdout: %s", strings.Join(args, " "), out)
	}
	return errOut
}

// lines is a writer whose lines a test waits for.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until the text contains all of want.
func (l *lines) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := l.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %q in:\n%s", missing, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func contains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, s)
		}
	}
}
