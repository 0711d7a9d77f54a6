package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/doctest"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/timescale"
)

// trellisctlBinary builds trellisctl once per test binary.
func trellisctlBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(binaries(t, "cli", "github.com/trellis-dev/trellis/cmd/trellisctl"), "trellisctl")
}

// cliEnv is the environment of `. .trellis/local/env` for l, with trellisctl first on the PATH and a HOME of its own
// (no configuration file): what the documentation's examples assume. Settings of the caller's environment that
// would change trellisctl's behaviour are left out.
func cliEnv(t *testing.T, l *landscape.Landscape, bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "TRELLIS"), k == "HOME", k == "PATH", k == "EDITOR", k == "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+t.TempDir(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TRELLIS_HUB="+l.HubAddr, "TRELLIS_CA="+l.CAFile, "TRELLIS_TOKEN="+l.Token)
}

// cli runs trellisctl with an environment.
type cli struct {
	bin string
	env []string
}

// with returns the CLI with more environment variables (later ones win).
func (c cli) with(kv ...string) cli {
	return cli{bin: c.bin, env: append(append([]string(nil), c.env...), kv...)}
}

func (c cli) run(args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		code = -1
		e.WriteString(err.Error())
	}
	return o.String(), e.String(), code
}

// ok runs a command that must succeed and returns its standard output.
func (c cli) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		t.Fatalf("trellisctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail, print nothing on standard output (no data) and say why on standard error.
func (c cli) fails(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := c.run(args...)
	if code != 1 || out != "" {
		t.Fatalf("trellisctl %s: exit %d (want 1), stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
	}
	return errOut
}

// TestCLIAndDocs runs trellisctl, the real binary, against a landscape of real binaries (hub, seed, agent,
// provider-local, the local examples): first every example of docs/cli.md and docs/access.md as written (the
// documentation test), then issue 6's checks of users' access through the CLI: Gardener's example manifests apply;
// a project viewer reads but may not delete; `-o yaml` output applies again without change; watch streams changes;
// wrong, expired, revoked and missing tokens each get their own error and no data.
func TestCLIAndDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries")
	}
	lightTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(10*time.Minute))
	defer cancel()
	l := startLandscape(ctx, t, landscape.Config{Examples: true, RequireProviderLocal: true})
	bin := trellisctlBinary(t)
	admin := cli{bin: bin, env: cliEnv(t, l, bin)}
	root := moduleRoot(t)

	// The documentation shows the example shoot reconciled, at its latest generation: the shoot maintenance's first
	// run may move the generation (its tasks annotation) after the first reconciliation succeeded, and the shoot is
	// then reconciled again.
	limit := timescale.Scale(5 * time.Minute)
	for deadline := time.Now().Add(limit); ; time.Sleep(200 * time.Millisecond) {
		admin.ok(t, "wait", "shoot", "local", "-p", "local", "--for=jsonpath={.status.lastOperation.state}=Succeeded", "--timeout", "5m")
		state := admin.ok(t, "get", "shoot", "local", "-p", "local", "-o",
			"jsonpath={.metadata.generation} {.status.observedGeneration} {.status.lastOperation.state}")
		if f := strings.Fields(state); len(f) == 3 && f[0] == f[1] && f[2] == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example shoot is not reconciled at its latest generation after %v: generation, observed generation, state: %s", limit, state)
		}
	}

	t.Run("docs", func(t *testing.T) {
		for _, doc := range []string{"docs/cli.md", "docs/access.md"} {
			n := doctest.RunFile(t, filepath.Join(root, doc), t.TempDir(), admin.env)
			t.Logf("%s: %d commands", doc, n)
		}
	})

	t.Run("gardener examples and roles", func(t *testing.T) {
		// A garden has the extensions registered that Gardener's examples name: the seed's DNS provider, the shoot's
		// networking and its extension (Gardener's ExtensionValidator refuses them otherwise).
		if err := l.RegisterExtensions(ctx, "gardener-examples", "DNSRecord/aws-route53", "Network/calico", "Extension/foobar"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		files := fillGardenerExamples(t, dir)
		out := admin.ok(t, "apply", "-f", dir)
		for _, f := range files {
			if !strings.Contains(out, f.name+" created") {
				t.Errorf("apply -f %s: no %q in\n%s", dir, f.name+" created", out)
			}
		}
		// A second apply changes nothing.
		if again := admin.ok(t, "apply", "-f", dir); strings.Contains(again, " created") || strings.Contains(again, " configured") {
			t.Errorf("second apply:\n%s", again)
		}

		// `get -o yaml` applies again without change, for every kind of the examples (several documents in a List).
		for _, f := range files {
			args := []string{"get", f.resource, f.objName, "-o", "yaml"}
			if f.namespace != "" {
				args = append(args, "-n", f.namespace)
			}
			y := filepath.Join(t.TempDir(), "object.yaml")
			if err := os.WriteFile(y, []byte(admin.ok(t, args...)), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := admin.ok(t, "apply", "-f", y); got != f.name+" unchanged\n" {
				t.Errorf("apply of %s -o yaml: %q", f.name, got)
			}
		}

		// Gardener's example project makes bob.doe@example.com a viewer and alice.doe@example.com an admin.
		bob := admin.with("TRELLIS_TOKEN=" + strings.TrimSpace(admin.ok(t, "token", "create", "bob-doe", "--user", "bob.doe@example.com", "--expires-in", "1h")))
		shootName := ""
		for _, f := range files {
			if f.resource == "shoots.core.gardener.cloud" {
				shootName = f.objName
			}
		}
		shoots := bob.ok(t, "get", "shoots", "-p", "dev")
		if lines := strings.Split(shoots, "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "NAME ") || !strings.HasPrefix(lines[1], shootName+" ") {
			t.Errorf("viewer's get shoots -p dev:\n%s", shoots)
		}
		errOut := bob.fails(t, "delete", "shoot", shootName, "-p", "dev", "--confirm")
		want := fmt.Sprintf(`Error from server (Forbidden): shoots.core.gardener.cloud %q is forbidden: User "bob.doe@example.com" cannot patch resource "shoots" in API group "core.gardener.cloud" in the namespace "garden-dev"`, shootName)
		if !strings.HasPrefix(errOut, want) {
			t.Errorf("viewer's delete --confirm:\n%s\nwant prefix\n%s", errOut, want)
		}
		errOut = bob.fails(t, "delete", "shoot", shootName, "-p", "dev")
		want = fmt.Sprintf(`Error from server (Forbidden): shoots.core.gardener.cloud %q is forbidden: User "bob.doe@example.com" cannot delete resource "shoots" in API group "core.gardener.cloud" in the namespace "garden-dev"`, shootName)
		if !strings.HasPrefix(errOut, want) {
			t.Errorf("viewer's delete:\n%s\nwant prefix\n%s", errOut, want)
		}
		if n := strings.Count(errOut, "\n"); n != 1 {
			t.Errorf("the refusal takes %d lines, not one:\n%s", n, errOut)
		}
		admin.ok(t, "get", "shoot", shootName, "-p", "dev") // still there
		contains(t, "viewer's get secrets", bob.fails(t, "get", "secrets", "-p", "dev"), `Error from server (Forbidden): secrets is forbidden: User "bob.doe@example.com" cannot list resource "secrets"`)
		contains(t, "viewer's get projects", bob.ok(t, "get", "projects", "-o", "name"), "project.core.gardener.cloud/dev\n")
		if got := bob.ok(t, "get", "projects", "-o", "name"); strings.Contains(got, "project.core.gardener.cloud/local") {
			t.Errorf("bob sees a project he is no member of:\n%s", got)
		}
	})

	t.Run("watch", func(t *testing.T) {
		admin.ok(t, "apply", "-p", "local", "-f", writeTemp(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"watched"},"data":{"n":"0"}}`))
		cmd := exec.Command(bin, "watch", "configmap", "watched", "-p", "local", "-o", "json", "--timeout", "60s")
		cmd.Env = admin.env
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		events := make(chan string, 16)
		go func() {
			defer close(events)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
			for sc.Scan() {
				var ev struct {
					Type   string `json:"type"`
					Object struct {
						Data map[string]string `json:"data"`
					} `json:"object"`
				}
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					events <- "bad line: " + sc.Text()
					continue
				}
				events <- ev.Type + " " + ev.Object.Data["n"]
			}
		}()
		next := func(want string) {
			t.Helper()
			select {
			case got, ok := <-events:
				if !ok {
					t.Fatalf("watch ended before %q: %s", want, stderr.String())
				}
				if got != want {
					t.Fatalf("watch event %q, want %q", got, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no watch event %q within 30s: %s", want, stderr.String())
			}
		}
		next("ADDED 0")
		for i := 1; i <= 3; i++ {
			admin.ok(t, "patch", "configmap", "watched", "-p", "local", "--patch", fmt.Sprintf(`{"data":{"n":"%d"}}`, i))
			next(fmt.Sprintf("MODIFIED %d", i))
		}
		admin.ok(t, "delete", "configmap", "watched", "-p", "local")
		next("DELETED 3")
	})

	// kubectl, the real one, knows the hub's kinds by Gardener's short names and categories from the hub's discovery.
	t.Run("kubectl", func(t *testing.T) {
		_, run := kubectlFor(t, l.HubURL, l.CAFile, l.Token)
		if out := run("api-resources", "--api-group", "core.gardener.cloud"); !regexp.MustCompile(`(?m)^cloudprofiles +cprofile,cpfl +core\.gardener\.cloud/v1beta1 +false +CloudProfile$`).MatchString(out) {
			t.Errorf("kubectl api-resources: no cloudprofiles with their short names in\n%s", out)
		}
		if got := run("get", "cpfl", "local", "-o", "name"); got != "cloudprofile.core.gardener.cloud/local\n" {
			t.Errorf("kubectl get cpfl local -o name: %q", got)
		}
		contains(t, "kubectl get ctrlinst", run("get", "ctrlinst", "-o", "name"), "controllerinstallation.core.gardener.cloud/provider-local-")
		if got := run("get", "all", "-n", "garden-local", "-o", "name"); got != "shoot.core.gardener.cloud/local\n" {
			t.Errorf("kubectl get all -n garden-local -o name: %q", got)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		const listShoots = "get shoots -A"
		args := strings.Fields(listShoots)
		for name, expires := range map[string]string{"e2e-expiring": "1s", "e2e-revoked": "1h"} {
			tok := strings.TrimSpace(admin.ok(t, "token", "create", name, "--user", name+"@example.com", "--group", "system:masters", "--expires-in", expires))
			user := admin.with("TRELLIS_TOKEN=" + tok)
			if name == "e2e-revoked" {
				if out := user.ok(t, args...); !strings.Contains(out, "garden-local") {
					t.Fatalf("a valid token: %s", out)
				}
				admin.ok(t, "token", "revoke", name, "-n", "trellis-system")
				contains(t, "revoked token", user.fails(t, args...), "Error from server (Unauthorized): token trellis-system/e2e-revoked was revoked\n")
				continue
			}
			time.Sleep(1100 * time.Millisecond)
			got := user.fails(t, args...)
			if !regexp.MustCompile(`^Error from server \(Unauthorized\): token trellis-system/e2e-expiring expired at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(got) {
				t.Errorf("expired token: %q", got)
			}
		}
		contains(t, "wrong token", admin.with("TRELLIS_TOKEN=trl_"+strings.Repeat("A", 43)).fails(t, args...), "Error from server (Unauthorized): invalid bearer token\n")
		contains(t, "missing token", admin.with("TRELLIS_TOKEN=").fails(t, args...), "Error from server (Unauthorized): a valid bearer token or seed client certificate is required\n")
	})
}

