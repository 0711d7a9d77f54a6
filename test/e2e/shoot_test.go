package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/timescale"
)

// landscapeBinaries builds the binaries a landscape runs (hub, agent, provider-local, localseed) once per test
// binary.
func landscapeBinaries(t *testing.T) string {
	t.Helper()
	return binaries(t, "landscape", "github.com/trellis-dev/trellis/cmd/trellis-hub", "github.com/trellis-dev/trellis/cmd/trellis-agent",
		"github.com/trellis-dev/trellis/cmd/provider-local", "github.com/trellis-dev/trellis/test/localseed")
}

// testBinDir is bin/testbin of the module (etcd, kube-apiserver, kube-controller-manager for the seeds).
func testBinDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(moduleRoot(t), "bin", "testbin")
}

// rest is an admin client of the hub's REST API.
type rest struct {
	t     *testing.T
	url   string
	token string
	http  *http.Client
}

func newREST(t *testing.T, l *landscape.Landscape) *rest {
	t.Helper()
	pool, err := binproc.LoadCA(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return &rest{t: t, url: l.HubURL, token: l.Token, http: binproc.HTTPClient(pool, 30*time.Second)}
}

// do sends a request; a map body is sent as JSON (as a merge patch for PATCH).
func (r *rest) do(method, path string, body any) (int, []byte) {
	r.t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		data = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			r.t.Fatal(err)
		}
		data = j
	}
	code, out, err := binproc.Do(context.Background(), r.http, method, r.url+path, r.token, data)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

