package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestLocalSeedNodes runs `make up`'s landscape with a real node in each of two seeds, side by side: every seed has
// one Ready node with its own networks, which the Seed on the hub reports, and runs its agent (the trellis-agent
// chart) and provider-local as their charts' pods; the example shoot reaches Succeeded through it, its worker a
// machine of the seed's local machine provider; in
// seed local a pod resolves a Service by DNS name and reaches it through its ClusterIP, and kubectl logs and exec
// work through the seed's kube-apiserver; in seed other a pod resolves the apiserver's Service. After the landscape
// stops, nothing of either node is left on the machine and the host's iptables gained no chain.
func TestLocalSeedNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with nodes")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	before, err := localnode.HostKubeChains()
	if err != nil {
		t.Fatal(err)
	}
	landscapeBinaries(t) // built before the clock starts: a cold static build takes minutes
	localnode.TakeTurn(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(5*time.Minute))
	defer cancel()
	begin := time.Now()
	l := startLandscape(ctx, t, landscape.Config{
		Seeds:                []landscape.SeedConfig{{Name: "local"}, {Name: "other"}},
		Node:                 true,
		Examples:             true,
		RequireProviderLocal: true,
		MachinesHostNoSeeds:  true, // the example shoot never becomes a seed
	})
	t.Logf("landscape with 2 seeds and their nodes ready in %v", time.Since(begin).Round(100*time.Millisecond))

	var slots []*localnode.Slot
	for _, s := range l.Seeds() {
		nodes, err := s.Client.CoreV1().Nodes().List(ctx, kmetav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 1 || !nodeReady(&nodes.Items[0]) {
			t.Fatalf("seed %s: nodes %v, want one Ready", s.Name, nodeNames(nodes.Items))
		}
		// provider-local runs as its chart's pod on the node, not as a process of the landscape.
		pods, err := s.Client.CoreV1().Pods(s.ProviderLocalNamespace).List(ctx, kmetav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning ||
			pods.Items[0].Spec.NodeName != nodes.Items[0].Name || l.Pids()["provider-local-"+s.Name] != 0 {
			t.Fatalf("seed %s: provider-local's pods in %q: %v (%v); landscape processes %v", s.Name,
				s.ProviderLocalNamespace, pods, err, l.Pids())
		}
		// So does the agent: the trellis-agent chart's pod, no process of the landscape.
		agents, err := s.Client.CoreV1().Pods(landscape.AgentNamespace).List(ctx, kmetav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + landscape.AgentRelease})
		if err != nil || !s.AgentPod || len(agents.Items) != 1 || agents.Items[0].Status.Phase != corev1.PodRunning ||
			agents.Items[0].Spec.NodeName != nodes.Items[0].Name || l.Pids()["agent-"+s.Name] != 0 {
			t.Fatalf("seed %s: the agent's pods %v (%v); landscape processes %v", s.Name, agents, err, l.Pids())
		}
		var info struct {
			Slot int `json:"slot"`
		}
		b, err := os.ReadFile(filepath.Join(s.Dir, "node.json"))
		if err != nil || json.Unmarshal(b, &info) != nil {
			t.Fatalf("seed %s: node.json: %v %s", s.Name, err, b)
		}
		slots = append(slots, localnode.SlotAt(info.Slot))
		// The Seed on the hub has the node's networks.
		code, body, err := l.Do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/"+s.Name, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("get seed %s: %d %v %s", s.Name, code, err, body)
		}
		var seed struct {
			Spec struct {
				Networks struct {
					Pods, Services string
					ShootDefaults  struct{ Pods, Services string } `json:"shootDefaults"`
				} `json:"networks"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body, &seed); err != nil {
			t.Fatal(err)
		}
		n := seed.Spec.Networks
		if n.Pods != slots[len(slots)-1].PodCIDR.String() || n.Services != slots[len(slots)-1].ServiceCIDR.String() ||
			n.ShootDefaults.Pods != landscape.ShootDefaultPods || n.ShootDefaults.Services != landscape.ShootDefaultServices {
			t.Errorf("seed %s: networks %+v, want the node's (slot %d) with Gardener's local shoot defaults", s.Name, n, info.Slot)
		}
	}
	if slots[0].Index == slots[1].Index {
		t.Fatalf("both seeds' nodes are in slot %d", slots[0].Index)
	}

	// The example shoot, scheduled by the hub, reaches Succeeded through provider-local.
	const shootPath = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local"
	var last string
	limit := timescale.Scale(2 * time.Minute)
	deadline := time.Now().Add(limit)
	for {
		code, body, err := l.Do(ctx, http.MethodGet, shootPath, nil)
		var sh struct {
			Status struct {
				LastOperation struct{ State string } `json:"lastOperation"`
			} `json:"status"`
		}
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &sh) == nil {
			last = sh.Status.LastOperation.State
			if last == "Succeeded" {
				break
			}
		}
		if time.Now().After(deadline) {
			for _, s := range l.Seeds() {
				logs, err := s.AgentPodLogs(ctx)
				t.Logf("seed %s: the agent's pod (%v):\n%s", s.Name, err, logs)
			}
			t.Fatalf("example shoot not Succeeded after %v; last state %q", limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("example shoot Succeeded %v after the start", time.Since(begin).Round(100*time.Millisecond))
	// Its control plane runs on the node of the seed it was scheduled to (docs/shoots.md).
	var cpSeed *landscape.Seed
	for _, s := range l.Seeds() {
		if _, err := s.Client.CoreV1().Pods("shoot--local--local").Get(ctx, "etcd-main-0", kmetav1.GetOptions{}); err == nil {
			cpSeed = s
		}
	}
	if cpSeed == nil {
		t.Fatal("the example shoot's etcd runs on no seed")
	}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		d, err := cpSeed.Client.AppsV1().Deployments("shoot--local--local").Get(ctx, name, kmetav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 1 {
			t.Errorf("seed %s: the example shoot's %s is not available: %v", cpSeed.Name, name, err)
		}
	}
	// Its worker is a real machine, which provider-local's pod made through the seed's local machine provider.
	var mp struct{ URL, Token string }
	if b, err := os.ReadFile(filepath.Join(cpSeed.Dir, "machine-provider.json")); err != nil || json.Unmarshal(b, &mp) != nil {
		t.Fatalf("seed %s: machine-provider.json: %v %s", cpSeed.Name, err, b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mp.URL+"/machines", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mp.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("seed %s: the machine provider: %v", cpSeed.Name, err)
	}
	var machines []struct{ Name, Phase string }
	err = json.NewDecoder(resp.Body).Decode(&machines)
	_ = resp.Body.Close()
	if err != nil || len(machines) != 1 || machines[0].Phase != "Running" || !strings.HasPrefix(machines[0].Name, "shoot--local--local-") {
		t.Errorf("seed %s: the machine provider runs %+v (%v), want the example shoot's machine", cpSeed.Name, machines, err)
	}
	// The agents did all of that with the chart's RBAC alone: the seed refused them nothing.
	for _, s := range l.Seeds() {
		logs, err := s.AgentPodLogs(ctx)
		if err != nil {
			t.Fatalf("seed %s: the agent's logs: %v", s.Name, err)
		}
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("seed %s: the agent was refused by its seed: %s", s.Name, line)
			}
		}
	}

	local, other := l.Seed("local"), l.Seed("other")
	ns := &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{GenerateName: "probe-"}}
	created, err := local.Client.CoreV1().Namespaces().Create(ctx, ns, kmetav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := localnode.Probe(ctx, localnode.ProbeConfig{Client: local.Client, Kubeconfig: local.Kubeconfig,
		Namespace: created.Name, Testbin: testBinDir(t)})
	if err != nil {
		t.Fatalf("seed local: %v", err)
	}
	t.Logf("seed local: the probe's client reached its Service at attempt %d", res.ClientAttempts)
	busybox, err := localnode.ImageRef(testBinDir(t), "busybox")
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: kmetav1.ObjectMeta{Name: "dns"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "dns", Image: busybox, ImagePullPolicy: corev1.PullNever,
			Command: []string{"nslookup", "kubernetes.default.svc.cluster.local"},
		}}},
	}, kmetav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase, err := localnode.WaitPodDone(ctx, other.Client, "default", "dns"); err != nil || phase != corev1.PodSucceeded {
		t.Fatalf("seed other: pod dns %s %v", phase, err)
	}

	if err := l.Stop(); err != nil {
		t.Fatalf("stop landscape: %v", err)
	}
	for _, s := range slots {
		localnode.CheckFreed(t, "node "+s.Name(), s.Index)
	}
	if after, err := localnode.HostKubeChains(); err != nil || strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("host iptables KUBE-* chains before %v, after %v (%v)", before, after, err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeNames(nodes []corev1.Node) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}
