package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// hubPodNamespace and hubPodRelease are where TestHubChartOnNode installs the hub.
const (
	hubPodNamespace = "trellis-system"
	hubPodRelease   = "trellis-hub"
)

// TestHubChartOnNode installs deploy/charts/trellis-hub as an operator would, onto a seed with a real node (its
// embedded etcd on a PersistentVolumeClaim of the node's local-path StorageClass), from an image of the hub built
// here, with a serving certificate from a Secret (tls.existingSecret). kubectl reaches the hub's pod with the
// generated admin token and creates and lists a CloudProfile; after the pod is deleted, the StatefulSet's new pod
// serves the same data with the same token.
func TestHubChartOnNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a seed with a real node")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bins := binaries(t, "hub", "github.com/trellis-dev/trellis/cmd/trellis-hub")
	agentBins := binaries(t, "agent", "github.com/trellis-dev/trellis/cmd/trellis-agent")
	dir := t.TempDir()
	archive, repository, tag, err := landscape.BinaryImage(filepath.Join(bins, "trellis-hub"), dir)
	if err != nil {
		t.Fatal(err)
	}
	agentArchive, agentRepository, agentTag, err := landscape.BinaryImage(filepath.Join(agentBins, "trellis-agent"), dir)
	if err != nil {
		t.Fatal(err)
	}
	localnode.TakeTurn(t)
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's global logger
	seed := seedtest.Start(t, seedtest.WithNode(nil), seedtest.WithNodeImages(archive, agentArchive))
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(12*time.Minute))
	defer cancel()
	core := seed.Client.CoreV1()

	// The serving certificate, for the Service's name; the test dials the pod's IP with that name.
	serverName := hubPodRelease + "." + hubPodNamespace + ".svc"
	chain, key, err := certutil.GenerateSelfSignedCertKey(serverName, nil, []string{serverName})
	if err != nil {
		t.Fatal(err)
	}
	leaf, caPEM := pem.Decode(chain)
	if leaf == nil || len(caPEM) == 0 {
		t.Fatal("no CA in the generated chain")
	}
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: hubPodNamespace}},
		kmetav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets(hubPodNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: kmetav1.ObjectMeta{Name: "hub-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain, corev1.TLSPrivateKeyKey: key},
	}, kmetav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	archiveChart, err := charts.Archive(charts.TrellisHub)
	if err != nil {
		t.Fatal(err)
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: seed.Config, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"image":     map[string]any{"repository": repository, "tag": tag, "pullPolicy": "Never"},
		"tls":       map[string]any{"existingSecret": "hub-tls"},
		"etcd":      map[string]any{"embedded": map[string]any{"persistence": map[string]any{"size": "1Gi"}}},
		"logFormat": "text",
		// A machine shared with other tests: small requests.
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}},
	}
	begin := time.Now()
	if _, _, err := releases.Apply(ctx, archiveChart, hubPodRelease, hubPodNamespace, values); err != nil {
		t.Fatalf("install the hub's chart: %v", err)
	}
	pod := waitHubPod(ctx, t, seed, "")
	t.Logf("the hub's pod %s ready at %s %v after the install", pod.Name, pod.Status.PodIP, time.Since(begin).Round(100*time.Millisecond))

	// Its data is on a volume of the node's StorageClass.
	pvc, err := core.PersistentVolumeClaims(hubPodNamespace).Get(ctx, "data-"+pod.Name, kmetav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the hub's data volume: %v %v", pvc, err)
	}
	tokenSecret, err := core.Secrets(hubPodNamespace).Get(ctx, hubPodRelease+"-admin-token", kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenSecret.Data["token"]))

	// kubectl against the hub's pod with the admin token.
	kubectl := filepath.Join(testBinDir(t), "node", "kubectl")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(podIP string, args ...string) string {
		t.Helper()
		base := []string{"--server", "https://" + net.JoinHostPort(podIP, "8443"), "--certificate-authority", caFile,
			"--tls-server-name", serverName, "--token", token, "--kubeconfig", os.DevNull}
		cmd := exec.CommandContext(ctx, kubectl, append(base, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	profile := filepath.Join(dir, "cloudprofile.yaml")
	if err := os.WriteFile(profile, []byte(`apiVersion: core.gardener.cloud/v1beta1
kind: CloudProfile
metadata:
  name: hub-pod
spec:
  type: local
  kubernetes:
    versions:
    - version: 1.31.1
  machineImages:
  - name: local
    versions:
    - version: 1.0.0
  machineTypes:
  - name: local
    cpu: "1"
    gpu: "0"
    memory: 1Gi
  regions:
  - name: local
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(pod.Status.PodIP, "create", "-f", profile)
	if out := run(pod.Status.PodIP, "get", "cloudprofiles", "-o", "name"); !strings.Contains(out, "cloudprofile.core.gardener.cloud/hub-pod") {
		t.Fatalf("kubectl get cloudprofiles: %s", out)
	}

	// An agent pod on the same node connects to the hub's pod through its agent Service.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	agent := &hubPodAgent{t: t, ctx: ctx, seed: seed, http: hc, token: token, podIP: pod.Status.PodIP}
	begin = time.Now()
	agent.install(run, agentRepository, agentTag, serverName, string(caPEM))
	t.Logf("the agent's pod registered Seed %s (GardenletReady) %v after its install", hubPodSeed, time.Since(begin).Round(100*time.Millisecond))

	// A new pod of the StatefulSet serves the same data, with the same token.
	if err := core.Pods(hubPodNamespace).Delete(ctx, pod.Name, kmetav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	again := waitHubPod(ctx, t, seed, string(pod.UID))
	t.Logf("the hub's new pod ready at %s %v after the delete", again.Status.PodIP, time.Since(begin).Round(100*time.Millisecond))
	if out := run(again.Status.PodIP, "get", "cloudprofile", "hub-pod", "-o", "jsonpath={.spec.regions[0].name}"); out != "local" {
		t.Fatalf("the cloud profile after the restart: %q", out)
	}

	// The agent reconnects to the new pod, behind the same Service, and the hub's assignments reach it again.
	agent.podIP = again.Status.PodIP
	begin = time.Now()
	agent.reconnected(again.CreationTimestamp.Time)
	t.Logf("the agent reconnected to the new pod (a second session, Seed GardenletReady, a Seed change observed) %v after the pod was ready",
		time.Since(begin).Round(100*time.Millisecond))

	// The hub answers the health endpoints the probes use, over the certificate of the Secret.
	code, body, err := binproc.Do(ctx, hc, http.MethodGet, "https://"+net.JoinHostPort(again.Status.PodIP, "8443")+"/readyz", "", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/readyz: %d %v %s", code, err, body)
	}
}

// waitHubPod waits until the hub's StatefulSet has a Ready pod whose UID is not notUID and returns it.
func waitHubPod(ctx context.Context, t *testing.T, seed *seedtest.Seed, notUID string) *corev1.Pod {
	t.Helper()
	var last string
	for {
		pods, err := seed.Client.CoreV1().Pods(hubPodNamespace).List(ctx, kmetav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + hubPodRelease})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if string(p.UID) != notUID && p.DeletionTimestamp == nil && podIsReady(p) {
					return p
				}
				last = fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
		select {
		case <-ctx.Done():
			var logs string
			if pods != nil {
				for _, p := range pods.Items {
					b, _ := seed.Client.CoreV1().Pods(hubPodNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
					logs += fmt.Sprintf("== %s ==\n%s\n", p.Name, b)
				}
			}
			t.Fatalf("the hub's pod is not ready: last %s\n%s", last, logs)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hubPodSeed is the Seed that TestHubChartOnNode's agent registers.
const hubPodSeed = "hub-pod"

// hubPodAgent is the agent of TestHubChartOnNode: the trellis-agent chart's pod, on the node that runs the hub's pod,
// with the node's seed as its seed cluster.
type hubPodAgent struct {
	t     *testing.T
	ctx   context.Context
	seed  *seedtest.Seed
	http  *http.Client
	token string
	// podIP is the hub's current pod, which the test talks to (the agent uses the Service).
	podIP string
}

// do sends a request to the hub's pod with the admin token and fails unless it answers want.
func (a *hubPodAgent) do(method, path string, body []byte, want int) []byte {
	a.t.Helper()
	code, out, err := binproc.Do(a.ctx, a.http, method, "https://"+net.JoinHostPort(a.podIP, "8443")+path, a.token, body)
	if err != nil || code != want {
		a.t.Fatalf("%s %s: %d %v %s", method, path, code, err, out)
	}
	return out
}

// seedStatus reads the agent's Seed from the hub's pod: its generation, observedGeneration and GardenletReady.
func (a *hubPodAgent) seedStatus() (generation, observed int64, ready bool) {
	code, out, err := binproc.Do(a.ctx, a.http, http.MethodGet, "https://"+net.JoinHostPort(a.podIP, "8443")+
		"/apis/core.gardener.cloud/v1beta1/seeds/"+hubPodSeed, a.token, nil)
	var s struct {
		Metadata struct{ Generation int64 } `json:"metadata"`
		Status   struct {
			ObservedGeneration int64                           `json:"observedGeneration"`
			Conditions         []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(out, &s) != nil {
		return 0, 0, false
	}
	for _, c := range s.Status.Conditions {
		if c.Type == landscape.GardenletReady {
			ready = c.Status == "True"
		}
	}
	return s.Metadata.Generation, s.Status.ObservedGeneration, ready
}

// wait polls cond until it holds; when the test's context ends it logs the agent's pod and fails.
func (a *hubPodAgent) wait(what string, cond func() bool) {
	a.t.Helper()
	for !cond() {
		select {
		case <-a.ctx.Done():
			a.t.Logf("the agent's pod:\n%s", landscape.TailOf(a.logs(time.Time{}), 8000))
			a.t.Fatalf("%s: not before the test's deadline", what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logs are the logs of the agent's pods since a time (zero: all).
func (a *hubPodAgent) logs(since time.Time) string {
	pods, err := a.seed.Client.CoreV1().Pods(landscape.AgentNamespace).List(context.Background(), kmetav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + landscape.AgentRelease})
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	for _, p := range pods.Items {
		opts := &corev1.PodLogOptions{}
		if !since.IsZero() {
			opts.SinceTime = &kmetav1.Time{Time: since}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := a.seed.Client.CoreV1().Pods(landscape.AgentNamespace).GetLogs(p.Name, opts).DoRaw(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&out, "== pod %s: %v\n", p.Name, err)
			continue
		}
		fmt.Fprintf(&out, "== pod %s ==\n%s", p.Name, b)
	}
	return out.String()
}

// install registers the seed's provider type on the hub (a Seed's provider type must be registered, Gardener's
// ExtensionValidator), creates a bootstrap token for the seed through the hub pod's API, installs the agent's chart
// into the seed, as an operator would, with the hub's agent Service as its address (cluster DNS) and the CA of the
// hub's serving certificate, and waits until the agent's pod is ready and the hub reports the Seed GardenletReady.
func (a *hubPodAgent) install(kubectl func(podIP string, args ...string) string, repository, tag, serverName, caBundle string) {
	a.t.Helper()
	registration := filepath.Join(a.t.TempDir(), "controllerregistration.yaml")
	if err := os.WriteFile(registration, []byte(`apiVersion: core.gardener.cloud/v1beta1
kind: ControllerRegistration
metadata:
  name: provider-local
spec:
  resources:
  - kind: ControlPlane
    type: local
`), 0o600); err != nil {
		a.t.Fatal(err)
	}
	kubectl(a.podIP, "create", "-f", registration)
	tok, err := auth.NewSeedBootstrapToken(hubPodSeed, time.Now().Add(time.Hour))
	if err != nil {
		a.t.Fatal(err)
	}
	secret, err := kjson.Marshal(tok.SecretObject())
	if err != nil {
		a.t.Fatal(err)
	}
	a.do(http.MethodPost, "/api/v1/namespaces/"+auth.BootstrapTokenNamespace+"/secrets", secret, http.StatusCreated)

	archive, err := charts.Archive(charts.TrellisAgent)
	if err != nil {
		a.t.Fatal(err)
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: a.seed.Config, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		a.t.Fatal(err)
	}
	seedSpec := map[string]any{
		"provider": map[string]any{"type": "local", "region": "local"},
		"networks": map[string]any{"pods": "10.1.0.0/16", "services": "10.2.0.0/16"},
	}
	values := map[string]any{
		"image":     map[string]any{"repository": repository, "tag": tag, "pullPolicy": "Never"},
		"hub":       map[string]any{"address": net.JoinHostPort(serverName, "8444"), "caBundle": caBundle},
		"bootstrap": map[string]any{"token": tok.Token()},
		"config": map[string]any{
			"seedConfig":               map[string]any{"metadata": map[string]any{"name": hubPodSeed}, "spec": seedSpec},
			"heartbeatIntervalSeconds": 2,
			"logFormat":                "text",
		},
		// A machine shared with other tests: small requests.
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}},
	}
	if _, err := a.seed.Client.CoreV1().Namespaces().Create(a.ctx, &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: landscape.AgentNamespace}},
		kmetav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	if _, _, err := releases.Apply(a.ctx, archive, landscape.AgentRelease, landscape.AgentNamespace, values); err != nil {
		a.t.Fatalf("install the agent's chart: %v", err)
	}
	a.wait("the agent's pod ready and Seed "+hubPodSeed+" GardenletReady", func() bool {
		d, err := a.seed.Client.AppsV1().Deployments(landscape.AgentNamespace).Get(a.ctx, landscape.AgentRelease, kmetav1.GetOptions{})
		if err != nil || !localnode.DeploymentAvailable(d) {
			return false
		}
		_, _, ready := a.seedStatus()
		return ready
	})
}

// reconnected waits until the agent has established a session with the hub's new pod (its log since that pod's
// start), the hub reports the Seed GardenletReady, and a change of the Seed's spec made through the new pod reaches
// the agent: the agent's seed care writes the new generation as status.observedGeneration.
func (a *hubPodAgent) reconnected(since time.Time) {
	a.t.Helper()
	a.wait("a session of the agent with the hub's new pod, Seed "+hubPodSeed+" GardenletReady", func() bool {
		_, _, ready := a.seedStatus()
		return ready && strings.Contains(a.logs(since), "session established")
	})
	out := a.do(http.MethodPatch, "/apis/core.gardener.cloud/v1beta1/seeds/"+hubPodSeed,
		[]byte(`{"spec":{"taints":[{"key":"e2e.trellis.dev/hub-pod-restarted"}]}}`), http.StatusOK)
	var patched struct {
		Metadata struct{ Generation int64 } `json:"metadata"`
	}
	if err := json.Unmarshal(out, &patched); err != nil {
		a.t.Fatal(err)
	}
	a.wait(fmt.Sprintf("the agent observing generation %d of Seed %s", patched.Metadata.Generation, hubPodSeed), func() bool {
		_, observed, _ := a.seedStatus()
		return observed >= patched.Metadata.Generation
	})
}