func (r *rest) must(want int, method, path string, body any) []byte {
	r.t.Helper()
	code, out := r.do(method, path, body)
	if code != want {
		r.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

// shootStatus is the part of a Shoot the test reads.
type shootStatus struct {
	Metadata struct {
		Generation  int64             `json:"generation"`
		UID         string            `json:"uid"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		SeedName string `json:"seedName"`
	} `json:"spec"`
	Status struct {
		LastOperation struct {
			Type, State, Description string
			Progress                 int
		} `json:"lastOperation"`
		LastErrors []struct {
			Description string   `json:"description"`
			TaskID      string   `json:"taskID"`
			Codes       []string `json:"codes"`
		} `json:"lastErrors"`
		ObservedGeneration int64  `json:"observedGeneration"`
		SeedName           string `json:"seedName"`
		TechnicalID        string `json:"technicalID"`
		Conditions         []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

const e2eShootPath = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/e2e"

// shoot reads the test's shoot; nil when it is gone.
func (r *rest) shoot() *shootStatus {
	r.t.Helper()
	code, body := r.do(http.MethodGet, e2eShootPath, nil)
	if code == http.StatusNotFound {
		return nil
	}
	if code != http.StatusOK {
		r.t.Fatalf("get shoot: %d %s", code, body)
	}
	var s shootStatus
	if err := json.Unmarshal(body, &s); err != nil {
		r.t.Fatal(err)
	}
	return &s
}

func (s *shootStatus) String() string {
	lo := s.Status.LastOperation
	return fmt.Sprintf("gen %d/%d seed %s/%s: %s %s %d%% (%s) errors %v", s.Status.ObservedGeneration, s.Metadata.Generation,
		s.Spec.SeedName, s.Status.SeedName, lo.Type, lo.State, lo.Progress, lo.Description, s.Status.LastErrors)
}

// waitShoot polls the shoot every 50 ms until cond holds and returns how long that took.
func (r *rest) waitShoot(what string, timeout time.Duration, cond func(*shootStatus) bool) (*shootStatus, time.Duration) {
	r.t.Helper()
	timeout = timescale.Scale(timeout)
	begin := time.Now()
	var last *shootStatus
	for time.Since(begin) < timeout {
		last = r.shoot()
		if cond(last) {
			return last, time.Since(begin)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("timed out after %v waiting for %s; last: %v", timeout, what, last)
	return nil, 0
}

func succeededAt(gen int64) func(*shootStatus) bool {
	return func(s *shootStatus) bool {
		return s != nil && s.Status.LastOperation.State == "Succeeded" && s.Status.ObservedGeneration == s.Metadata.Generation &&
			(gen == 0 || s.Metadata.Generation >= gen)
	}
}

// startLandscape starts a landscape of the test's binaries with cfg (Dir, BinDir and TestBinDir are filled in) in a
// temporary directory, kept when the test fails, and stops it when the test ends; a failed test logs the ends of
// the processes' logs.
func startLandscape(ctx context.Context, t *testing.T, cfg landscape.Config) *landscape.Landscape {
	t.Helper()
	cfg.BinDir, cfg.TestBinDir = landscapeBinaries(t), testBinDir(t)
	dir, err := os.MkdirTemp("", "trellis-e2e-landscape-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = dir
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the landscape's files are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	l, err := landscape.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs := []string{"hub.log"}
			for _, s := range l.Seeds() {
				logs = append(logs, "agent-"+s.Name+".log", "provider-local-"+s.Name+".log")
			}
			for _, f := range logs {
				t.Logf("==== %s (tail)\n%s", f, binproc.TailLines(filepath.Join(l.LogDir, f), 80))
			}
		}
		if err := l.Stop(); err != nil {
			t.Errorf("stop landscape: %v", err)
		}
	})
	return l
}

// seedClient is a controller-runtime client of a seed with the extension kinds.
func seedClient(t *testing.T, s *landscape.Seed) client.Client {
	t.Helper()
	c, err := client.New(s.Config, client.Options{Scheme: agent.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// extensionObjects counts the extension objects of each kind in a namespace, by kind.
func extensionObjects(t *testing.T, c client.Client, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	lists := map[string]client.ObjectList{
		"Infrastructure": &extensionsv1alpha1.InfrastructureList{}, "ControlPlane": &extensionsv1alpha1.ControlPlaneList{},
		"Worker": &extensionsv1alpha1.WorkerList{}, "Network": &extensionsv1alpha1.NetworkList{},
		"OperatingSystemConfig": &extensionsv1alpha1.OperatingSystemConfigList{}, "DNSRecord": &extensionsv1alpha1.DNSRecordList{},
		"Extension": &extensionsv1alpha1.ExtensionList{}, "ContainerRuntime": &extensionsv1alpha1.ContainerRuntimeList{},
	}
	for kind, l := range lists {
		if err := c.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		if n := len(itemsOf(l)); n > 0 {
			out[kind] = n
		}
	}
	return out
}

func itemsOf(l client.ObjectList) []any {
	b, _ := json.Marshal(l)
	var v struct{ Items []any }
	_ = json.Unmarshal(b, &v)
	return v.Items
}

// rssKiB is a process's resident set size from /proc.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var n int64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &n) // 0 when unreadable
			return n
		}
	}
	return 0
}

// examples creates the example resources but the example shoot, and returns that shoot renamed to e2e (at
// e2eShootPath), without a seed (the hub's scheduler places it), for the test to create.
func (r *rest) examples() map[string]any {
	r.t.Helper()
	examples, err := landscape.Examples()
	if err != nil {
		r.t.Fatal(err)
	}
	var shootJSON []byte
	for _, e := range examples {
		if e.Kind.Kind == "Shoot" {
			shootJSON = e.JSON
			continue
		}
		if code, body := r.do(http.MethodPost, e.Path(), e.JSON); code != http.StatusCreated && code != http.StatusConflict {
			r.t.Fatalf("create %s: %d %s", e.File, code, body)
		}
	}
	var shoot map[string]any
	if err := json.Unmarshal(shootJSON, &shoot); err != nil {
		r.t.Fatal(err)
	}
	md := shoot["metadata"].(map[string]any)
	md["name"] = "e2e"
	spec := shoot["spec"].(map[string]any)
	delete(spec, "seedName")
	spec["dns"] = map[string]any{"domain": "e2e.local.local.trellis.dev"}
	return shoot
}

// TestShootLifecycle runs a shoot through its life on a landscape of real binaries over real TCP: two seeds (real
// kube-apiservers with kube-controller-manager), each with trellis-agent and provider-local, and the hub.
func TestShootLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries")
	}
	lightTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(3*time.Minute))
	defer cancel()
	l := startLandscape(ctx, t, landscape.Config{
		Seeds:                   []landscape.SeedConfig{{Name: "local"}, {Name: "other"}},
		RequireProviderLocal:    true,
		ExtensionErrorThreshold: time.Second,
		AgentMutate: func(_ string, c *config.AgentConfiguration) {
			c.Controllers.Shoot.RetryMinDelay = &kmetav1.Duration{Duration: 500 * time.Millisecond}
			c.Controllers.Shoot.RetryMaxDelay = &kmetav1.Duration{Duration: 2 * time.Second}
			c.Controllers.ShootCare.SyncPeriod = &kmetav1.Duration{Duration: 2 * time.Second}
		},
	})
	r := newREST(t, l)
	shoot := r.examples()

	// Create → Succeeded.
	r.must(http.StatusCreated, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots", shoot)
	s, took := r.waitShoot("the shoot to be created", 60*time.Second, succeededAt(0))
	t.Logf("e2e: shoot create → Succeeded in %v", took.Round(time.Millisecond))
	// The scheduler chose one of the two seeds; the shoot migrates to the other one later.
	first, second := s.Spec.SeedName, "other"
	if first == "other" {
		second = "local"
	}
	if lo := s.Status.LastOperation; lo.Type != "Create" || lo.Progress != 100 || s.Status.SeedName != first || (first != "local" && first != "other") ||
		s.Status.TechnicalID != "shoot--local--e2e" {
		t.Fatalf("after create: %v", s)
	}
	t.Logf("e2e: scheduled to seed %s", first)
	localC, otherC := seedClient(t, l.Seed(first)), seedClient(t, l.Seed(second))
	ns := s.Status.TechnicalID
	want := map[string]int{"Infrastructure": 1, "ControlPlane": 1, "Worker": 1, "Network": 1, "OperatingSystemConfig": 2, "DNSRecord": 2}
	if got := extensionObjects(t, localC, ns); !equalCounts(got, want) {
		t.Fatalf("extension objects in %s: %v, want %v", ns, got, want)
	}
	checkSpecs(t, localC, ns)
	r.waitShoot("the shoot's conditions", 30*time.Second, func(s *shootStatus) bool {
		seen := map[string]string{}
		for _, c := range s.Status.Conditions {
			seen[c.Type] = c.Status
		}
		for _, typ := range []string{"APIServerAvailable", "ControlPlaneHealthy", "EveryNodeReady", "SystemComponentsHealthy", "ObservabilityComponentsHealthy"} {
			if seen[typ] != "True" {
				return false
			}
		}
		return true
	})
	be := &extensionsv1alpha1.BackupEntry{}
	if err := localC.Get(ctx, client.ObjectKey{Name: ns + "--" + s.Metadata.UID}, be); err != nil {
		t.Errorf("extension BackupEntry: %v", err)
	}

	// A new generation: more machines.
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"spec": map[string]any{"provider": map[string]any{
		"workers": []any{map[string]any{"name": "local", "minimum": 2, "maximum": 3, "machine": map[string]any{"type": "local",
			"image": map[string]any{"name": "local", "version": "1.0.0"}}, "cri": map[string]any{"name": "containerd"}}}}}})
	_, took = r.waitShoot("the new generation", 60*time.Second, succeededAt(s.Metadata.Generation+1))
	t.Logf("e2e: worker update → Succeeded in %v", took.Round(time.Millisecond))
	w := &extensionsv1alpha1.Worker{}
	if err := localC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e"}, w); err != nil || w.Spec.Pools[0].Minimum != 2 || w.Spec.Pools[0].Maximum != 3 {
		t.Fatalf("worker after the update: %v %+v", err, w.Spec.Pools)
	}

	// A failing Infrastructure shows Error with the code and recovers when the annotation goes.
	const failAnnotation = "provider.local.trellis.dev/fail-infrastructure"
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		failAnnotation: "ERR_RETRYABLE_INFRA_DEPENDENCIES", "gardener.cloud/operation": "reconcile"}}})
	s, took = r.waitShoot("the infrastructure error", 60*time.Second, func(s *shootStatus) bool {
		return s.Status.LastOperation.State == "Error" && len(s.Status.LastErrors) > 0
	})
	t.Logf("e2e: failing infrastructure → Error in %v: %v", took.Round(time.Millisecond), s)
	if p := s.Status.LastOperation.Progress; p >= 100 {
		t.Errorf("a failed reconcile reports progress %d%%", p)
	}
	if le := s.Status.LastErrors[0]; !containsString(le.Codes, "ERR_RETRYABLE_INFRA_DEPENDENCIES") || !strings.Contains(le.TaskID, "infrastructure") {
		t.Fatalf("lastErrors %+v, want the code and the infrastructure task", s.Status.LastErrors)
	}
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{failAnnotation: nil}}})
	_, took = r.waitShoot("the recovery", 60*time.Second, func(s *shootStatus) bool {
		return s.Status.LastOperation.State == "Succeeded" && len(s.Status.LastErrors) == 0
	})
	t.Logf("e2e: recovered in %v", took.Round(time.Millisecond))

	// Hibernation: the machines go, the DNS records go; waking up brings both back.
	hibernate := func(on bool) {
		t.Helper()
		gen := r.shoot().Metadata.Generation
		r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"spec": map[string]any{"hibernation": map[string]any{"enabled": on}}})
		_, took := r.waitShoot(fmt.Sprintf("hibernation %v", on), 60*time.Second, succeededAt(gen+1))
		t.Logf("e2e: hibernation %v → Succeeded in %v", on, took.Round(time.Millisecond))
		var hib struct {
			Status struct {
				Hibernated bool `json:"hibernated"`
			} `json:"status"`
		}
		if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, e2eShootPath, nil), &hib); err != nil || hib.Status.Hibernated != on {
			t.Fatalf("status.hibernated = %v (%v), want %v", hib.Status.Hibernated, err, on)
		}
		svcs := &corev1.ServiceList{}
		if err := localC.List(ctx, svcs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		records := extensionObjects(t, localC, ns)["DNSRecord"]
		if on && (countMachines(svcs) != 0 || records != 0) {
			t.Fatalf("hibernated: %d machines and %d DNS records, want none", countMachines(svcs), records)
		}
		if !on && (countMachines(svcs) != 2 || records != 2) {
			t.Fatalf("woken up: %d machines and %d DNS records, want 2 and 2", countMachines(svcs), records)
		}
	}
	hibernate(true)
	hibernate(false)

	// The agent is killed mid-reconcile; started again, it finishes the operation and duplicates nothing.
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"gardener.cloud/operation": "reconcile"}}})
	r.waitShoot("the reconcile to start", 30*time.Second, func(s *shootStatus) bool { return s.Status.LastOperation.State == "Processing" })
	if err := l.KillAgent(first); err != nil {
		t.Fatal(err)
	}
	if s := r.shoot(); s.Status.LastOperation.State != "Processing" {
		t.Logf("note: the reconcile finished before the kill landed: %v", s)
	}
	if err := l.StartAgent(ctx, first); err != nil {
		t.Fatal(err)
	}
	r.waitShoot("the interrupted reconcile to finish", 60*time.Second, succeededAt(0))
	want = map[string]int{"Infrastructure": 1, "ControlPlane": 1, "Worker": 1, "Network": 1, "OperatingSystemConfig": 2, "DNSRecord": 2}
	if got := extensionObjects(t, localC, ns); !equalCounts(got, want) {
		t.Fatalf("extension objects after the restart: %v, want %v", got, want)
	}
	machines := &corev1.ServiceList{}
	if err := localC.List(ctx, machines, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	w = &extensionsv1alpha1.Worker{}
	if err := localC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e"}, w); err != nil {
		t.Fatal(err)
	}
	var wantMachines int32
	for _, md := range w.Status.MachineDeployments {
		wantMachines += md.Minimum
	}
	if n := countMachines(machines); n != int(wantMachines) {
		t.Fatalf("%d machine services after the restart, want %d", n, wantMachines)
	}
	code, body := r.do(http.MethodGet, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/backupentries", nil)
	if code != http.StatusOK || strings.Count(string(body), `"kind":"BackupEntry"`)+strings.Count(string(body), `"name":"shoot--local--e2e--`) == 0 {
		t.Fatalf("backup entries: %d %s", code, body)
	}
	if n := strings.Count(string(body), `"name":"shoot--local--e2e--`); n != 1 {
		t.Fatalf("%d backup entries for the shoot, want 1: %s", n, body)
	}
	for _, name := range []string{"local", "other"} {
		t.Logf("e2e: agent %s RSS %d MiB", name, rssKiB(l.Pids()["agent-"+name])/1024)
	}

	// Migration to the other seed: the state comes along.
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := localC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e"}, infra); err != nil {
		t.Fatal(err)
	}
	before := string(infra.Status.ProviderStatus.Raw)
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath+"/binding", map[string]any{"spec": map[string]any{"seedName": second}})
	_, took = r.waitShoot("the restore on the other seed", 90*time.Second, func(s *shootStatus) bool {
		return s.Status.SeedName == second && s.Status.LastOperation.Type == "Restore" && s.Status.LastOperation.State == "Succeeded"
	})
	t.Logf("e2e: migrate + restore in %v", took.Round(time.Millisecond))
	if err := otherC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e"}, infra); err != nil {
		t.Fatal(err)
	}
	if after := string(infra.Status.ProviderStatus.Raw); after != before {
		t.Errorf("infrastructure providerStatus after the restore:\n%s\nwant the one before the migration:\n%s", after, before)
	}
	if err := localC.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s on the source seed: %v, want gone", ns, err)
	}
	if got := extensionObjects(t, otherC, ns); !equalCounts(got, want) {
		t.Fatalf("extension objects on the other seed: %v, want %v", got, want)
	}

	// Delete: everything in the seed goes, then the shoot.
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"confirmation.gardener.cloud/deletion": "true"}}})
	begin := time.Now()
	if code, body := r.do(http.MethodDelete, e2eShootPath, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, body)
	}
	r.waitShoot("the shoot to be gone", 60*time.Second, func(s *shootStatus) bool { return s == nil })
	t.Logf("e2e: shoot delete → gone in %v", time.Since(begin).Round(time.Millisecond))
	if err := otherC.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want gone", ns, err)
	}
	if got := extensionObjects(t, otherC, ns); len(got) != 0 {
		t.Errorf("extension objects left: %v", got)
	}
	if err := otherC.Get(ctx, client.ObjectKey{Name: ns}, &extensionsv1alpha1.Cluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster %s: %v, want gone", ns, err)
	}
}