// kubectlBinary is $KUBECTL, else the kubectl of the test binaries (bin/testbin, or the testbin cache, where
// `make bench-cli` builds it), else the one on the PATH; the test is skipped without one.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	candidates := []string{filepath.Join(testBinDir(t), "kubectl")}
	cache := os.Getenv("TESTBIN_CACHE")
	if home, err := os.UserHomeDir(); cache == "" && err == nil {
		cache = filepath.Join(home, ".cache", "trellis", "testbin")
	}
	if cached, _ := filepath.Glob(filepath.Join(cache, "kubectl-*", "kubectl")); len(cached) > 0 {
		sort.Sort(sort.Reverse(sort.StringSlice(cached)))
		candidates = append(candidates, cached...)
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	t.Skip("no kubectl: set KUBECTL, or run `make bench-cli`, which builds one into the testbin cache")
	return ""
}

func contains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s: no %q in\n%s", what, w, got)
		}
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// moduleRoot is the repository's root.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := binproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// exampleObject is one object of Gardener's examples as written into the directory apply reads.
type exampleObject struct {
	name      string // as trellisctl names it: project.core.gardener.cloud/dev
	resource  string // shoots.core.gardener.cloud
	namespace string
	objName   string
}

// fillGardenerExamples writes Gardener's example manifests of the kinds the hub serves into dir, with their
// placeholders filled, one file per document in the examples' order, and returns the objects. Left out: the
// component configurations (not served), the Bastion (it needs its shoot scheduled on a seed, which the examples'
// seed never is), the ControllerInstallation (the controller-manager owns installations: it deletes one that no seed
// needs, as Gardener's does) and the ManagedSeed and ManagedSeedSet (they would make the example shoot a seed). The namespaces
// the examples use without a manifest (garden-trial of the quota) come first.
func fillGardenerExamples(t *testing.T, dir string) []exampleObject {
	t.Helper()
	src, err := filepath.Glob(filepath.Join(gardenerexamples.Dir(t), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(src, func(i, j int) bool { return exampleOrder(src[i]) < exampleOrder(src[j]) })
	docs := []map[string]any{{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "garden-trial"}}}
	for _, f := range src {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range strings.Split(string(raw), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(d), &obj); err != nil || obj == nil {
				continue
			}
			av, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			if _, served := api.KindFor(av, kind); !served || kind == "Bastion" || kind == "ControllerInstallation" || kind == "ManagedSeed" || kind == "ManagedSeedSet" {
				continue
			}
			docs = append(docs, gardenerexamples.Fill(obj).(map[string]any))
		}
	}
	var out []exampleObject
	for i, obj := range docs {
		k, _ := api.KindFor(obj["apiVersion"].(string), obj["kind"].(string))
		md := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		res := k.Resource
		if k.Group != "" {
			res += "." + k.Group
		}
		kindName := strings.ToLower(k.Kind)
		if k.Group != "" {
			kindName += "." + k.Group
		}
		// Objects of a kind served in several versions are named by the resource alone (v1 wins; see docs/cli.md).
		out = append(out, exampleObject{name: kindName + "/" + name, resource: res, namespace: ns, objName: name})
		y, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.yaml", i)), y, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// exampleOrder sorts Gardener's example files by their number prefix (100-bastion after 90-shoot).
func exampleOrder(path string) int {
	var n int
	_, _ = fmt.Sscanf(filepath.Base(path), "%d-", &n)
	return n
}
