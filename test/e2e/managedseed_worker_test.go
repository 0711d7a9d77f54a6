package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/machinestandin"
)

// TestManagedSeedWithRealWorker: in `make up`'s landscape with a node, a ManagedSeed for a shoot with one real worker
// (provider-local's Worker makes a local machine: its own network namespace, containerd and kubelet, joined to the
// shoot) becomes a Seed with GardenletReady=True, its agent running as the agent chart's pod IN THE SHOOT, on the
// machine: the machine imports the landscape's trellis-agent image (localseed --machine-images), the pod reaches the
// shoot's kube-apiserver through the kubernetes Service (the shoot's kube-proxy) and the hub at the address the
// chart's configuration gives (the hub's forwarder on the host's end of the seed node's link, which the machine
// reaches through the seed node's namespace). A stand-in machine runner watching the same shoot never starts: the
// shoot has Nodes. Deleting the ManagedSeed removes the Seed and the agent's release from the shoot.
func TestManagedSeedWithRealWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node and a shoot with a machine")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bins := landscapeBinaries(t)
	ctl := trellisctlBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	l := startLandscape(ctx, t, landscape.Config{Seeds: []landscape.SeedConfig{{Name: "local"}}, Node: true,
		RequireProviderLocal: true, TunnelListen: "127.0.0.1:0"})
	t.Logf("landscape with a node ready in %v", time.Since(start).Round(100*time.Millisecond))
	repo, tag := l.AgentImage()
	if repo == "" {
		t.Fatal("the landscape runs no agent image")
	}
	do := func(method, path string, body []byte, want int) {
		t.Helper()
		code, out, err := l.Do(ctx, method, path, body)
		if err != nil || code != want {
			t.Fatalf("%s %s: %d %v %s", method, path, code, err, out)
		}
	}
	get := func(path string, v any) bool {
		code, out, err := l.Do(ctx, http.MethodGet, path, nil)
		return err == nil && code == http.StatusOK && json.Unmarshal(out, v) == nil
	}
	var shootCS kubernetes.Interface
	wait := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				if logs, err := l.Seed("local").AgentPodLogs(ctx); err == nil {
					t.Logf("the seed's agent pod:\n%s", tailOf(logs, 6000))
				}
				if shootCS != nil {
					t.Logf("the shoot's agent pod:\n%s", tailOf(shootAgentState(ctx, shootCS), 8000))
				}
				t.Fatalf("%s: not after %v", what, timeout)
			}
			time.Sleep(time.Second)
		}
	}

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
			do(http.MethodPost, e.Path(), e.JSON, http.StatusCreated)
			var obj map[string]any
			if err := json.Unmarshal(e.JSON, &obj); err != nil {
				t.Fatal(err)
			}
			obj["metadata"].(map[string]any)["namespace"] = "garden"
			if ref, ok := obj["credentialsRef"].(map[string]any); ok {
				ref["namespace"] = "garden"
			}
			body, _ := json.Marshal(obj)
			do(http.MethodPost, strings.Replace(e.Path(), "/namespaces/"+e.Namespace+"/", "/namespaces/garden/", 1), body, http.StatusCreated)
			continue
		}
		do(http.MethodPost, e.Path(), e.JSON, http.StatusCreated)
	}
	do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/projects", []byte(`{"metadata":{"name":"garden"},"spec":{"namespace":"garden"}}`), http.StatusCreated)

	// Shoot garden/soil: the example shoot's spec (one worker pool of one machine) on seed local.
	shoot["metadata"] = map[string]any{"name": "soil", "namespace": "garden"}
	shoot["spec"].(map[string]any)["seedName"] = "local"
	body, _ := json.Marshal(shoot)
	begin := time.Now()
	do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", body, http.StatusCreated)
	wait("shoot soil Succeeded", 8*time.Minute, func() bool {
		var s struct {
			Status struct {
				LastOperation struct{ State string } `json:"lastOperation"`
			} `json:"status"`
		}
		return get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/soil", &s) && s.Status.LastOperation.State == "Succeeded"
	})
	t.Logf("shoot with a worker Succeeded in %v", time.Since(begin).Round(100*time.Millisecond))

	dir := t.TempDir()
	kc := filepath.Join(dir, "soil.kubeconfig")
	wait("an admin kubeconfig of shoot soil", 2*time.Minute, func() bool {
		cmd := exec.CommandContext(ctx, ctl, "shoot", "kubeconfig", "soil", "-p", "garden", "--file", kc)
		cmd.Env = []string{"TRELLIS_HUB=" + l.HubURL, "TRELLIS_CA=" + l.CAFile, "TRELLIS_TOKEN=" + l.Token, "HOME=" + dir,
			"TRELLISCONFIG=" + filepath.Join(dir, "trellisconfig")}
		return cmd.Run() == nil
	})
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 20 * time.Second
	shootCS, err = kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	var node string
	wait("the shoot's Node Ready", 4*time.Minute, func() bool {
		nodes, err := shootCS.CoreV1().Nodes().List(ctx, kmetav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 {
			return false
		}
		for _, c := range nodes.Items[0].Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				node = nodes.Items[0].Name
				return true
			}
		}
		return false
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

	const seedSpec = `{"provider":{"type":"local","region":"local"},"ingress":{"domain":"ingress.soil.seed.example.com","controller":{"kind":"nginx"}},` +
		`"dns":{"provider":{"type":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","namespace":"garden","name":"` + landscape.DNSSecretName + `"}}},` +
		`"networks":{"nodes":"10.10.0.0/16","pods":"10.3.0.0/16","services":"10.4.0.0/16"}}`
	begin = time.Now()
	do(http.MethodPost, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds", []byte(`{"metadata":{"name":"soil"},"spec":{"shoot":{"name":"soil"},`+
		`"gardenlet":{"deployment":{"image":{"repository":"`+repo+`","tag":"`+tag+`","pullPolicy":"Never"}},`+
		`"config":{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration","seedConfig":{"spec":`+seedSpec+`}}}}}`),
		http.StatusCreated)
	type cond struct{ Type, Status string }
	has := func(cs []cond, typ string) bool {
		for _, c := range cs {
			if c.Type == typ && c.Status == "True" {
				return true
			}
		}
		return false
	}
	wait("ManagedSeed soil registered with its Seed GardenletReady", 6*time.Minute, func() bool {
		var ms, seed struct {
			Status struct{ Conditions []cond } `json:"status"`
		}
		return get("/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", &ms) &&
			get("/apis/core.gardener.cloud/v1beta1/seeds/soil", &seed) &&
			has(ms.Status.Conditions, "SeedRegistered") && has(ms.Status.Conditions, "ShootReconciled") &&
			has(seed.Status.Conditions, "GardenletReady")
	})
	t.Logf("ManagedSeed create → Seed GardenletReady, SeedRegistered: %v", time.Since(begin).Round(100*time.Millisecond))

	// Registered, the release drops the bootstrap token (a new pod template): wait until that rollout is done.
	wait("the agent's Deployment rolled out without the bootstrap token", 4*time.Minute, func() bool {
		d, err := shootCS.AppsV1().Deployments(managedseed.Namespace).Get(ctx, managedseed.Release, kmetav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != 1 || d.Status.UpdatedReplicas != 1 ||
			d.Status.ReadyReplicas != 1 {
			return false
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "bootstrap" {
				return false
			}
		}
		return true
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
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready != 1 {
		t.Errorf("%d ready agent pods in the shoot, want 1", ready)
	}
	if n := r.Starts(); n != 0 || r.Running() {
		t.Errorf("the stand-in runner started the agent %d times on a shoot with Nodes", n)
	}

	begin = time.Now()
	do(http.MethodDelete, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", nil, http.StatusOK)
	wait("ManagedSeed soil gone", 4*time.Minute, func() bool {
		code, _, err := l.Do(ctx, http.MethodGet, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", nil)
		return err == nil && code == http.StatusNotFound
	})
	t.Logf("ManagedSeed delete → gone: %v", time.Since(begin).Round(100*time.Millisecond))
	if code, _, err := l.Do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/soil", nil); err != nil || code != http.StatusNotFound {
		t.Fatalf("the Seed: %d %v, want 404", code, err)
	}
	// The agent's release is gone from the shoot: its Deployment, its pod and Helm's release records.
	wait("the agent's release and pod gone from the shoot", 2*time.Minute, func() bool {
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
	if code, _, err := l.Do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/soil", nil); err != nil || code != http.StatusNotFound {
		t.Fatalf("the Seed after the agent's removal: %d %v, want 404", code, err)
	}
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
