package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/test/gardenerexamples"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/machinestandin"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestManagedSeedOnLocalNode runs ManagedSeeds in `make up`'s landscape with a node (without the example shoot, which
// it does not use), where the seed's agent and provider-local run as their charts' pods, as a sequence of subtests on
// one landscape (one landscape with a node is what a 2-core machine affords):
//
//   - ManagedSeed: a ManagedSeed for a workerless shoot on that seed becomes a Seed with GardenletReady=True. The
//     agent's pod installs the agent chart into the shoot; the stand-in machine runner (test/machinestandin: the
//     shoot has no machines) runs the agent that the chart describes as a host process, with the shoot as its seed
//     cluster through the hub's tunnel, and the hub as the chart's configuration gives it (the address the agent pod
//     uses). Deleting the ManagedSeed removes the Seed and the agent's release; the shoot is deleted after it.
//   - ManagedSeedSet: Gardener's example ManagedSeedSet (examples/57-managedseedset.yaml, completed into workerless
//     shoots on the local seed) with 2 replicas makes both replicas' Shoots, ManagedSeeds and Seeds, one after the
//     other, with the set's status as Gardener keeps it; scaled to 1 it deletes the replica Gardener's order picks
//     (ManagedSeed, Seed, then Shoot); deleted it removes the other replica and then itself.
func TestManagedSeedOnLocalNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bins := landscapeBinaries(t)
	localnode.TakeTurn(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(40*time.Minute))
	defer cancel()
	begin := time.Now()
	// The example resources but the shoot, whose control plane and machine this test does not use.
	l := startLandscape(ctx, t, landscape.Config{Seeds: []landscape.SeedConfig{{Name: "local"}}, Node: true, Examples: true,
		ExamplesWithoutShoot: true, RequireProviderLocal: true, TunnelListen: "127.0.0.1:0"})
	t.Logf("landscape with a node ready in %v", time.Since(begin).Round(100*time.Millisecond))
	e := &managedSeedEnv{ctx: ctx, l: l, ctl: trellisctlBinary(t), bins: bins, dir: t.TempDir(),
		runners: map[string]*machinestandin.Runner{}, stops: map[string]context.CancelFunc{}}
	defer e.stopStandIns()

	// The garden project, and the example shoot's Kubernetes version for the workerless shoots.
	e.do(t, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"garden"},"spec":{"namespace":"garden"}}`, http.StatusCreated)
	ex, err := landscape.ExampleShoot()
	if err != nil {
		t.Fatal(err)
	}
	var example struct {
		Spec struct {
			Kubernetes struct{ Version string } `json:"kubernetes"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(ex.JSON, &example); err != nil || example.Spec.Kubernetes.Version == "" {
		t.Fatalf("the example shoot's Kubernetes version: %q, %v", example.Spec.Kubernetes.Version, err)
	}
	e.kubernetesVersion = example.Spec.Kubernetes.Version

	if !t.Run("ManagedSeed", e.managedSeed) {
		return
	}
	t.Run("ManagedSeedSet", e.managedSeedSet)
}

// managedSeedEnv is the landscape the subtests of TestManagedSeedOnLocalNode share, with the stand-in machine
// runners of the shoots that become seeds.
type managedSeedEnv struct {
	ctx               context.Context
	l                 *landscape.Landscape
	ctl, bins, dir    string // bins: the landscape's binaries
	kubernetesVersion string

	mu      sync.Mutex
	runners map[string]*machinestandin.Runner // by shoot
	stops   map[string]context.CancelFunc     // by shoot
	wg      sync.WaitGroup
}

// managedSeedSpec is the Seed spec of the test's ManagedSeeds: provider local, the ingress domain given, the
// landscape's DNS credentials.
func managedSeedSpec(ingressDomain string) map[string]any {
	return map[string]any{
		"provider": map[string]any{"type": "local", "region": "local"},
		"ingress":  map[string]any{"domain": ingressDomain, "controller": map[string]any{"kind": "nginx"}},
		"dns": map[string]any{"provider": map[string]any{"type": "local", "credentialsRef": map[string]any{
			"apiVersion": "v1", "kind": "Secret", "namespace": "garden", "name": landscape.DNSSecretName}}},
		"networks": map[string]any{"nodes": "172.18.0.0/16", "pods": "10.1.0.0/16", "services": "10.2.0.0/16"},
	}
}

