package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

func TestApplyGetDelete(t *testing.T) {
	h := hubtest.Start(t)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, h.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifests := `apiVersion: v1
kind: Namespace
metadata:
  name: garden-dev
---
apiVersion: core.gardener.cloud/v1beta1
kind: Project
metadata:
  name: dev
spec:
  namespace: garden-dev
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: garden-dev
data:
  a: "1"
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	run1 := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(append([]string{"--hub", h.URL, "--ca", ca, "--token", h.Token}, args...), &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := run1("apply", "-f", dir)
	if err != nil || strings.Count(out, "created") != 3 {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// Applying again updates in place (a merge patch of the manifest).
	changed := strings.Replace(manifests, `a: "1"`, `a: "2"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err = run1("apply", "-f", filepath.Join(dir, "all.yaml")); err != nil || strings.Count(out, "configured") != 3 {
		t.Fatalf("re-apply: %v\n%s", err, out)
	}
	if out, err = run1("get", "configmaps", "settings", "-n", "garden-dev", "-o", "yaml"); err != nil || !strings.Contains(out, `a: "2"`) {
		t.Fatalf("get -o yaml: %v\n%s", err, out)
	}
	if out, err = run1("get", "projects"); err != nil || strings.TrimSpace(out) != "project/dev" {
		t.Fatalf("get projects: %v\n%s", err, out)
	}
	// The hub's errors reach the user with their reason.
	if out, err = run1("delete", "project", "dev"); err == nil || !strings.Contains(err.Error(), "confirmation.gardener.cloud/deletion") {
		t.Fatalf("delete without confirmation: %v\n%s", err, out)
	}
	if out, err = run1("delete", "configmap", "settings", "-n", "garden-dev"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if _, err = run1("get", "configmap", "settings", "-n", "garden-dev"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := run1("--token", "wrong", "get", "projects"); err == nil {
		t.Fatal("a wrong token was accepted")
	}
}
