package dashboard_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// The browser tests drive a real headless Chromium (Debian's chromium; .ci/run installs it) against a real hub
// started in-process, with fixtures written through the hub's REST API as an admin and, for what a seed's agent
// would report, through the status subresource.

const (
	alice = "alice" // admin of project dev
	vic   = "vic"   // viewer of project dev
	bob   = "bob"   // owner of project ops only
)

// browser starts Chromium for the test, trusting exactly the hub's serving certificate (by its public key), with a
// fresh profile directory; every user gets an isolated browser context of it (own cookies).
type browser struct {
	t     *testing.T
	alloc context.Context
	root  context.Context
	hub   *hubtest.Hub
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TRELLIS_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH (apt-get install -y chromium) and TRELLIS_REQUIRE_BROWSER is set")
	}
	t.Skip("no chromium on PATH: apt-get install -y chromium (TRELLIS_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// spkiHash is Chromium's --ignore-certificate-errors-spki-list entry for the hub's serving certificate.
func spkiHash(t *testing.T, h *hubtest.Hub) string {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	conn, err := tls.Dial("tcp", h.Addr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func startBrowser(t *testing.T, h *hubtest.Hub) *browser {
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spkiHash(t, h)),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium's own temporary directories (org.chromium.Chromium.*) go where the test cleans up.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancelRoot := chromedp.NewContext(alloc)
	if _, err := chromedp.Run(root, chromedp.Evaluate[int]("1")); err != nil {
		cancelRoot()
		cancelAlloc()
		t.Fatalf("start %s: %v", exe, err)
	}
	t.Cleanup(func() { cancelRoot(); cancelAlloc() }) // ends the browser process and removes nothing else
	return &browser{t: t, alloc: alloc, root: root, hub: h}
}

// page is one user's tab in its own browser context.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	mu   sync.Mutex
	logs []string
}

func (b *browser) newPage(t *testing.T) *page {
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, base: b.hub.URL + "/dashboard"}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	// Console errors, exceptions and CSP violations fail the test at its end.
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				p.logs = append(p.logs, fmt.Sprintf("%s: %s", m.Type, m.Text))
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.logs {
			if isExpectedConsole(l) {
				continue
			}
			t.Errorf("browser console: %s", l)
		}
	})
	return p
}

// isExpectedConsole tells the console lines the tests cause on purpose: the browser logs every refused request
// (a 4xx answer to fetch) as a failed resource load.
func isExpectedConsole(l string) bool {
	return strings.Contains(l, "Failed to load resource: the server responded with a status of 4") ||
		// Chromium cancels requests in flight when the machine's network interfaces change (other tests create
		// some); the page's watches resume by themselves.
		strings.Contains(l, "net::ERR_NETWORK_CHANGED")
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := p.run(steps...); err != nil {
		p.fail(err)
	}
}

// run runs browser steps, 30 s at most (scaled: test/timescale).
func (p *page) run(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, timescale.Scale(30*time.Second))
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// fail ends the test with err, a browser step's, after a screenshot of the page.
func (p *page) fail(err error) {
	p.t.Helper()
	p.shot("failure-" + strings.ReplaceAll(p.t.Name(), "/", "-"))
	p.t.Fatalf("browser: %v", err)
}

// goTo loads the dashboard's page at path. Chromium fails a load with net::ERR_NETWORK_CHANGED when the machine's
// network interfaces change while it loads (other tests' nodes create and remove some): such a load is made again,
// as a user reloads, three attempts in all.
func (p *page) goTo(path string) {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		err := p.run(chromedp.Navigate(p.base + path))
		switch {
		case err == nil:
			return
		case strings.Contains(err.Error(), "net::ERR_NETWORK_CHANGED") && attempt < 3:
			p.t.Logf("loading %s: %v; loading it again", path, err)
			continue
		}
		p.fail(err)
	}
}

