package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// trellisctl ca-rotation walks the hub's CA and admin token rotation through its phases and refuses the transitions
// a phase does not allow, naming the phase.
func TestCARotationCommand(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	contains(t, "status before any rotation", c.ok("ca-rotation", "status"), "Phase:           (never rotated)", "Current CA:")
	contains(t, "complete without a rotation", c.fails("ca-rotation", "complete"), `phase is ""`, "409")

	out := c.ok("ca-rotation", "start")
	contains(t, "start", out, "Phase:           Preparing", "New CA:", "Last initiation:")
	contains(t, "a second start", c.fails("ca-rotation", "start"), `phase is "Preparing"`)
	contains(t, "complete from Preparing", c.fails("ca-rotation", "complete"), `phase is "Preparing"`)

	contains(t, "prepared", c.ok("ca-rotation", "prepared"), "Phase:           Prepared")
	// Clients take the trust bundle of the Prepared phase (both CAs, rewritten by the hub in data-dir/pki/ca.crt):
	// on complete the hub serves a certificate of the new CA at once.
	bundle, err := os.ReadFile(filepath.Join(h.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.ca, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.ok("ca-rotation", "complete")
	contains(t, "complete", out, "Phase:           Completed", "Last completion:")
	// The admin token rotated in the same phases: the old one is refused now, the new one is in data-dir/admin-token.
	contains(t, "the old admin token after complete", c.fails("ca-rotation", "status"), "401")
	token, err := os.ReadFile(filepath.Join(h.DataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	c.setenv("TRELLIS_TOKEN", strings.TrimSpace(string(token)))
	if out := c.ok("ca-rotation", "status"); strings.Contains(out, "New CA:") {
		t.Errorf("status after complete still shows a new CA:\n%s", out)
	}
	contains(t, "an unknown action", c.fails("ca-rotation", "rollback"), "unknown action")
}
