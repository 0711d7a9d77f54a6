package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestKubectlAuth: the real kubectl's `auth can-i`, `auth can-i --list` and `auth whoami` against a hub answer as
// the hub's authorizer decides the requests they describe, for a project's owner, a viewer, a robot (a
// ServiceAccount member with role admin, authenticated by a robot token) and a user of no project.
func TestKubectlAuth(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	owner, viewer, outsider := h.UserToken(t, "olivia"), h.UserToken(t, "vic", "team-v"), h.UserToken(t, "otto")
	mustDo := func(token, method, path, body string) []byte {
		t.Helper()
		code, out := h.DoToken(t, token, method, path, body)
		if code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
		return out
	}
	mustDo(owner, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev","members":[
		{"kind":"User","name":"vic","role":"viewer"},{"kind":"ServiceAccount","name":"ci","namespace":"garden-dev","role":"admin"}]}}`)
	h.WaitNamespace(t, "garden-dev")
	mustDo(owner, "POST", "/api/v1/namespaces/garden-dev/serviceaccounts", `{"metadata":{"name":"ci"}}`)
	var tok struct{ Status struct{ Token string } }
	if err := json.Unmarshal(mustDo(owner, "POST", "/apis/auth.trellis.dev/v1alpha1/namespaces/garden-dev/accesstokens",
		`{"metadata":{"name":"ci"},"spec":{"serviceAccountName":"ci"}}`), &tok); err != nil || tok.Status.Token == "" {
		t.Fatalf("robot token: %v %+v", err, tok)
	}
	robot := tok.Status.Token
	// kc runs kubectl as the user of token; the exit status is part of the answer (can-i exits 1 for "no").
	kc := func(token string, args ...string) (string, int) {
		t.Helper()
		return kubectlAs(t, kubectl, h, token)(args...)
	}

	// can-i: each user's answer to each question, "yes" or "no" (with kubectl's exit status 0 or 1).
	users := []struct{ name, token string }{{"owner", owner}, {"viewer", viewer}, {"robot", robot}, {"outsider", outsider}, {"admin", h.Token}}
	for _, tc := range []struct {
		args []string
		want []string // per user, in the order of users
	}{
		{[]string{"create", "shoots"}, []string{"yes", "no", "yes", "no", "yes"}},
		{[]string{"get", "shoots.core.gardener.cloud"}, []string{"yes", "yes", "yes", "no", "yes"}},
		{[]string{"list", "secrets"}, []string{"yes", "no", "yes", "no", "yes"}},
		{[]string{"delete", "project/dev"}, []string{"yes", "no", "yes", "no", "yes"}}, // the robot is an admin
		{[]string{"list", "cloudprofiles"}, []string{"yes", "yes", "yes", "yes", "yes"}},
		{[]string{"create", "seeds"}, []string{"no", "no", "no", "no", "yes"}},
		{[]string{"get", "/metrics"}, []string{"no", "no", "no", "no", "yes"}},
		{[]string{"get", "/apis"}, []string{"yes", "yes", "yes", "yes", "yes"}},
	} {
		for i, u := range users {
			out, code := kc(u.token, append([]string{"auth", "can-i"}, tc.args...)...)
			wantCode := map[string]int{"yes": 0, "no": 1}[tc.want[i]]
			// The answer is the last line (kubectl warns before it about a namespace given for a cluster-scoped
			// resource); a "no" may carry the denial's reason after " - ".
			answer, _, _ := strings.Cut(out[strings.LastIndex(out, "\n")+1:], " - ")
			if answer != tc.want[i] || code != wantCode {
				t.Errorf("%s: auth can-i %s: want %s (exit %d), got %q (exit %d)", u.name, strings.Join(tc.args, " "), tc.want[i], wantCode, out, code)
			}
		}
	}
	// Another project's namespace is out of the owner's reach.
	if out, code := kc(owner, "auth", "can-i", "list", "shoots", "-n", "garden-other"); !strings.HasPrefix(out, "no - ") || !strings.Contains(out, "not a member") || code != 1 {
		t.Errorf("owner: can-i list shoots in another namespace: got %q (exit %d)", out, code)
	}

	// can-i --list: the rules of the namespace, per resource.
	rules := func(token string) map[string]string {
		t.Helper()
		out, code := kc(token, "auth", "can-i", "--list")
		if code != 0 {
			t.Fatalf("auth can-i --list: exit %d: %s", code, out)
		}
		got := map[string]string{}
		// Lines are "<resource> <non-resource URLs> <resource names> <verbs>"; lines of non-resource rules start
		// with blanks. The verbs are the line's last bracketed list.
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, " ") {
				got[f[0]] = line[strings.LastIndex(line, "["):]
			}
		}
		return got
	}
	viewerRules := rules(viewer)
	for res, want := range map[string]string{
		"shoots.core.gardener.cloud":                    "[get list watch]",
		"cloudprofiles.core.gardener.cloud":             "[get list watch]",
		"selfsubjectaccessreviews.authorization.k8s.io": "[create]",
	} {
		if viewerRules[res] != want {
			t.Errorf("viewer: can-i --list: %s: want %s, got %q (all: %v)", res, want, viewerRules[res], viewerRules)
		}
	}
	if v, ok := viewerRules["secrets"]; ok {
		t.Errorf("viewer: can-i --list shows secrets %s", v)
	}
	if got := rules(owner)["secrets"]; got != "[get list watch create update patch delete]" {
		t.Errorf("owner: can-i --list: secrets: got %q", got)
	}

	// Discovery lists the reviews, as kube-apiserver does.
	out, code := kc(viewer, "api-resources", "--api-group=authorization.k8s.io", "-o", "name")
	if code != 0 {
		t.Errorf("api-resources of authorization.k8s.io: exit %d: %s", code, out)
	}
	contains(t, "api-resources of authorization.k8s.io", out, "selfsubjectaccessreviews.authorization.k8s.io", "selfsubjectrulesreviews.authorization.k8s.io")
	if out, code = kc(viewer, "api-resources", "--api-group=authentication.k8s.io", "-o", "name"); code != 0 || !strings.Contains(out, "selfsubjectreviews.authentication.k8s.io") {
		t.Errorf("api-resources of authentication.k8s.io: exit %d %s", code, out)
	}

	// whoami: the name and groups the hub authenticated.
	for _, tc := range []struct{ token, user, group string }{
		{owner, "olivia", "system:authenticated"},
		{viewer, "vic", "team-v"},
		{robot, "system:serviceaccount:garden-dev:ci", "system:serviceaccounts:garden-dev"},
	} {
		out, code := kc(tc.token, "auth", "whoami", "-o", "json")
		var rev struct {
			Kind   string
			Status struct {
				UserInfo struct {
					Username string
					Groups   []string
				}
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &rev) != nil || rev.Kind != "SelfSubjectReview" || rev.Status.UserInfo.Username != tc.user ||
			!strings.Contains(strings.Join(rev.Status.UserInfo.Groups, ","), tc.group) {
			t.Errorf("auth whoami: want %s in %s, got exit %d %s", tc.user, tc.group, code, out)
		}
	}
}

// kubectlAs returns a runner of kubectl against hub h as the user of token, in namespace garden-dev, with a
// kubeconfig, cache and HOME of its own; it returns kubectl's output, trimmed, and exit status.
func kubectlAs(t *testing.T, kubectl string, h *hubtest.Hub, token string) func(args ...string) (string, int) {
	t.Helper()
	command := kubectlCommandAs(t, kubectl, h, token)
	return func(args ...string) (string, int) {
		t.Helper()
		out, err := command(args...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return strings.TrimSpace(string(out)), code
	}
}

// kubectlCommandAs is kubectlAs's command, for a test that reads kubectl's output while it runs.
func kubectlCommandAs(t *testing.T, kubectl string, h *hubtest.Hub, token string) func(args ...string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), h.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: hub, context: {cluster: hub, user: u, namespace: garden-dev}}]
current-context: hub
`, h.URL, filepath.Join(dir, "ca.crt"), token), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) *exec.Cmd {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		return cmd
	}
}
