package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: agent.trellis.dev/v1alpha1\nkind: AgentConfiguration\nhubClientConection: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--config is required"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"--config", bad}, `hubClientConection: unknown field "hubClientConection"`},
	} {
		var out bytes.Buffer
		if code := run(tc.args, &out); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: output %q lacks %q", tc.args, out.String(), tc.want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var out bytes.Buffer
	l, err := newLogger(&out, "debug", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hello", "k", "v")
	if !strings.Contains(out.String(), `"msg":"hello"`) {
		t.Fatalf("json log: %q", out.String())
	}
	if _, err := newLogger(&out, "loud", "text"); err == nil {
		t.Fatal("accepted log level loud")
	}
	if _, err := newLogger(&out, "info", "xml"); err == nil {
		t.Fatal("accepted log format xml")
	}
}
