package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlServerDryRun: the real kubectl's `apply --dry-run=server` and `delete --dry-run=server` against the
// real hub binary answer as for a write and change nothing: a Kubernetes kind (ConfigMap) and a Gardener kind
// (CloudProfile), created, changed and deleted by dry run, read back as they were before, at the same
// resourceVersions.
func TestKubectlServerDryRun(t *testing.T) {
	kubectl := kubectlBinary(t)
	dir := t.TempDir()
	// No controller loops (a list naming one "-name" and no "*" enables none): only kubectl writes, so that what the
	// hub holds is compared before and after the dry runs without a loop's write (a CloudProfile's finalizer) between.
	h := startHubAt(t, hubBinary(t), filepath.Join(dir, "data"), filepath.Join(dir, "hub.log"), freeLoopbackAddr(t),
		"--controllers=-shoot-statuslabel", "--disable-scheduler")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: hub, context: {cluster: hub, user: admin}}]
current-context: hub
`, h.URL, filepath.Join(dir, "data", "pki", "ca.crt"), h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := kc(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
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

	// The namespace the test writes in.
	ok("apply", "-f", writeTemp(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"dry"}}`))
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

	// The same, for real, does what the dry runs said.
	ok("delete", "-f", manifest("d1", "v1", "m5.large"))
	if got := state(); got != empty {
		t.Errorf("after a real delete:\n%s", got)
	}
}
