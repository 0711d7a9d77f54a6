package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/trellis-dev/trellis/test/landscape"
)

// TestEnvFile sources the env file with sh and reads the values back, awkward characters included.
func TestEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	l := &landscape.Landscape{HubAddr: "127.0.0.1:8443", CAFile: "/tmp/a dir/it's ca.crt", Token: "abc-_DEF123"}
	if err := writeEnv(path, l); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"TRELLIS_HUB": l.HubAddr, "TRELLIS_CA": l.CAFile, "TRELLIS_TOKEN": l.Token} {
		out, err := exec.Command("sh", "-c", `. "$1" && sh -c 'printf %s "$'$2'"'`, "sh", path, name).CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("%s: got %q (%v), want %q", name, out, err, want)
		}
	}
}
