package ctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

func TestEditWatchCompletion(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	dir := t.TempDir()
	c.ok("apply", "-f", writeFile(t, filepath.Join(dir, "m.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: x\ndata:\n  a: \"1\"\n"))

	// watch streams the current state, then each change, until its context ends.
	var events lines
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- c.runTo(ctx, strings.NewReader(""), &events, &events, "watch", "configmaps", "-n", "x", "-o", "json")
	}()
	events.waitFor(t, `{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"`)
	var table lines
	go func() {
		_ = c.runTo(ctx, strings.NewReader(""), &table, &table, "get", "configmap", "settings", "-n", "x", "-w")
	}()
	table.waitFor(t, "NAME       DATA   AGE\nsettings   1 ")

	// edit with an editor that changes a value: the object is updated, the watchers see it.
	c.setenv("EDITOR", `sed -i 's/a: "1"/a: "2"\n  b: "3"/'`)
	if out := c.ok("edit", "configmap", "settings", "-n", "x"); out != "configmap/settings edited\n" {
		t.Fatalf("edit: %q", out)
	}
	events.waitFor(t, `{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap"`, `"data":{"a":"2","b":"3"}`)
	table.waitFor(t, "settings   2 ")
	c.ok("delete", "configmap/settings", "-n", "x")
	events.waitFor(t, `{"type":"DELETED"`)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch ended with exit %d:\n%s", code, events.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(events.String()), "\n") {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Type == "" {
			t.Fatalf("not an event line: %q", line)
		}
	}

	// edit that changes nothing, and edit to an invalid object, which keeps the file.
	c.ok("apply", "-f", writeFile(t, filepath.Join(dir, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: x\ndata:\n  a: \"1\"\n"))
	c.setenv("EDITOR", "true")
	if out, errOut, code := c.run("edit", "configmap", "settings", "-n", "x"); code != 0 || out != "" || errOut != "Edit cancelled, no changes made.\n" {
		t.Fatalf("edit without change: %d %q %q", code, out, errOut)
	}
	c.setenv("EDITOR", `sed -i 's/^data:/datta:/'`)
	invalid := c.fails("edit", "cm/settings", "-n", "x")
	contains(t, "invalid edit", invalid, "datta", "your changes are in ")
	if _, kept, ok := strings.Cut(invalid, "your changes are in "); ok { // the kept file is the user's, not the test's
		if err := os.Remove(strings.TrimSpace(kept)); err != nil {
			t.Errorf("the kept edit: %v", err)
		}
	}
	c.setenv("EDITOR", "false")
	contains(t, "failing editor", c.fails("edit", "cm/settings", "-n", "x"), `editor "false"`)

	// Completion of types, names (from the hub, in the namespace of -n), namespaces and output formats.
	complete := func(args ...string) []string {
		out := c.ok(append([]string{"__complete"}, args...)...)
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	if got := complete("get", "sho"); !containsAll(got, "shoots") {
		t.Fatalf("types: %v", got)
	}
	if got := complete("get", "configmaps", "-n", "x", ""); !containsAll(got, "settings", ":4") {
		t.Fatalf("names: %v", got)
	}
	if got := complete("describe", "-n", "x", "cm/"); !containsAll(got, "cm/settings") {
		t.Fatalf("TYPE/NAME: %v", got)
	}
	if got := complete("get", "configmaps", "-n", ""); !containsAll(got, "x", "kube-system") {
		t.Fatalf("namespaces: %v", got)
	}
	if got := complete("get", "shoots", "-o", ""); !containsAll(got, "wide", "yaml") {
		t.Fatalf("formats: %v", got)
	}
	contains(t, "bash completion", c.ok("completion", "bash"), "__start_trellisctl")
}

func containsAll(got []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
