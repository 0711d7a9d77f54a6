package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

const gardenerExamples = "../../shared/gardener/examples"

func TestApplyGetDescribeDelete(t *testing.T) {
	h := hubtest.Start(t)
	c := newCLI(t, h)
	ns, project := filepath.Join(gardenerExamples, "00-namespace-garden-dev.yaml"), filepath.Join(gardenerExamples, "05-project-dev.yaml")

	// Gardener's own manifests apply as they are; a second apply changes nothing.
	if out := c.ok("apply", "-f", ns, "-f", project); out != "namespace/garden-dev created\nproject.core.gardener.cloud/dev created\n" {
		t.Fatalf("apply: %q", out)
	}
	if out := c.ok("apply", "-f", ns, "-f", project); out != "namespace/garden-dev unchanged\nproject.core.gardener.cloud/dev unchanged\n" {
		t.Fatalf("second apply: %q", out)
	}

	// get -o yaml re-applies without change (server-managed fields and status are ignored), also as a List.
	dir := t.TempDir()
	y := writeFile(t, filepath.Join(dir, "project.yaml"), c.ok("get", "project", "dev", "-o", "yaml"))
	contains(t, "get -o yaml", c.ok("get", "project", "dev", "-o", "yaml"), "resourceVersion:", "uid:", "creationTimestamp:", "namespace: garden-dev")
	if out := c.ok("apply", "-f", y); out != "project.core.gardener.cloud/dev unchanged\n" {
		t.Fatalf("apply of get -o yaml: %q", out)
	}
	if out := c.ok("apply", "-f", writeFile(t, filepath.Join(dir, "all.json"), c.ok("get", "namespaces", "-o", "json"))); strings.Contains(out, "configured") || !strings.Contains(out, "namespace/garden-dev unchanged") {
		t.Fatalf("apply of a List: %q", out)
	}
	changed := strings.Replace(readFile(t, y), "namespace: garden-dev", "namespace: garden-dev\n  description: changed", 1)
	if out := c.ok("apply", "-f", writeFile(t, y, changed)); out != "project.core.gardener.cloud/dev configured\n" {
		t.Fatalf("apply of a change: %q", out)
	}
	if got := c.ok("get", "project", "dev", "-o", "jsonpath={.spec.description}"); got != "changed\n" {
		t.Fatalf("description %q", got)
	}

	// Namespaced objects: -p names the project, whose spec.namespace is used; several documents per file.
	cm := writeFile(t, filepath.Join(dir, "cms", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: demo\ndata:\n  k: v\n---\n# a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: w\n  l: x\n")
	if out := c.ok("apply", "-f", filepath.Dir(cm), "-p", "dev"); out != "configmap/a created\nconfigmap/b created\n" {
		t.Fatalf("apply -p: %q", out)
	}
	table := c.ok("get", "configmaps", "-n", "garden-dev")
	if fields := strings.Fields(strings.Split(table, "\n")[0]); strings.Join(fields, " ") != "NAME DATA AGE" {
		t.Fatalf("table header: %q", table)
	}
	contains(t, "table", table, "a   ", "b   ")
	if out := c.ok("get", "cm", "-A", "-l", "app=demo", "-o", "name"); out != "configmap/a\n" {
		t.Fatalf("-A -l -o name: %q", out)
	}
	contains(t, "-A", c.ok("get", "configmaps", "-A"), "NAMESPACE", "garden-dev")
	contains(t, "get TYPE/NAME", c.ok("get", "configmap/a", "cm/b", "-p", "dev", "-o", "name"), "configmap/a\nconfigmap/b\n")
	var obj map[string]any
	if err := json.Unmarshal([]byte(c.ok("get", "configmap", "b", "-p", "dev", "-o", "json")), &obj); err != nil || obj["kind"] != "ConfigMap" {
		t.Fatalf("-o json: %v %v", obj, err)
	}
	contains(t, "get projects", c.ok("get", "projects", "-o", "wide"), "NAMESPACE", "STATUS", "OWNER", "dev", "garden-dev", "john.doe@example.com")
	contains(t, "list", c.ok("list", "namespaces"), "garden-dev")

	// describe
	contains(t, "describe", c.ok("describe", "project", "dev"), "Name:", "dev", "Kind:", "Project (core.gardener.cloud/v1beta1)", "Spec:", "owner:", "Events:")
	contains(t, "describe secret", c.ok("describe", "configmap", "a", "-p", "dev"), "Namespace:", "garden-dev", "Labels:", "app=demo", "Data:", "k: v")

	// The hub's errors: the message of its Status, nothing else.
	errOut := c.fails("get", "configmap", "nope", "-p", "dev")
	if errOut != "Error from server (NotFound): configmaps \"nope\" not found\n" {
		t.Fatalf("not found: %q", errOut)
	}
	contains(t, "delete without confirmation", c.fails("delete", "project", "dev"), "Error from server (Forbidden): ", "confirmation.gardener.cloud/deletion")
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: garden-dev\ndatta:\n  k: v\n")
	contains(t, "apply of an unknown field", c.fails("apply", "-f", bad), "datta", "unknown field")
	contains(t, "apply of an unknown kind", c.fails("apply", "-f", writeFile(t, filepath.Join(dir, "w.yaml"), "apiVersion: x/v1\nkind: Widget\nmetadata:\n  name: w\n")), "x/v1 Widget is not served")
	inDev := writeFile(t, filepath.Join(dir, "dev.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: garden-dev\n")
	contains(t, "namespace mismatch", c.fails("apply", "-f", inDev, "-n", "other"), `the object's namespace "garden-dev" does not match --namespace "other"`)

	// delete: by name, by selector, with the confirmation Gardener requires.
	if out := c.ok("delete", "configmaps", "-p", "dev", "-l", "app=demo"); out != "configmap/a deleted\n" {
		t.Fatalf("delete -l: %q", out)
	}
	if out := c.ok("delete", "-f", cm, "-p", "dev", "--ignore-not-found"); out != "configmap/b deleted\n" {
		t.Fatalf("delete -f: %q", out)
	}
	contains(t, "delete --confirm", c.ok("delete", "project", "dev", "--confirm"), "project.core.gardener.cloud/dev")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