// workerlessShootSpec is the spec of a workerless shoot on seed local.
func (e *managedSeedEnv) workerlessShootSpec() map[string]any {
	return map[string]any{"cloudProfileName": "local", "region": "local", "provider": map[string]any{"type": "local"},
		"kubernetes": map[string]any{"version": e.kubernetesVersion}, "seedName": "local"}
}

func (e *managedSeedEnv) managedSeed(t *testing.T) {
	shoot, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "soil"}, "spec": e.workerlessShootSpec()})
	if err != nil {
		t.Fatal(err)
	}
	e.do(t, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", string(shoot), http.StatusCreated)
	begin := time.Now()
	e.wait(t, "shoot soil Succeeded", 5*time.Minute, func() bool { return e.shootSucceeded("soil") })
	t.Logf("workerless shoot Succeeded in %v", time.Since(begin).Round(100*time.Millisecond))

	ms, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "soil"}, "spec": map[string]any{
		"shoot": map[string]any{"name": "soil"},
		"gardenlet": map[string]any{"config": map[string]any{"apiVersion": "gardenlet.config.gardener.cloud/v1alpha1",
			"kind": "GardenletConfiguration", "seedConfig": map[string]any{"spec": managedSeedSpec("ingress.soil.seed.example.com")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	e.do(t, http.MethodPost, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds", string(ms), http.StatusCreated)
	r := e.standIn(t, "soil")
	e.wait(t, "ManagedSeed soil registered with its Seed GardenletReady", 4*time.Minute, func() bool { return e.registered("soil") })
	t.Logf("ManagedSeed create → Seed GardenletReady, SeedRegistered: %v", time.Since(begin).Round(100*time.Millisecond))

	begin = time.Now()
	e.do(t, http.MethodDelete, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", "", http.StatusOK)
	e.wait(t, "ManagedSeed soil gone", 3*time.Minute, func() bool {
		return e.gone("/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil")
	})
	t.Logf("ManagedSeed delete → gone: %v", time.Since(begin).Round(100*time.Millisecond))
	if !e.gone("/apis/core.gardener.cloud/v1beta1/seeds/soil") {
		t.Fatal("the Seed soil exists after its ManagedSeed is gone")
	}
	e.wait(t, "the stand-in agent stopped", 30*time.Second, func() bool { return !r.Running() })

	// The shoot goes too, so that the next subtest's shoots have the node to themselves.
	begin = time.Now()
	e.deleteShoot(t, "soil")
	e.wait(t, "shoot soil gone", 5*time.Minute, func() bool { return e.gone("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/soil") })
	t.Logf("shoot soil deleted in %v", time.Since(begin).Round(100*time.Millisecond))
	e.stopStandIn("soil")
}

// managedSeedSetStatus is what the test reads of a ManagedSeedSet.
type managedSeedSetStatus struct {
	Metadata struct {
		Generation int64    `json:"generation"`
		Finalizers []string `json:"finalizers"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64             `json:"observedGeneration"`
		Replicas           int32             `json:"replicas"`
		ReadyReplicas      int32             `json:"readyReplicas"`
		NextReplicaNumber  int32             `json:"nextReplicaNumber"`
		Conditions         []json.RawMessage `json:"conditions"`
		PendingReplica     *struct {
			Name, Reason string
		} `json:"pendingReplica"`
	} `json:"status"`
}

const managedSeedSetPath = "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseedsets/"

func (e *managedSeedEnv) managedSeedSet(t *testing.T) {
	set := e.exampleManagedSeedSet(t, 2)
	name := set["metadata"].(map[string]any)["name"].(string)
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	replicas := []string{name + "-0", name + "-1"}
	defer func() {
		if t.Failed() {
			e.logSetEvents(t, name)
		}
	}()

	begin := time.Now()
	e.do(t, http.MethodPost, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseedsets", string(body), http.StatusCreated)
	// One replica at a time: the Shoot, once reconciled the ManagedSeed, then its Seed ready; then the next.
	for i, rp := range replicas {
		e.wait(t, "ManagedSeed "+rp+" created by the set", 8*time.Minute, func() bool {
			return !e.gone("/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/" + rp)
		})
		if i == 0 && !e.gone("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/"+replicas[1]) {
			t.Fatalf("the set created Shoot %s before replica %s was ready", replicas[1], rp)
		}
		e.standIn(t, rp)
		e.wait(t, "ManagedSeed "+rp+" registered with its Seed GardenletReady", 5*time.Minute, func() bool { return e.registered(rp) })
		t.Logf("ManagedSeedSet: replica %s registered %v after the set's creation", rp, time.Since(begin).Round(100*time.Millisecond))
	}
	var st managedSeedSetStatus
	e.wait(t, "the set's status: 2 replicas, 2 ready, none pending", 5*time.Minute, func() bool {
		st = managedSeedSetStatus{} // fields the answer leaves out must not keep an earlier answer's values
		return e.get(managedSeedSetPath+name, &st) && st.Status.Replicas == 2 && st.Status.ReadyReplicas == 2 && st.Status.PendingReplica == nil
	})
	t.Logf("ManagedSeedSet create → 2 replicas ready: %v", time.Since(begin).Round(100*time.Millisecond))
	if st.Status.NextReplicaNumber != 2 || st.Status.ObservedGeneration != st.Metadata.Generation || len(st.Status.Conditions) != 0 ||
		!slices.Contains(st.Metadata.Finalizers, "gardener") {
		t.Fatalf("the set's status: %+v, finalizers %v; want nextReplicaNumber 2, observedGeneration %d, no conditions (Gardener "+
			"sets none), finalizer gardener", st.Status, st.Metadata.Finalizers, st.Metadata.Generation)
	}
	for _, rp := range replicas {
		var seed struct {
			Metadata struct{ Labels map[string]string } `json:"metadata"`
			Spec     struct {
				Ingress struct{ Domain string } `json:"ingress"`
			} `json:"spec"`
		}
		if !e.get("/apis/core.gardener.cloud/v1beta1/seeds/"+rp, &seed) {
			t.Fatalf("Seed %s", rp)
		}
		// The template's labels, and the replica's name for the example's placeholder.
		if seed.Metadata.Labels["name"] != "my-managed-seed-set" || seed.Spec.Ingress.Domain != rp+".ingress.crazy-botany.core.my-custom-domain.com" {
			t.Fatalf("Seed %s: labels %v, ingress domain %q", rp, seed.Metadata.Labels, seed.Spec.Ingress.Domain)
		}
	}

	// Scale in: both replicas are ready and healthy, so Gardener's order (ascendingPriority: status, seed readiness,
	// shoot health, then the lower ordinal) picks the lower ordinal; the newer replica stays.
	begin = time.Now()
	e.do(t, http.MethodPatch, managedSeedSetPath+name, `{"spec":{"replicas":1}}`, http.StatusOK)
	deleted, kept := replicas[0], replicas[1]
	e.waitReplicaGone(t, deleted)
	e.wait(t, "the set's status: 1 replica, 1 ready, none pending", 3*time.Minute, func() bool {
		st = managedSeedSetStatus{}
		return e.get(managedSeedSetPath+name, &st) && st.Status.Replicas == 1 && st.Status.ReadyReplicas == 1 && st.Status.PendingReplica == nil
	})
	if !e.registered(kept) {
		t.Fatalf("replica %s is not registered and ready after the scale-in", kept)
	}
	t.Logf("ManagedSeedSet 2 → 1: replica %s gone (ManagedSeed, Seed, Shoot) in %v", deleted, time.Since(begin).Round(100*time.Millisecond))

	// Deleting the set scales it in to zero, then drops its finalizer.
	begin = time.Now()
	e.do(t, http.MethodDelete, managedSeedSetPath+name, "", http.StatusOK)
	e.waitReplicaGone(t, kept)
	e.wait(t, "ManagedSeedSet "+name+" gone", 3*time.Minute, func() bool { return e.gone(managedSeedSetPath + name) })
	t.Logf("ManagedSeedSet delete → replica %s and the set gone: %v", kept, time.Since(begin).Round(100*time.Millisecond))
}

// exampleManagedSeedSet is Gardener's example ManagedSeedSet with replicas, completed into one the landscape can
// run: the Seed template gets the rest of a seed on provider local, with the example's ingress domain (which it
// gives under dns.ingress, an earlier place of Gardener's) under ingress; the Shoot template becomes a workerless
// shoot on seed local, with the example's DNS domain.
func (e *managedSeedEnv) exampleManagedSeedSet(t *testing.T, replicas int) map[string]any {
	t.Helper()
	var set map[string]any
	readExample(t, "57-managedseedset.yaml", &set)
	str := func(v any, path ...string) string {
		t.Helper()
		m, ok := v.(map[string]any)
		for _, k := range path[:len(path)-1] {
			if m, ok = m[k].(map[string]any); !ok {
				break
			}
		}
		s, _ := m[path[len(path)-1]].(string)
		if !ok || s == "" {
			t.Fatalf("the example ManagedSeedSet has no %v", path)
		}
		return s
	}
	spec := set["spec"].(map[string]any)
	spec["replicas"] = replicas
	seedConfig := spec["template"].(map[string]any)["spec"].(map[string]any)["gardenlet"].(map[string]any)["config"].(map[string]any)["seedConfig"].(map[string]any)
	seedConfig["spec"] = managedSeedSpec(str(seedConfig, "spec", "dns", "ingress", "domain"))
	shootSpec := e.workerlessShootSpec()
	shootSpec["dns"] = map[string]any{"domain": str(spec, "shootTemplate", "spec", "dns", "domain")}
	spec["shootTemplate"].(map[string]any)["spec"] = shootSpec
	return set
}

// waitReplicaGone waits until a replica's ManagedSeed, Seed and Shoot are gone, in that order, and its stand-in agent
// stopped.
func (e *managedSeedEnv) waitReplicaGone(t *testing.T, name string) {
	t.Helper()
	msPath := "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/" + name
	shootPath := "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/" + name
	e.wait(t, "ManagedSeed "+name+" gone", 5*time.Minute, func() bool { return e.gone(msPath) })
	if !e.gone("/apis/core.gardener.cloud/v1beta1/seeds/" + name) {
		t.Fatalf("Seed %s exists after its ManagedSeed is gone", name)
	}
	e.wait(t, "Shoot "+name+" gone", 5*time.Minute, func() bool { return e.gone(shootPath) })
	e.mu.Lock()
	r := e.runners[name]
	e.mu.Unlock()
	if r != nil {
		e.wait(t, "the stand-in agent of "+name+" stopped", time.Minute, func() bool { return !r.Running() })
	}
	e.stopStandIn(name)
}

// readExample decodes Gardener's example manifest file (test/gardenerexamples: ../shared/gardener/examples).
func readExample(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func (e *managedSeedEnv) do(t *testing.T, method, path, body string, want int) []byte {
	t.Helper()
	code, out, err := e.l.Do(e.ctx, method, path, []byte(body))
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v %s", method, path, code, err, out)
	}
	return out
}

func (e *managedSeedEnv) get(path string, v any) bool { return hubGet(e.ctx, e.l, path, v) }

func (e *managedSeedEnv) gone(path string) bool { return hubGone(e.ctx, e.l, path) }

// wait polls cond until it holds; after timeout it logs the local seed's agent pod and fails.
func (e *managedSeedEnv) wait(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	timeout = timescale.Scale(timeout)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			if logs, err := e.l.Seed("local").AgentPodLogs(context.Background()); err == nil {
				t.Logf("the agent's pod:\n%s", landscape.TailOf(logs, 8000))
			}
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (e *managedSeedEnv) shootSucceeded(name string) bool {
	var s struct {
		Status struct {
			LastOperation struct{ State string } `json:"lastOperation"`
		} `json:"status"`
	}
	return e.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/"+name, &s) && s.Status.LastOperation.State == "Succeeded"
}

// deleteShoot confirms the deletion of a shoot in project garden, as Gardener requires, and deletes it.
func (e *managedSeedEnv) deleteShoot(t *testing.T, name string) {
	t.Helper()
	path := "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/" + name
	e.do(t, http.MethodPatch, path, `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`, http.StatusOK)
	e.do(t, http.MethodDelete, path, "", http.StatusOK)
}

// registered: the ManagedSeed is ShootReconciled and SeedRegistered, its Seed GardenletReady.
func (e *managedSeedEnv) registered(name string) bool { return managedSeedRegistered(e.ctx, e.l, name) }

// standIn starts the stand-in machine runner of a shoot in project garden, through the hub's tunnel with an admin
// kubeconfig from trellisctl; it runs until the test ends (stopStandIns).
func (e *managedSeedEnv) standIn(t *testing.T, shoot string) *machinestandin.Runner {
	t.Helper()
	dir := filepath.Join(e.dir, shoot)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	e.wait(t, "an admin kubeconfig of shoot "+shoot, 2*time.Minute, func() bool {
		cmd := exec.CommandContext(e.ctx, e.ctl, "shoot", "kubeconfig", shoot, "-p", "garden", "--file", kc)
		cmd.Env = []string{"TRELLIS_HUB=" + e.l.HubURL, "TRELLIS_CA=" + e.l.CAFile, "TRELLIS_TOKEN=" + e.l.Token, "HOME=" + dir,
			"TRELLISCONFIG=" + filepath.Join(dir, "trellisconfig")}
		return cmd.Run() == nil
	})
	r, err := machinestandin.New(machinestandin.Config{Name: "agent-of-" + shoot, Binary: filepath.Join(e.bins, "trellis-agent"),
		Kubeconfig: kc, Dir: dir,
		Extensions: []machinestandin.Extension{{Deployment: "provider-local", Binary: filepath.Join(e.bins, "provider-local")}},
		Log:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.ctx)
	e.mu.Lock()
	e.runners[shoot] = r
	e.stops[shoot] = stop
	e.mu.Unlock()
	e.wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, path := range append([]string{r.LogPath()}, r.ExtensionLogPaths()...) {
				if b, err := os.ReadFile(path); err == nil {
					t.Logf("the stand-in's %s of %s:\n%s", filepath.Base(path), shoot, landscape.TailOf(string(b), 6000))
				}
			}
		}
	})
	return r
}

// stopStandIn stops the stand-in runner of a shoot that is gone (it would only fail to reach the shoot).
func (e *managedSeedEnv) stopStandIn(shoot string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if stop, ok := e.stops[shoot]; ok {
		stop()
	}
}

// stopStandIns stops every stand-in runner and waits for their agents to stop.
func (e *managedSeedEnv) stopStandIns() {
	e.mu.Lock()
	for _, stop := range e.stops {
		stop()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// logSetEvents logs the events of a ManagedSeedSet, for a failing test.
func (e *managedSeedEnv) logSetEvents(t *testing.T, name string) {
	var events struct {
		Items []struct {
			Reason, Message string
			Type            string
		} `json:"items"`
	}
	if !e.get("/api/v1/namespaces/garden/events?fieldSelector=involvedObject.name%3D"+name, &events) {
		return
	}
	for _, ev := range events.Items {
		t.Logf("event of ManagedSeedSet %s: %s %s: %s", name, ev.Type, ev.Reason, ev.Message)
	}
}
