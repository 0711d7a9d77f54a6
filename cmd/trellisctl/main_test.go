package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLightImports keeps trellisctl quick to start: none of the heavy packages whose init would slow every command
// down is in its binary. The start-up itself is measured by `make bench-cli` (test/bench/cli), not asserted here.
func TestLightImports(t *testing.T) {
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	heavyTrees := []string{"github.com/trellis-dev/trellis/hub/", "github.com/trellis-dev/trellis/agent/", "go.etcd.io/", "k8s.io/client-go/", "helm.sh/"}
	heavy := map[string]bool{"github.com/trellis-dev/trellis/hub": true, "k8s.io/apimachinery/pkg/runtime": true, "k8s.io/apimachinery/pkg/apis/meta/v1": true}
	// Leaf packages of client-go without client-go's weight: kubectl's JSONPath templates.
	light := map[string]bool{"k8s.io/client-go/util/jsonpath": true, "k8s.io/client-go/third_party/forked/golang/template": true}
	for _, pkg := range strings.Fields(string(deps)) {
		if light[pkg] {
			continue
		}
		bad := heavy[pkg]
		for _, tree := range heavyTrees {
			bad = bad || strings.HasPrefix(pkg, tree)
		}
		if bad {
			t.Errorf("trellisctl imports %s", pkg)
		}
	}
}
