package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/agent/managedseed"
	agentshoot "github.com/trellis-dev/trellis/agent/shoot"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/machinestandin"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestManagedSeedWithRealWorker: in `make up`'s landscape with a node, a ManagedSeed for a shoot with one real worker
// (provider-local's Worker makes a local machine: its own network namespace, containerd and kubelet, joined to the
// shoot) becomes a Seed with GardenletReady=True, its agent running as the agent chart's pod IN THE SHOOT, on the
// machine: the machine imports the landscape's trellis-agent image (localseed --machine-images), the pod reaches the
// shoot's kube-apiserver through the kubernetes Service (the shoot's kube-proxy) and the hub at the address the
// chart's configuration gives (the hub's forwarder on the host's end of the seed node's link, which the machine
// reaches through the seed node's namespace). provider-local's ControllerInstallation for the new Seed runs as its
// chart's pod in the shoot as well (the machine imports its image): the Seed's ExtensionsReady turns True. A stand-in
// machine runner watching the same shoot never starts: the shoot has Nodes. The ready Seed then hosts a second,
// workerless shoot, its control plane as pods on the machine (hostedShoot). Deleting the ManagedSeed removes the Seed
// and the agent's release from the shoot, and the Seed does not come back. It logs every phase's duration and the
// machine's memory (free -m) before the landscape and while both control planes run (docs/agent.md).
func TestManagedSeedWithRealWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node and a shoot with a machine")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bins := landscapeBinaries(t)
	ctl := trellisctlBinary(t)
	localnode.TakeTurn(t)
	if free, err := exec.Command("free", "-m").Output(); err == nil {
		t.Logf("memory before the landscape:\n%s", free)
	}
	// The hosted shoot's volumes lie in soil's directory of its machines (agent/shoot's LocalStoragePath), the
	// host's file system: removed once the landscape is down, whether or not the shoot's deletion removed them.
	var soilUID string
	t.Cleanup(func() {
		if soilUID != "" {
			_ = os.RemoveAll(agentshoot.LocalStoragePath(soilUID))
		}
		_ = os.Remove(agentshoot.LocalStorageRoot) // unless other shoots' volumes are there
	})
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(25*time.Minute))
	defer cancel()
	start := time.Now()
	l := startLandscape(ctx, t, landscape.Config{Seeds: []landscape.SeedConfig{{Name: "local"}}, Node: true,
		RequireProviderLocal: true, TunnelListen: "127.0.0.1:0"})
	t.Logf("landscape with a node ready in %v", time.Since(start).Round(100*time.Millisecond))
	repo, tag := l.AgentImage()
	if repo == "" {
		t.Fatal("the landscape runs no agent image")
	}
	var shootCS kubernetes.Interface
	m := &msLandscape{ctx: ctx, t: t, l: l, onTimeout: func() {
		if shootCS != nil {
			t.Logf("the shoot's agent pod:\n%s", landscape.TailOf(shootAgentState(ctx, shootCS), 8000))
		}
	}}

	// The example resources without the example shoot (no second machine), and the garden project with the same
	// credentials: ManagedSeeds and their shoots live in namespace garden.
	exs, err := landscape.Examples()
	if err != nil {
		t.Fatal(err)
	}
	var shoot map[string]any
	for _, e := range exs {
		switch e.Kind.Kind {
		case "Shoot":
			if err := json.Unmarshal(e.JSON, &shoot); err != nil {
				t.Fatal(err)
			}
			continue
		case "Secret", "CredentialsBinding":
			var obj map[string]any
			if err := json.Unmarshal(e.JSON, &obj); err != nil {
				t.Fatal(err)
			}
			obj["metadata"].(map[string]any)["namespace"] = "garden"
			if ref, ok := obj["credentialsRef"].(map[string]any); ok {
				ref["namespace"] = "garden"
			}
			b, _ := json.Marshal(obj)
			m.do(http.MethodPost, strings.Replace(e.Path(), "/namespaces/"+e.Namespace+"/", "/namespaces/garden/", 1), string(b), http.StatusCreated)
		}
		m.do(http.MethodPost, e.Path(), string(e.JSON), http.StatusCreated)
	}
	m.do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"garden"},"spec":{"namespace":"garden"}}`, http.StatusCreated)

	// Shoot garden/soil: the example shoot's spec (one worker pool of one machine) on seed local.
	shoot["metadata"] = map[string]any{"name": "soil", "namespace": "garden"}
	shoot["spec"].(map[string]any)["seedName"] = "local"
	b, _ := json.Marshal(shoot)
	begin := time.Now()
	m.do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", string(b), http.StatusCreated)
	m.shootSucceeded("soil", 8*time.Minute)
	t.Logf("shoot with a worker Succeeded in %v", time.Since(begin).Round(100*time.Millisecond))

	dir := t.TempDir()
	kc := m.shootKubeconfig(ctl, dir, "soil")
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 20 * time.Second
	if shootCS, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	var node string
	m.wait("the shoot's Node Ready", 4*time.Minute, func() bool {
		nodes, err := shootCS.CoreV1().Nodes().List(ctx, kmetav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 {
			return false
		}
		node = nodes.Items[0].Name
		return slices.ContainsFunc(nodes.Items[0].Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
	})
	t.Logf("shoot create → Node %s Ready: %v", node, time.Since(begin).Round(100*time.Millisecond))

	// A stand-in runner on the same shoot stays idle: the shoot's machine runs the agent.
	r, err := machinestandin.New(machinestandin.Config{Name: "agent-of-soil", Binary: filepath.Join(bins, "trellis-agent"), Kubeconfig: kc, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	defer func() { stop(); wg.Wait() }()

	begin = time.Now()
	m.createManagedSeed("soil", `{"nodes":"10.10.0.0/16","pods":"10.3.0.0/16","services":"10.4.0.0/16"}`, `{"`+hostedLabel+`":"soil"}`,
		`{"image":{"repository":"`+repo+`","tag":"`+tag+`","pullPolicy":"Never"}}`)
	m.wait("ManagedSeed soil registered with its Seed GardenletReady", 6*time.Minute, func() bool { return m.registered("soil") })
	t.Logf("ManagedSeed create → Seed GardenletReady, SeedRegistered: %v", time.Since(begin).Round(100*time.Millisecond))
	// Registered, the release drops the bootstrap token (a new pod template): wait until that rollout is done.
	m.wait("the agent's Deployment rolled out without the bootstrap token", 4*time.Minute, func() bool {
		d, err := shootCS.AppsV1().Deployments(managedseed.Namespace).Get(ctx, managedseed.Release, kmetav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == 1 && d.Status.UpdatedReplicas == 1 &&
			d.Status.ReadyReplicas == 1 && !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "bootstrap" })
	})
	t.Logf("ManagedSeed create → the agent's Deployment rolled out without the bootstrap token: %v", time.Since(begin).Round(100*time.Millisecond))

	// The agent is the chart's pod on the shoot's machine, from the landscape's image; no stand-in ran.
	pods, err := shootCS.CoreV1().Pods(managedseed.Namespace).List(ctx, kmetav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + managedseed.Release})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		t.Logf("agent pod %s on %s: %s, image %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.Containers[0].Image)
		if p.Spec.NodeName != node {
			t.Errorf("agent pod %s runs on %q, want the machine %s", p.Name, p.Spec.NodeName, node)
		}
		if want := repo + ":" + tag; p.Spec.Containers[0].Image != want {
			t.Errorf("agent pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
		if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			ready++
		}
	}
	if ready != 1 {
		t.Errorf("%d ready agent pods in the shoot, want 1", ready)
	}
	// provider-local's ControllerInstallation for the new seed runs as its chart's pod in the shoot too (the machine
	// imports its image): the Seed's extensions become healthy.
	m.wait("Seed soil ExtensionsReady", 3*time.Minute, func() bool {
		var seed struct {
			Status struct{ Conditions []hubCondition } `json:"status"`
		}
		return m.get("/apis/core.gardener.cloud/v1beta1/seeds/soil", &seed) && conditionTrue(seed.Status.Conditions, "ExtensionsReady")
	})
	t.Logf("ManagedSeed create → Seed ExtensionsReady (provider-local's pod in the shoot): %v", time.Since(begin).Round(100*time.Millisecond))
	if n := r.Starts(); n != 0 || r.Running() {
		t.Errorf("the stand-in runner started the agent %d times on a shoot with Nodes", n)
	}

	m.hostedShoot(ctl, dir, shoot, node, shootCS, &soilUID)

	begin = time.Now()
	m.deleteManagedSeed("soil")
	// The agent's release is gone from the shoot: its Deployment, its pod and Helm's release records.
	m.wait("the agent's release and pod gone from the shoot", 2*time.Minute, func() bool {
		_, err := shootCS.AppsV1().Deployments(managedseed.Namespace).Get(ctx, managedseed.Release, kmetav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		pods, err := shootCS.CoreV1().Pods(managedseed.Namespace).List(ctx, kmetav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + managedseed.Release})
		if err != nil || len(pods.Items) > 0 {
			return false
		}
		recs, err := shootCS.CoreV1().Secrets(managedseed.Namespace).List(ctx, kmetav1.ListOptions{LabelSelector: "owner=helm,name=" + managedseed.Release})
		return err == nil && len(recs.Items) == 0
	})
	// With its agent gone, nothing registers the Seed again.
	if !m.gone("/apis/core.gardener.cloud/v1beta1/seeds/soil") {
		t.Fatal("Seed soil is back after its agent's removal")
	}
	t.Logf("ManagedSeed delete → the agent's release gone from the shoot: %v; the whole test: %v", time.Since(begin).Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond))
}

// hostedLabel is the label of the ManagedSeed's Seed that the hosted shoot's seed selector asks for.
const hostedLabel = "seed.trellis.dev/hosts"

// hostedShoot runs a second shoot on the ManagedSeed's Seed soil: once the Seed is ready as the scheduler wants it
// (GardenletReady, ExtensionsReady, SeedSystemComponentsHealthy), a workerless shoot garden/sprout whose seed
// selector only soil's label matches (seed local fits it otherwise: same provider and region) is scheduled there and
// reconciled, its control plane (etcd on a volume of the shoot's default StorageClass, kube-apiserver,
// kube-controller-manager) running as pods on soil's machine node from the images the machine imported; its
// kube-apiserver answers through the hub's tunnel and soil's agent; then it is deleted, and with it its namespace in
// soil and its volumes. example is the example shoot (its Kubernetes version and cloud profile); soilUID receives the
// UID of shoot soil, whose directory on its machines holds the volumes.
func (m *msLandscape) hostedShoot(ctl, dir string, example map[string]any, node string, soilCS kubernetes.Interface, soilUID *string) {
	t, ctx := m.t, m.ctx
	begin := time.Now()
	phase := begin
	var seed struct {
		Metadata struct{ Labels map[string]string }  `json:"metadata"`
		Status   struct{ Conditions []hubCondition } `json:"status"`
	}
	m.wait("Seed soil ready for shoots", 3*time.Minute, func() bool {
		return m.get("/apis/core.gardener.cloud/v1beta1/seeds/soil", &seed) && seed.Metadata.Labels[hostedLabel] == "soil" &&
			conditionTrue(seed.Status.Conditions, "GardenletReady") && conditionTrue(seed.Status.Conditions, "ExtensionsReady") &&
			conditionTrue(seed.Status.Conditions, "SeedSystemComponentsHealthy")
	})
	t.Logf("Seed soil SeedSystemComponentsHealthy (and GardenletReady, ExtensionsReady) %v after ExtensionsReady", time.Since(begin).Round(100*time.Millisecond))
	var soil struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	if !m.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/soil", &soil) || soil.Metadata.UID == "" {
		t.Fatal("shoot soil has no UID")
	}
	*soilUID = soil.Metadata.UID

	spec := example["spec"].(map[string]any)
	sprout, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "sprout", "namespace": "garden"}, "spec": map[string]any{
		"cloudProfile": spec["cloudProfile"], "region": "local", "provider": map[string]any{"type": "local"},
		"kubernetes": spec["kubernetes"], "seedSelector": map[string]any{"matchLabels": map[string]string{hostedLabel: "soil"}}}})
	begin = time.Now()
	m.do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", string(sprout), http.StatusCreated)
	var s struct {
		Spec   struct{ SeedName string }    `json:"spec"`
		Status struct{ TechnicalID string } `json:"status"`
	}
	m.wait("shoot sprout scheduled", time.Minute, func() bool {
		return m.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/sprout", &s) && s.Spec.SeedName != ""
	})
	if s.Spec.SeedName != "soil" {
		t.Fatalf("shoot sprout scheduled onto seed %q, want soil", s.Spec.SeedName)
	}
	t.Logf("hosted shoot create → scheduled onto soil: %v", time.Since(begin).Round(100*time.Millisecond))
	m.shootSucceeded("sprout", 8*time.Minute)
	t.Logf("hosted shoot create → Succeeded: %v", time.Since(begin).Round(100*time.Millisecond))
	if !m.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/sprout", &s) || s.Status.TechnicalID == "" {
		t.Fatal("shoot sprout has no technical ID")
	}

	// Its control plane runs in soil, on soil's machine.
	pods, err := soilCS.CoreV1().Pods(s.Status.TechnicalID).List(ctx, kmetav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != node {
			t.Errorf("pod %s of the hosted control plane on %q, want soil's machine %s", p.Name, p.Spec.NodeName, node)
		}
		// The images of the parent's image vector, which the machine imported (nothing is pulled here).
		for _, c := range p.Spec.Containers {
			if !strings.HasPrefix(c.Image, "local.trellis.dev/") {
				t.Errorf("pod %s runs %s, want an image of the landscape's vector", p.Name, c.Image)
			}
		}
		for _, prefix := range []string{"etcd-main", "etcd-events", "kube-apiserver", "kube-controller-manager"} {
			if strings.HasPrefix(p.Name, prefix) {
				running[prefix] = true
			}
		}
	}
	if len(running) != 4 {
		t.Errorf("running in soil's namespace %s: %v, want etcd-main, etcd-events, kube-apiserver, kube-controller-manager", s.Status.TechnicalID, running)
	}
	pvcs, err := soilCS.CoreV1().PersistentVolumeClaims(s.Status.TechnicalID).List(ctx, kmetav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvcs.Items) != 2 {
		t.Errorf("%d volume claims in soil's namespace %s, want etcd-main's and etcd-events'", len(pvcs.Items), s.Status.TechnicalID)
	}
	for _, c := range pvcs.Items {
		if c.Status.Phase != corev1.ClaimBound || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "standard" {
			t.Errorf("volume claim %s: %s, class %v, want Bound of soil's default class standard", c.Name, c.Status.Phase, c.Spec.StorageClassName)
		}
	}
	if free, err := exec.CommandContext(ctx, "free", "-m").Output(); err == nil {
		t.Logf("memory with both control planes (soil's on seed local, sprout's on soil's machine):\n%s", free)
	}

	// Its kube-apiserver answers with an admin kubeconfig from the hub: the hub's tunnel, soil's agent.
	kc := m.shootKubeconfig(ctl, dir, "sprout")
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 20 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	m.wait("shoot sprout's kube-apiserver answering", time.Minute, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", kmetav1.GetOptions{})
		return err == nil
	})
	if v, err := cs.Discovery().ServerVersion(); err != nil {
		t.Errorf("shoot sprout's version: %v", err)
	} else {
		t.Logf("shoot sprout's kube-apiserver %s answers through the hub's tunnel", v.GitVersion)
	}

	// Delete it: its namespace in soil goes, with its volumes.
	begin = time.Now()
	path := "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/sprout"
	m.do(http.MethodPatch, path, `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`, http.StatusOK)
	code, out, err := m.l.Do(ctx, http.MethodDelete, path, nil)
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted) {
		t.Fatalf("delete shoot sprout: %d %v %s", code, err, out)
	}
	m.wait("shoot sprout gone", 5*time.Minute, func() bool { return m.gone(path) })
	t.Logf("hosted shoot delete → gone: %v", time.Since(begin).Round(100*time.Millisecond))
	m.wait("shoot sprout's namespace and volumes gone from soil", 2*time.Minute, func() bool {
		_, err := soilCS.CoreV1().Namespaces().Get(ctx, s.Status.TechnicalID, kmetav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		pvs, err := soilCS.CoreV1().PersistentVolumes().List(ctx, kmetav1.ListOptions{})
		return err == nil && len(pvs.Items) == 0
	})
	t.Logf("hosted shoot delete → its namespace and volumes gone from soil: %v; the hosted shoot's phase: %v", time.Since(begin).Round(100*time.Millisecond),
		time.Since(phase).Round(100*time.Millisecond))
}

// shootAgentState describes the agent's pods in the shoot and their logs, for a failing test.
func shootAgentState(ctx context.Context, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods(managedseed.Namespace).List(ctx, kmetav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	for _, p := range pods.Items {
		b, _ := json.Marshal(p.Status)
		fmt.Fprintf(&out, "== pod %s on %q: %s\n", p.Name, p.Spec.NodeName, b)
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		logs, err := cs.CoreV1().Pods(managedseed.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(lctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&out, "logs: %v\n", err)
			continue
		}
		out.Write(logs)
	}
	return out.String()
}

// msLandscape holds what the ManagedSeed tests do against a landscape with a node (seed local): REST calls on the
// hub, waits that show the seed agent's pod logs on a timeout, a shoot's admin kubeconfig and the ManagedSeed's
// registration and deletion.
type msLandscape struct {
	ctx       context.Context
	t         *testing.T
	l         *landscape.Landscape
	onTimeout func() // more to log when a wait times out; may be nil
}

// do sends a request to the hub and fails the test unless it answers want.
func (m *msLandscape) do(method, path, body string, want int) []byte {
	m.t.Helper()
	code, out, err := m.l.Do(m.ctx, method, path, []byte(body))
	if err != nil || code != want {
		m.t.Fatalf("%s %s: %d %v %s", method, path, code, err, out)
	}
	return out
}

// get reads path from the hub into v and reports whether that worked.
func (m *msLandscape) get(path string, v any) bool { return hubGet(m.ctx, m.l, path, v) }

// gone reports whether the hub answers 404 for path.
func (m *msLandscape) gone(path string) bool { return hubGone(m.ctx, m.l, path) }

// hubGet reads path from the landscape's hub into v and reports whether that worked.
func hubGet(ctx context.Context, l *landscape.Landscape, path string, v any) bool {
	code, out, err := l.Do(ctx, http.MethodGet, path, nil)
	return err == nil && code == http.StatusOK && json.Unmarshal(out, v) == nil
}

// hubGone reports whether the landscape's hub answers 404 for path.
func hubGone(ctx context.Context, l *landscape.Landscape, path string) bool {
	code, _, err := l.Do(ctx, http.MethodGet, path, nil)
	return err == nil && code == http.StatusNotFound
}

// wait polls cond every 250 ms until it holds, failing the test after timeout with the seed agent's pod logs.
func (m *msLandscape) wait(what string, timeout time.Duration, cond func() bool) {
	m.t.Helper()
	timeout = timescale.Scale(timeout)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if logs, err := m.l.Seed("local").AgentPodLogs(m.ctx); err == nil {
				m.t.Logf("the seed's agent pod:\n%s", landscape.TailOf(logs, 6000))
			}
			if m.onTimeout != nil {
				m.onTimeout()
			}
			m.t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// shootSucceeded waits until shoot garden/<name>'s last operation Succeeded.
func (m *msLandscape) shootSucceeded(name string, timeout time.Duration) {
	m.t.Helper()
	m.wait("shoot "+name+" Succeeded", timeout, func() bool {
		var s struct {
			Status struct {
				LastOperation struct{ State string } `json:"lastOperation"`
			} `json:"status"`
		}
		return m.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/"+name, &s) && s.Status.LastOperation.State == "Succeeded"
	})
}

// shootKubeconfig writes an admin kubeconfig of shoot garden/<name> into dir with trellisctl (ctl) and returns its path.
func (m *msLandscape) shootKubeconfig(ctl, dir, name string) string {
	m.t.Helper()
	kc := filepath.Join(dir, name+".kubeconfig")
	m.wait("an admin kubeconfig of shoot "+name, 2*time.Minute, func() bool {
		cmd := exec.CommandContext(m.ctx, ctl, "shoot", "kubeconfig", name, "-p", "garden", "--file", kc)
		cmd.Env = []string{"TRELLIS_HUB=" + m.l.HubURL, "TRELLIS_CA=" + m.l.CAFile, "TRELLIS_TOKEN=" + m.l.Token, "HOME=" + dir,
			"TRELLISCONFIG=" + filepath.Join(dir, "trellisconfig")}
		return cmd.Run() == nil
	})
	return kc
}

// createManagedSeed creates ManagedSeed garden/<name> for shoot garden/<name>, its Seed a provider-local seed with
// networks (JSON), labels (JSON, "" for none) and deployment (JSON of spec.gardenlet.deployment, "" for none).
func (m *msLandscape) createManagedSeed(name, networks, labels, deployment string) {
	m.t.Helper()
	seedSpec := `{"provider":{"type":"local","region":"local"},"ingress":{"domain":"ingress.` + name + `.seed.example.com","controller":{"kind":"nginx"}},` +
		`"dns":{"provider":{"type":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","namespace":"garden","name":"` + landscape.DNSSecretName + `"}}},` +
		`"networks":` + networks + `}`
	if deployment != "" {
		deployment = `"deployment":` + deployment + `,`
	}
	if labels != "" {
		labels = `"metadata":{"labels":` + labels + `},`
	}
	m.do(http.MethodPost, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds", `{"metadata":{"name":"`+name+`"},"spec":{"shoot":{"name":"`+name+`"},`+
		`"gardenlet":{`+deployment+`"config":{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration","seedConfig":{`+labels+`"spec":`+seedSpec+`}}}}}`,
		http.StatusCreated)
}

// registered reports whether ManagedSeed garden/<name> has SeedRegistered and ShootReconciled True and its Seed
// GardenletReady True.
func (m *msLandscape) registered(name string) bool { return managedSeedRegistered(m.ctx, m.l, name) }

// managedSeedRegistered reports whether ManagedSeed garden/<name> has SeedRegistered and ShootReconciled True and
// its Seed GardenletReady True.
func managedSeedRegistered(ctx context.Context, l *landscape.Landscape, name string) bool {
	var ms, seed struct {
		Status struct{ Conditions []hubCondition } `json:"status"`
	}
	return hubGet(ctx, l, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/"+name, &ms) &&
		hubGet(ctx, l, "/apis/core.gardener.cloud/v1beta1/seeds/"+name, &seed) &&
		conditionTrue(ms.Status.Conditions, "SeedRegistered") && conditionTrue(ms.Status.Conditions, "ShootReconciled") &&
		conditionTrue(seed.Status.Conditions, "GardenletReady")
}

// hubCondition is a condition of a hub object's status.
type hubCondition struct{ Type, Status string }

// conditionTrue reports whether cs has condition typ with status True.
func conditionTrue(cs []hubCondition, typ string) bool {
	return slices.ContainsFunc(cs, func(c hubCondition) bool { return c.Type == typ && c.Status == "True" })
}

// deleteManagedSeed deletes ManagedSeed garden/<name>, waits until it is gone and checks that its Seed is gone too.
func (m *msLandscape) deleteManagedSeed(name string) {
	m.t.Helper()
	begin := time.Now()
	m.do(http.MethodDelete, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/"+name, "", http.StatusOK)
	m.wait("ManagedSeed "+name+" gone", 4*time.Minute, func() bool {
		return m.gone("/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/" + name)
	})
	m.t.Logf("ManagedSeed delete → gone: %v", time.Since(begin).Round(100*time.Millisecond))
	if !m.gone("/apis/core.gardener.cloud/v1beta1/seeds/" + name) {
		m.t.Fatalf("Seed %s still there after its ManagedSeed is gone", name)
	}
}
