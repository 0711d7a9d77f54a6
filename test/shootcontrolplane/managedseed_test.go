package shootcontrolplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/managedseed"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/proto/objectnames"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/machinestandin"
	"github.com/trellis-dev/trellis/test/timescale"
)

// gardenletConfig is a ManagedSeed's GardenletConfiguration: the Seed template with the agent tests' seed spec
// (replica-name in the ingress domain, which a ManagedSeedSet replaces by the replica's name) and labels.
func gardenletConfig(t *testing.T, labels map[string]string) []byte {
	t.Helper()
	spec := map[string]any{
		"provider": map[string]any{"type": "local", "region": "local"},
		"ingress":  map[string]any{"domain": "ingress.replica-name.seed.example.com", "controller": map[string]any{"kind": "nginx"}},
		"dns": map[string]any{"provider": map[string]any{"type": "local", "credentialsRef": map[string]any{
			"apiVersion": "v1", "kind": "Secret", "namespace": "garden", "name": "internal-domain"}}},
		"networks": map[string]any{"nodes": "172.18.0.0/16", "pods": "10.1.0.0/16", "services": "10.2.0.0/16"},
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "gardenlet.config.gardener.cloud/v1alpha1", "kind": "GardenletConfiguration",
		"seedConfig": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": spec}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// standIns runs a stand-in machine runner (test/machinestandin) for the agent deployed into each ManagedSeed's
// shoot, through the shoot's admin kubeconfig from the hub (its tunnel).
type standIns struct {
	e     *env
	agent string // bin/trellis-agent
	ctx   context.Context
	wg    sync.WaitGroup
	mu    sync.Mutex
	by    map[string]*machinestandin.Runner // by shoot
}

func (s *standIns) start(t *testing.T, shoot string) *machinestandin.Runner {
	t.Helper()
	s.mu.Lock()
	r, ok := s.by[shoot]
	s.mu.Unlock()
	if ok {
		return r
	}
	var kc string
	poll(t, "an admin kubeconfig of shoot "+shoot, 3*time.Minute, func() bool {
		p, err := s.e.kubeconfigOf(shoot, "garden")
		kc = p
		return err == nil
	})
	dir := filepath.Join(s.e.dir, "standin-"+shoot)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := machinestandin.New(machinestandin.Config{Name: "agent-of-" + shoot, Binary: s.agent, Kubeconfig: kc, Dir: dir,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.by[shoot] = r
	s.mu.Unlock()
	s.wg.Go(func() { _ = r.Run(s.ctx) })
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(r.LogPath()); err == nil {
				t.Logf("stand-in agent of %s:\n%s", shoot, tail(string(b), 6000))
			}
		}
	})
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// kubeconfigOf has bin/trellisctl write the admin kubeconfig of shoot in project.
func (e *env) kubeconfigOf(shoot, project string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(time.Minute))
	defer cancel()
	path := filepath.Join(e.dir, project+"-"+shoot+".kubeconfig")
	cmd := exec.CommandContext(ctx, e.trellisctl, "shoot", "kubeconfig", shoot, "-p", project, "--file", path)
	cmd.Env = []string{"TRELLIS_HUB=" + e.hub.URL, "TRELLIS_CA=" + filepath.Join(e.hub.DataDir, "pki", "ca.crt"), "TRELLIS_TOKEN=" + e.hub.Token,
		"HOME=" + e.dir, "TRELLISCONFIG=" + filepath.Join(e.dir, "trellisconfig")}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("trellisctl shoot kubeconfig %s: %w\n%s", shoot, err, out)
	}
	return path, nil
}

// poll waits until cond holds, failing after timeout.
func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	timeout = timescale.Scale(timeout)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) get(t *testing.T, group, resource, ns, name string) proto.Message {
	t.Helper()
	o, err := e.hub.Collection(t, group, resource).Get(context.Background(), ns, name)
	if err != nil {
		return nil
	}
	return o
}