// eval evaluates a JavaScript expression (promises awaited) and decodes its value into T.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timescale.Scale(30*time.Second))
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript predicate is true.
func (p *page) waitJS(what, predicate string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timescale.Scale(20*time.Second))
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		p.shot("failure-" + strings.ReplaceAll(p.t.Name(), "/", "-"))
		body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string]("document.body.innerText.slice(0, 2000)"))
		p.t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, body)
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? "")`, sel))
}

func (p *page) exists(sel string) bool {
	p.t.Helper()
	return eval[bool](p, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
}

// click clicks the element sel matches (a CSS selector) the way a user does.
func (p *page) click(sel string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(sel)))
}

// fill sets an input's value as typing would (input events, so Svelte's bindings see it).
func (p *page) fill(sel, value string) {
	p.t.Helper()
	p.do(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.select?.();
			e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, sel))(ctx, t)
		return err
	}))
	if value != "" {
		p.do(chromedp.SendKeys(chromedp.CSS(sel), value))
	}
}

// shot writes a screenshot of the viewport (1440×900) to bin/screenshots/<name>.png.
func (p *page) shot(name string) {
	dir := filepath.Join("..", "bin", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Log(err)
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Log(err)
	}
}

// login opens the dashboard and logs in with token.
func (p *page) login(token string) {
	p.t.Helper()
	p.goTo("/")
	p.do(chromedp.WaitVisible(chromedp.CSS("textarea[name=token]")))
	p.fill("textarea[name=token]", token)
	p.click("button[type=submit]")
	p.do(chromedp.WaitVisible(chromedp.CSS("[data-testid=user]")))
}

// fetchStatus has the page call the hub through the dashboard's API bridge, as its own scripts do, and returns the
// HTTP status.
func (p *page) fetchStatus(method, path, body, contentType string) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`fetch("/dashboard/api%s", {method: %q, headers: {"X-Trellis-Dashboard": "1", "Content-Type": %q}, body: %s}).then(r => r.status)`,
		path, method, contentType, map[bool]string{true: "undefined", false: fmt.Sprintf("%q", body)}[body == ""]))
}

func mustDo(t *testing.T, h *hubtest.Hub, method, path string, body any, want int, header ...string) []byte {
	t.Helper()
	code, out := h.Do(t, method, path, body, header...)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

const (
	shootsDev = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots"
	mergePtch = "application/merge-patch+json"
)

// landscape writes the fixtures: a cloud profile, projects dev (alice admin, vic viewer) and ops (bob), a
// credentials binding, a seed with status, and shoots.
func landscape(t *testing.T, h *hubtest.Hub) {
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", map[string]any{
		"metadata": map[string]any{"name": "aws"},
		"spec": map[string]any{
			"type": "aws",
			"kubernetes": map[string]any{"versions": []any{
				map[string]any{"version": "1.34.1", "classification": "preview"},
				map[string]any{"version": "1.33.4", "classification": "supported"},
				map[string]any{"version": "1.32.8", "classification": "deprecated"},
			}},
			"machineImages": []any{map[string]any{"name": "gardenlinux", "versions": []any{
				map[string]any{"version": "1592.1.0", "classification": "supported", "cri": []any{map[string]any{"name": "containerd"}}, "architectures": []any{"amd64"}},
			}}},
			"machineTypes": []any{
				map[string]any{"name": "m5.large", "cpu": "2", "gpu": "0", "memory": "8Gi", "architecture": "amd64", "usable": true},
				map[string]any{"name": "m5.xlarge", "cpu": "4", "gpu": "0", "memory": "16Gi", "architecture": "amd64", "usable": true},
			},
			"volumeTypes": []any{map[string]any{"name": "gp3", "class": "standard", "usable": true}, map[string]any{"name": "io1", "class": "premium", "usable": true}},
			"regions": []any{
				map[string]any{"name": "eu-west-1", "zones": []any{map[string]any{"name": "eu-west-1a"}, map[string]any{"name": "eu-west-1b"}, map[string]any{"name": "eu-west-1c"}}},
				map[string]any{"name": "us-east-1", "zones": []any{map[string]any{"name": "us-east-1a"}}},
			},
		},
	}, 201)
	project := func(name string, members ...map[string]any) {
		mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/projects", map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"namespace": "garden-" + name, "description": "Shoots of team " + name + ".", "purpose": "development", "members": members},
		}, 201)
		h.WaitNamespace(t, "garden-"+name)
	}
	project("dev", map[string]any{"kind": "User", "name": alice, "role": "admin"}, map[string]any{"kind": "User", "name": vic, "role": "viewer"})
	project("ops", map[string]any{"kind": "User", "name": bob, "role": "admin"})
	mustDo(t, h, "POST", "/api/v1/namespaces/garden-dev/secrets", map[string]any{"metadata": map[string]any{"name": "aws-creds"}, "stringData": map[string]string{"accessKeyID": "x"}}, 201)
	mustDo(t, h, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings", map[string]any{
		"metadata": map[string]any{"name": "aws-creds"}, "provider": map[string]any{"type": "aws"},
		"credentialsRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "namespace": "garden-dev", "name": "aws-creds"},
	}, 201)
	// The extension of the seed and the shoots (the hub admits them once their types are registered).
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/controllerregistrations", map[string]any{
		"metadata": map[string]any{"name": "provider-aws"},
		"spec": map[string]any{"resources": []any{map[string]any{"kind": "Infrastructure", "type": "aws"},
			map[string]any{"kind": "ControlPlane", "type": "aws"}, map[string]any{"kind": "Worker", "type": "aws"},
			map[string]any{"kind": "Network", "type": "calico"}, map[string]any{"kind": "OperatingSystemConfig", "type": "gardenlinux"}}},
	}, 201)
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", map[string]any{
		"metadata": map[string]any{"name": "aws-eu1"},
		"spec": map[string]any{
			"provider": map[string]any{"type": "aws", "region": "eu-west-1"},
			"networks": map[string]any{"nodes": "10.240.0.0/16", "pods": "10.241.128.0/17", "services": "10.241.0.0/17"},
		},
	}, 201)
	now := time.Now().UTC().Format(time.RFC3339)
	mustDo(t, h, "PATCH", "/apis/core.gardener.cloud/v1beta1/seeds/aws-eu1/status", map[string]any{"status": map[string]any{
		"capacity": map[string]string{"shoots": "250"}, "allocatable": map[string]string{"shoots": "200"}, "kubernetesVersion": "1.33.4",
		"clientCertificateExpirationTimestamp": time.Now().Add(300 * 24 * time.Hour).UTC().Format(time.RFC3339),
		"conditions": []any{
			map[string]any{"type": "GardenletReady", "status": "True", "reason": "GardenletReady", "message": "Gardenlet is posting ready status.", "lastTransitionTime": now, "lastUpdateTime": now},
			map[string]any{"type": "BackupBucketsReady", "status": "True", "reason": "BackupBucketsAvailable", "message": "Backup Buckets are available.", "lastTransitionTime": now, "lastUpdateTime": now},
			map[string]any{"type": "ExtensionsReady", "status": "True", "reason": "AllExtensionsReady", "message": "All extensions installed into the seed cluster are ready and healthy.", "lastTransitionTime": now, "lastUpdateTime": now},
		},
	}}, 200, "Content-Type", mergePtch)
	newShoot(t, h, "garden-dev", "web", "1.33.4", "production")
	newShoot(t, h, "garden-dev", "db", "1.32.8", "development")
	setStatus(t, h, "garden-dev", "db", map[string]any{
		"lastOperation": map[string]any{"type": "Reconcile", "state": "Error", "progress": 62, "description": "Waiting until the worker pools are ready", "lastUpdateTime": now},
		"lastErrors":    []any{map[string]any{"description": "infrastructure: rate limit exceeded while creating the NAT gateway", "codes": []string{"ERR_INFRA_RATE_LIMITS_EXCEEDED"}, "taskID": "Deploying Shoot infrastructure", "lastUpdateTime": now}},
		"conditions":    conditions(now, "False"),
	})
	newShoot(t, h, "garden-ops", "monitoring", "1.33.4", "infrastructure")
	// The seed's heartbeat: the Lease its agent renews (the namespace may exist already).
	if code, out := h.Do(t, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "gardener-system-seed-lease"}}); code != 201 && code != 409 {
		t.Fatalf("lease namespace: %d %s", code, out)
	}
	mustDo(t, h, "POST", "/apis/coordination.k8s.io/v1/namespaces/gardener-system-seed-lease/leases", map[string]any{
		"metadata": map[string]any{"name": "aws-eu1"},
		"spec":     map[string]any{"holderIdentity": "aws-eu1", "leaseDurationSeconds": 40, "renewTime": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")},
	}, 201)
	// An installation of the extension on the seed (the hub's controllerregistration-seed loop is off in these tests:
	// the installation is written here, its conditions as the agent reports them).
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/controllerinstallations", map[string]any{
		"metadata": map[string]any{"name": "provider-aws-x7k2p"},
		"spec":     map[string]any{"registrationRef": map[string]any{"name": "provider-aws"}, "seedRef": map[string]any{"name": "aws-eu1"}},
	}, 201)
	var instConds []any
	for _, c := range [][2]string{{"Valid", "True"}, {"Installed", "True"}, {"Healthy", "True"}, {"Progressing", "False"}, {"Required", "True"}} {
		instConds = append(instConds, map[string]any{"type": c[0], "status": c[1], "reason": c[0], "message": c[0] + " as the test says", "lastTransitionTime": now, "lastUpdateTime": now})
	}
	mustDo(t, h, "PATCH", "/apis/core.gardener.cloud/v1beta1/controllerinstallations/provider-aws-x7k2p/status",
		map[string]any{"status": map[string]any{"conditions": instConds}}, 200, "Content-Type", mergePtch)
	mustDo(t, h, "POST", "/api/v1/namespaces/garden-dev/events", map[string]any{
		"metadata":       map[string]any{"name": "web.1"},
		"involvedObject": map[string]any{"kind": "Shoot", "apiVersion": "core.gardener.cloud/v1beta1", "namespace": "garden-dev", "name": "web"},
		"reason":         "Hibernated", "message": "Hibernating cluster due to schedule", "type": "Normal", "count": 2,
		"firstTimestamp": now, "lastTimestamp": now, "source": map[string]any{"component": "shoot-hibernation"},
	}, 201)
	// More shoots of dev in the states a fleet shows, for the screenshots.
	for _, s := range []struct {
		name, version, purpose string
		status                 map[string]any
	}{
		{"analytics", "1.33.4", "production", map[string]any{
			"lastOperation": map[string]any{"type": "Reconcile", "state": "Processing", "progress": 45, "description": "Waiting until the worker pools are rolled out", "lastUpdateTime": now},
			"conditions":    conditions(now, "Progressing")}},
		{"staging", "1.33.4", "testing", map[string]any{
			"hibernated":    true,
			"lastOperation": map[string]any{"type": "Reconcile", "state": "Succeeded", "progress": 100, "description": "Shoot cluster has been hibernated", "lastUpdateTime": now},
			"conditions":    conditions(now, "True")}},
		{"ml-gpu", "1.34.1", "evaluation", map[string]any{
			"lastOperation": map[string]any{"type": "Create", "state": "Processing", "progress": 12, "description": "Deploying Shoot infrastructure", "lastUpdateTime": now}}},
		{"legacy", "1.33.4", "development", map[string]any{
			"lastOperation": map[string]any{"type": "Reconcile", "state": "Failed", "progress": 80, "description": "Flow failed: the worker pool did not become ready", "lastUpdateTime": now},
			"lastErrors":    []any{map[string]any{"description": "machine type m5.large is out of capacity in zone eu-west-1a", "codes": []string{"ERR_INFRA_RESOURCES_DEPLETED"}, "taskID": "Deploying worker pools", "lastUpdateTime": now}},
			"constraints":   []any{map[string]any{"type": "HibernationPossible", "status": "False", "reason": "WorkersNotReady", "message": "the worker pool is not ready", "lastTransitionTime": now, "lastUpdateTime": now}},
			"conditions":    conditions(now, "False")}},
	} {
		newShoot(t, h, "garden-dev", s.name, s.version, s.purpose)
		if s.name == "staging" {
			mustDo(t, h, "PATCH", shootsDev+"/staging", `{"spec":{"hibernation":{"enabled":true}}}`, 200, "Content-Type", mergePtch)
		}
		setStatus(t, h, "garden-dev", s.name, s.status)
	}
}

func newShoot(t *testing.T, h *hubtest.Hub, ns, name, version, purpose string) {
	t.Helper()
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/"+ns+"/shoots", shootObject(name, version, purpose, ns == "garden-dev"), 201)
}

func shootObject(name, version, purpose string, binding bool) map[string]any {
	spec := map[string]any{
		"cloudProfile": map[string]any{"kind": "CloudProfile", "name": "aws"},
		"region":       "eu-west-1", "purpose": purpose, "seedName": "aws-eu1",
		"provider": map[string]any{"type": "aws", "workers": []any{map[string]any{
			"name": "worker-1", "minimum": 1, "maximum": 3, "zones": []string{"eu-west-1a"},
			"machine": map[string]any{"type": "m5.large", "image": map[string]any{"name": "gardenlinux", "version": "1592.1.0"}},
		}}},
		"kubernetes": map[string]any{"version": version},
		"networking": map[string]any{"type": "calico", "nodes": "10.250.0.0/16"},
	}
	if binding {
		spec["credentialsBindingName"] = "aws-creds"
	}
	return map[string]any{"metadata": map[string]any{"name": name}, "spec": spec}
}

func conditions(now, status string) []any {
	var out []any
	for _, c := range []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy", "EveryNodeReady", "SystemComponentsHealthy"} {
		st := "True"
		if c == "EveryNodeReady" {
			st = status
		}
		out = append(out, map[string]any{"type": c, "status": st, "reason": c + "Check", "message": "checked by the test", "lastTransitionTime": now, "lastUpdateTime": now})
	}
	return out
}

// setStatus writes a shoot's status as its seed's agent would (merge patch of the status subresource).
func setStatus(t *testing.T, h *hubtest.Hub, ns, name string, status map[string]any) {
	t.Helper()
	mustDo(t, h, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/"+ns+"/shoots/"+name+"/status", map[string]any{"status": status}, 200, "Content-Type", mergePtch)
}

func getShoot(t *testing.T, h *hubtest.Hub, name string) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(mustDo(t, h, "GET", shootsDev+"/"+name, nil, 200), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// field reads a nested field of a decoded object ("spec.hibernation.enabled").
func field(obj map[string]any, path string) any {
	var cur any = obj
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// annotation reads a shoot annotation.
func annotation(s map[string]any, key string) string {
	a, _ := field(s, "metadata.annotations").(map[string]any)
	v, _ := a[key].(string)
	return v
}

// eventually retries check every 20 ms for up to 10 s (scaled: test/timescale).
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	limit := timescale.Scale(10 * time.Second)
	deadline := time.Now().Add(limit)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitVisible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// setSelect picks an option of a <select> and tells the page (a change event), as a user's choice does.
func setSelect(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const s = document.querySelector(%q); if (!s) return false;
			s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return s.value === %q; })()`, sel, value, value))(ctx, t)
		if err == nil && !ok {
			err = fmt.Errorf("select %s has no option %q", sel, value)
		}
		return err
	})
}

// waitDialogClosed waits until a dialog is gone and the page takes clicks again (the dialog blocks the page's
// pointer events while it is open).
func (p *page) waitDialogClosed() {
	p.t.Helper()
	p.waitJS("the dialog to close", `!document.querySelector("[role=dialog]") && getComputedStyle(document.body).pointerEvents !== "none"`)
}
