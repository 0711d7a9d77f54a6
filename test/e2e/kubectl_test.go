package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/binproc"
)

// kubectlRun runs the real kubectl against a hub: kc answers its output and error, ok fails the test on an error.
type (
	kubectlRun  func(args ...string) (string, error)
	kubectlMust func(args ...string) string
)

// startKubectlHub starts the real hub binary with args and returns it with the real kubectl set up against it.
func startKubectlHub(t *testing.T, args ...string) (*binproc.Hub, kubectlRun, kubectlMust) {
	t.Helper()
	dir := t.TempDir()
	h := startHubAt(t, hubBinary(t), filepath.Join(dir, "data"), filepath.Join(dir, "hub.log"), freeLoopbackAddr(t), args...)
	kc, ok := kubectlFor(t, h.URL, filepath.Join(dir, "data", "pki", "ca.crt"), h.Token)
	return h, kc, ok
}

// kubectlFor sets the real kubectl up against the hub at url (a kubeconfig with its CA and the token, a cache and
// HOME in a directory of the test).
func kubectlFor(t *testing.T, url, caFile, token string) (kubectlRun, kubectlMust) {
	t.Helper()
	kubectl := kubectlBinary(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: hub, context: {cluster: hub, user: admin}}]
current-context: hub
`, url, caFile, token), 0o600); err != nil {
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
	return kc, ok
}