func (e *env) managedSeed(t *testing.T, name string) *seedmanagementv1alpha1.ManagedSeed {
	ms, _ := e.get(t, "seedmanagement.gardener.cloud", "managedseeds", "garden", name).(*seedmanagementv1alpha1.ManagedSeed)
	return ms
}

func (e *env) seedObj(t *testing.T, name string) *corev1beta1.Seed {
	s, _ := e.get(t, "core.gardener.cloud", "seeds", "", name).(*corev1beta1.Seed)
	return s
}

func conditionOf(conds []*metav1.Condition, typ string) *metav1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// registered: the ManagedSeed says SeedRegistered=True for its generation and its Seed GardenletReady=True.
func (e *env) registered(t *testing.T, name string) bool {
	ms, seed := e.managedSeed(t, name), e.seedObj(t, name)
	return ms != nil && seed != nil && ms.GetStatus().GetObservedGeneration() == ms.GetMetadata().GetGeneration() &&
		conditionOf(ms.GetStatus().GetConditions(), managedseed.ConditionSeedRegistered).GetStatus() == "True" &&
		conditionOf(ms.GetStatus().GetConditions(), managedseed.ConditionShootReconciled).GetStatus() == "True" &&
		conditionOf(seed.GetStatus().GetConditions(), managedseed.ConditionGardenletReady).GetStatus() == "True"
}

