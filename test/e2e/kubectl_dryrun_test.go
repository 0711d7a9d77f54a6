package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestKubectlServerDryRun: the real kubectl's `apply --dry-run=server`, `delete --dry-run=server` and `diff` against
// the real hub binary answer as for a write and change nothing: a Kubernetes kind (ConfigMap) and a Gardener kind
// (CloudProfile), created, changed and deleted by dry run, read back as they were before, at the same
// resourceVersions.
func TestKubectlServerDryRun(t *testing.T) {
	lightTest(t)
	// No controller loops (a list naming one "-name" and no "*" enables none): only kubectl writes, so that what the
	// hub holds is compared before and after the dry runs without a loop's write (a CloudProfile's finalizer) between.
	h, kc, ok := startKubectlHub(t, "--controllers=-shoot-statuslabel", "--disable-scheduler")
	// state is what the hub holds of the objects the test writes: their lists, with resourceVersions.
	state := func() string {
		t.Helper()
		var b strings.Builder
		for _, p := range []string{"/api/v1/namespaces/dry/configmaps", "/apis/core.gardener.cloud/v1beta1/cloudprofiles"} {
			req, _ := http.NewRequest("GET", h.URL+p, nil)
			req.Header.Set("Authorization", "Bearer "+h.Token)
			resp, err := h.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var list struct{ Items []json.RawMessage }
			if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil {
				t.Fatalf("GET %s: %d %s", p, resp.StatusCode, body)
			}
			for _, it := range list.Items {
				b.Write(it)
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	manifest := func(name, data, machineType string) string {
		return writeTemp(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"dry"},"data":{"k":%q}},
{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":%q},"spec":{"type":"local",
 "kubernetes":{"versions":[{"version":"1.35.4"}]},"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],
 "machineTypes":[{"name":%q,"cpu":"2","gpu":"0","memory":"8Gi"}],"regions":[{"name":"local"}]}}]}`, name, data, name, machineType))
	}

	ok("create", "namespace", "dry")
	empty := state()
	// Create by dry run.
	out := ok("apply", "--dry-run=server", "-f", manifest("d1", "v1", "m5.large"))
	contains(t, "apply --dry-run=server of new objects", out, "configmap/d1 created (server dry run)", "cloudprofile.core.gardener.cloud/d1 created (server dry run)")
	if got := state(); got != empty {
		t.Fatalf("a dry-run apply stored objects:\n%s", got)
	}
	if out, err := kc("get", "configmap", "d1", "-n", "dry"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("config map after a dry-run create: %v %s", err, out)
	}

	// Change by dry run: the answer is the changed object, the hub keeps the old one.
	ok("apply", "-f", manifest("d1", "v1", "m5.large"))
	before := state()
	out = ok("apply", "--dry-run=server", "-o", "json", "-f", manifest("d1", "v2", "m5.xlarge"))
	contains(t, "apply --dry-run=server of changes", out, `"k": "v2"`, `"name": "m5.xlarge"`)
	if got := state(); got != before {
		t.Errorf("a dry-run apply changed objects:\nbefore %s\nafter %s", before, got)
	}

	// Delete by dry run.
	out = ok("delete", "--dry-run=server", "-f", manifest("d1", "v1", "m5.large"))
	contains(t, "delete --dry-run=server", out, `configmap "d1" deleted from dry namespace (server dry run)`, `cloudprofile.core.gardener.cloud "d1" deleted (server dry run)`)
	if got := state(); got != before {
		t.Errorf("a dry-run delete changed objects:\nbefore %s\nafter %s", before, got)
	}
	ok("get", "configmap", "d1", "-n", "dry")
	ok("get", "cloudprofile", "d1")

	// kubectl diff: a server-side dry run of the apply, shown against what the hub holds. Changes are shown (exit
	// status 1) and not made; the unchanged manifest shows nothing (exit status 0).
	out, err := kc("diff", "-f", manifest("d1", "v2", "m5.xlarge"))
	if err == nil {
		t.Errorf("kubectl diff of a changed manifest: exit status 0, want 1 (differences); output:\n%s", out)
	}
	contains(t, "kubectl diff of a changed manifest", out, "-  k: v1", "+  k: v2", "-    name: m5.large", "+    name: m5.xlarge")
	if got := state(); got != before {
		t.Errorf("kubectl diff changed objects:\nbefore %s\nafter %s", before, got)
	}
	if out, err := kc("diff", "-f", manifest("d1", "v1", "m5.large")); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("kubectl diff of the unchanged manifest: %v, want no differences; output:\n%s", err, out)
	}

	// The same, for real, does what the dry runs said.
	ok("delete", "-f", manifest("d1", "v1", "m5.large"))
	if got := state(); got != empty {
		t.Errorf("after a real delete:\n%s", got)
	}
}