// checkSpecs checks what the agent wrote into the extension objects' specs.
func checkSpecs(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	infra := &extensionsv1alpha1.Infrastructure{}
	cp := &extensionsv1alpha1.ControlPlane{}
	nw := &extensionsv1alpha1.Network{}
	w := &extensionsv1alpha1.Worker{}
	for _, o := range []client.Object{infra, cp, nw, w} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e"}, o); err != nil {
			t.Fatalf("%T: %v", o, err)
		}
	}
	if infra.Spec.Type != "local" || infra.Spec.Region != "local" || infra.Spec.SecretRef.Name != "cloudprovider" {
		t.Errorf("infrastructure spec %+v", infra.Spec)
	}
	if infra.Status.ProviderStatus == nil || cp.Spec.InfrastructureProviderStatus == nil ||
		string(cp.Spec.InfrastructureProviderStatus.Raw) != string(infra.Status.ProviderStatus.Raw) ||
		w.Spec.InfrastructureProviderStatus == nil || string(w.Spec.InfrastructureProviderStatus.Raw) != string(infra.Status.ProviderStatus.Raw) {
		t.Errorf("providerStatus not forwarded: infrastructure %v, controlplane %v, worker %v", infra.Status.ProviderStatus, cp.Spec.InfrastructureProviderStatus, w.Spec.InfrastructureProviderStatus)
	}
	if nw.Spec.Type != "local" || nw.Spec.PodCIDR != "10.3.0.0/16" || nw.Spec.ServiceCIDR != "10.4.0.0/16" {
		t.Errorf("network spec %+v", nw.Spec)
	}
	if len(w.Spec.Pools) != 1 {
		t.Fatalf("worker pools %+v", w.Spec.Pools)
	}
	p := w.Spec.Pools[0]
	if p.Name != "local" || p.Minimum != 1 || p.Maximum != 1 || p.MachineType != "local" || p.MachineImage.Name != "local" ||
		p.UserDataSecretRef.Key != "cloud_config" || !strings.HasPrefix(p.UserDataSecretRef.Name, "osc-result-") {
		t.Errorf("worker pool %+v", p)
	}
	if len(w.Status.MachineDeployments) == 0 {
		t.Errorf("worker status has no machine deployments")
	}
	rec := &extensionsv1alpha1.DNSRecord{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-external"}, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Spec.Name != "api.e2e.local.local.trellis.dev" || len(rec.Spec.Values) != 1 || rec.Status.Zone == nil {
		t.Errorf("external DNS record %+v status %+v", rec.Spec, rec.Status)
	}
}

func countMachines(l *corev1.ServiceList) int {
	n := 0
	for _, s := range l.Items {
		if s.Name != "kube-apiserver" && strings.Contains(s.Name, "-z") {
			n++
		}
	}
	return n
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