// bootstrapTokens are the bootstrap token Secrets on the hub made for the agent of seed.
func (e *env) bootstrapTokens(t *testing.T, seed string) []string {
	t.Helper()
	res, err := e.hub.Collection(t, "", "secrets").List(context.Background(), "kube-system", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range res.Items {
		s := o.(*kcorev1.Secret)
		if objectnames.SeedOfBootstrapTokenDescription(string(s.GetData()["description"])) == seed {
			out = append(out, s.GetMetadata().GetName())
		}
	}
	return out
}

// TestManagedSeed: a ManagedSeed for a workerless shoot on the local seed becomes a Seed. The seed's agent installs
// the agent chart into the shoot (a real Helm release in the shoot's kube-apiserver) with a fresh bootstrap token;
// the stand-in machine runner runs the agent the chart describes as a host process (the shoot has no machines), with
// the shoot as its seed cluster through the hub's tunnel; the new agent bootstraps, registers its Seed and turns
// GardenletReady. Deleting the ManagedSeed deletes the Seed, the release and the namespace in the shoot. Then a
// ManagedSeedSet makes a shoot and a ManagedSeed whose Seed registers; scaled to 2 it waits for that replica's shoot
// to be healthy before it makes the next (see managedSeedSet).
func TestManagedSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed with a real node and shoot control planes")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	e := start(t)
	bins := filepath.Join(e.dir, "bin")
	if err := binproc.Build(context.Background(), bins, "github.com/trellis-dev/trellis/cmd/trellis-agent"); err != nil {
		t.Fatal(err)
	}
	e.hub.Store(t, &corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Metadata: &metav1.ObjectMeta{Name: "garden"},
		Spec: &corev1beta1.ProjectSpec{Namespace: proto.String("garden")}})
	ctx, cancel := context.WithCancel(context.Background())
	si := &standIns{e: e, agent: filepath.Join(bins, "trellis-agent"), ctx: ctx, by: map[string]*machinestandin.Runner{}}
	t.Cleanup(func() { cancel(); si.wg.Wait() })

	// The shoot, in the garden project.
	s := agentsim.Shoot("garden", "soil", "local", "", "local")
	s.Spec.SecretBindingName = nil
	s.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: "1.31.1"}
	body, err := kjson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := e.hub.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", body); code != http.StatusCreated {
		t.Fatalf("create shoot: %d %s", code, out)
	}
	poll(t, "shoot soil Succeeded", 4*time.Minute, func() bool {
		sh, _ := e.get(t, "core.gardener.cloud", "shoots", "garden", "soil").(*corev1beta1.Shoot)
		return sh != nil && succeeded(sh)
	})

	ms := &seedmanagementv1alpha1.ManagedSeed{ApiVersion: "seedmanagement.gardener.cloud/v1alpha1", Kind: "ManagedSeed",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "soil"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "soil"},
			Gardenlet: &seedmanagementv1alpha1.GardenletConfig{Config: &metav1.RawExtension{Raw: gardenletConfig(t, map[string]string{"managed": "true"})}}}}
	if body, err = kjson.Marshal(ms); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if code, out := e.hub.Do(t, "POST", "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds", body); code != http.StatusCreated {
		t.Fatalf("create managed seed: %d %s", code, out)
	}
	r := si.start(t, "soil")
	kc, err := e.kubeconfigOf("soil", "garden")
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the agent's release in the shoot", 2*time.Minute, func() bool {
		_, err := e.run(kc, "-n", managedseed.Namespace, "get", "deployment", managedseed.Release)
		return err == nil
	})
	deployed := time.Since(begin)
	poll(t, "ManagedSeed soil registered with its Seed GardenletReady", 3*time.Minute, func() bool { return e.registered(t, "soil") })
	registered := time.Since(begin)
	t.Logf("ManagedSeed create → agent release in the shoot: %v; → Seed GardenletReady and SeedRegistered: %v (agent starts: %d)",
		deployed.Round(100*time.Millisecond), registered.Round(100*time.Millisecond), r.Starts())

	// What Helm made in the shoot, and the Seed as its template says.
	if out := e.ok(t, kc, "-n", managedseed.Namespace, "get", "secrets", "-o", "name"); !strings.Contains(out, "sh.helm.release.v1."+managedseed.Release+".v") ||
		!strings.Contains(out, managedseed.KubeconfigSecret) {
		t.Fatalf("secrets in the shoot's garden namespace: %s", out)
	}
	if seed := e.seedObj(t, "soil"); seed.GetMetadata().GetLabels()["managed"] != "true" || seed.GetSpec().GetIngress().GetDomain() != "ingress.replica-name.seed.example.com" {
		t.Fatalf("the Seed is not the template's: labels %v, ingress %v", seed.GetMetadata().GetLabels(), seed.GetSpec().GetIngress())
	}
	// Once the agent holds its credentials, its bootstrap token goes from the release (the pod restarts without it)
	// and from the hub.
	poll(t, "the bootstrap token deleted", time.Minute, func() bool { return len(e.bootstrapTokens(t, "soil")) == 0 })
	poll(t, "the bootstrap token out of the release", time.Minute, func() bool {
		out, err := e.run(kc, "-n", managedseed.Namespace, "get", "secrets", "-o", "name")
		return err == nil && !strings.Contains(out, "bootstrap-token")
	})
	poll(t, "the agent running on its stored credentials, registered", 2*time.Minute, func() bool { return r.Running() && e.registered(t, "soil") })

	// Deletion: the Seed, then the release and the namespace in the shoot, then the ManagedSeed.
	begin = time.Now()
	if code, out := e.hub.Do(t, "DELETE", "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", ""); code != http.StatusOK {
		t.Fatalf("delete managed seed: %d %s", code, out)
	}
	poll(t, "ManagedSeed soil gone", 3*time.Minute, func() bool { return e.managedSeed(t, "soil") == nil })
	t.Logf("ManagedSeed delete → gone (Seed, release, namespace): %v", time.Since(begin).Round(100*time.Millisecond))
	if e.seedObj(t, "soil") != nil {
		t.Fatal("the Seed is still there")
	}
	if out, err := e.run(kc, "get", "namespace", managedseed.Namespace); err == nil {
		t.Fatalf("namespace garden is still in the shoot: %s", out)
	}
	if out := e.ok(t, kc, "get", "clusterroles", "-o", "name"); strings.Contains(out, managedseed.Release) {
		t.Fatalf("the release's cluster role is still in the shoot: %s", out)
	}
	poll(t, "the stand-in agent stopped", 30*time.Second, func() bool { return !r.Running() })
	time.Sleep(3 * time.Second) // nothing registers the Seed again
	if e.seedObj(t, "soil") != nil {
		t.Fatal("the Seed came back")
	}

	e.managedSeedSet(t, si, s.GetSpec())
}

// managedSeedSet creates a ManagedSeedSet of workerless shoots like spec on the local seed with one replica and waits
// for its ManagedSeed and Seed (the hub's ManagedSeedSet controller makes the Shoot, then the ManagedSeed; the local
// seed's agent deploys the agent; the stand-in runs it); scaled to two, the set waits for that replica's shoot to be
// healthy.
func (e *env) managedSeedSet(t *testing.T, si *standIns, spec *corev1beta1.ShootSpec) {
	t.Helper()
	sel := map[string]string{"set": "bed"}
	shootSpec := proto.CloneOf(spec)
	shootSpec.SeedName = proto.String("local")
	set := &seedmanagementv1alpha1.ManagedSeedSet{ApiVersion: "seedmanagement.gardener.cloud/v1alpha1", Kind: "ManagedSeedSet",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "bed"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSetSpec{Replicas: proto.Int32(1), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: &seedmanagementv1alpha1.ManagedSeedTemplate{Metadata: &metav1.ObjectMeta{Labels: sel},
				Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Gardenlet: &seedmanagementv1alpha1.GardenletConfig{
					Config: &metav1.RawExtension{Raw: gardenletConfig(t, sel)}}}},
			ShootTemplate: &corev1beta1.ShootTemplate{Metadata: &metav1.ObjectMeta{Labels: sel}, Spec: shootSpec}}}
	body, err := kjson.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if code, out := e.hub.Do(t, "POST", "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseedsets", body); code != http.StatusCreated {
		t.Fatalf("create managed seed set: %d %s", code, out)
	}
	replica := func(name string) {
		t.Helper()
		poll(t, "ManagedSeed "+name+" created by the set", 5*time.Minute, func() bool { return e.managedSeed(t, name) != nil })
		si.start(t, name)
		poll(t, "ManagedSeed "+name+" registered", 4*time.Minute, func() bool { return e.registered(t, name) })
		t.Logf("ManagedSeedSet: replica %s registered with its Seed GardenletReady after %v", name, time.Since(begin).Round(100*time.Millisecond))
	}
	replica("bed-0")
	patch := `{"spec":{"replicas":2}}`
	if code, out := e.hub.Do(t, "PATCH", "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseedsets/bed", patch,
		"Content-Type", "application/merge-patch+json"); code != http.StatusOK {
		t.Fatalf("scale the set: %d %s", code, out)
	}
	// One replica at a time, as Gardener's: the next waits until this one is ready, its shoot healthy. Here it never
	// is: the shoot carries its Seed's conditions, and the Seed's ExtensionsReady is False, since this hub registers
	// provider-local without a deployment, whose ControllerInstallation never reports healthy. test/e2e's
	// TestManagedSeedOnLocalNode runs the set with real extension deployments to two ready replicas.
	poll(t, "the scaled set waiting for replica bed-0's shoot to be healthy", 3*time.Minute, func() bool {
		st, _ := e.get(t, "seedmanagement.gardener.cloud", "managedseedsets", "garden", "bed").(*seedmanagementv1alpha1.ManagedSeedSet)
		p := st.GetStatus().GetPendingReplica()
		return st.GetStatus().GetObservedGeneration() == 2 && st.GetStatus().GetReplicas() == 1 && p.GetName() == "bed-0" &&
			p.GetReason() == "ShootNotHealthy"
	})
	if e.get(t, "core.gardener.cloud", "shoots", "garden", "bed-1") != nil {
		t.Fatal("the set created replica bed-1 while bed-0's shoot is not healthy")
	}
}
