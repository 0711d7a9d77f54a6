package agenttest

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/crds"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// StartHubProcess builds trellis-hub into dir and runs it there (data dir dir/data) with a gRPC-only listener for
// agents and args, until the test ends; it returns the hub and its gRPC-only address. Tests that stop, kill or
// restart the hub, or measure it apart from the agents (its RSS), use it instead of StartHub.
func StartHubProcess(t testing.TB, dir string, args ...string) (*binproc.Hub, string) {
	t.Helper()
	h := StartHubProcessListening(t, dir, []string{"--grpc-listen"}, args...)
	return h, h.Listen["--grpc-listen"]
}

// StartHubProcessListening is StartHubProcess with the listener flags that the hub is given free addresses for
// (binproc.HubConfig.PickListen; the hub's Listen has them), chosen again when another process took one before the
// hub bound it.
func StartHubProcessListening(t testing.TB, dir string, listen []string, args ...string) *binproc.Hub {
	t.Helper()
	ctx := context.Background()
	if err := binproc.Build(ctx, dir, "github.com/trellis-dev/trellis/cmd/trellis-hub"); err != nil {
		t.Fatal(err)
	}
	h, err := binproc.StartHub(ctx, binproc.HubConfig{Bin: filepath.Join(dir, "trellis-hub"), DataDir: filepath.Join(dir, "data"),
		Args: args, PickListen: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log:\n%s", h.Tail(8<<10))
		}
		_ = h.Stop(10 * time.Second)
	})
	// The agents' Seeds (SeedSpec) and the examples' shoots use provider-local's types, which the hub admits once
	// registered (as StartHub does).
	reg := []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ControllerRegistration","metadata":{"name":"` + ProviderLocalRegistration + `"},"spec":{"resources":[` +
		strings.Join(func() []string {
			var out []string
			for _, r := range hubtest.LocalExtensions() {
				kind, typ, _ := strings.Cut(r, "/")
				out = append(out, `{"kind":"`+kind+`","type":"`+typ+`"}`)
			}
			return out
		}(), ",") + `]}}`)
	if code, out, err := h.Do(ctx, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/controllerregistrations", reg); err != nil || code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("register provider-local: %d %s %v", code, out, err)
	}
	return h
}

// StartAgentOn runs an agent for seed name (spec: its seedConfig spec) on cluster against the hub process h, whose
// gRPC-only listener is grpcAddr, until the test ends: it installs the extension CRDs in cluster, makes a bootstrap
// token through the hub's API and returns the agent and its configuration (StartAgent with it runs the agent again).
// mutate may adjust the configuration before the agent starts and its agent.Config.
func StartAgentOn(t testing.TB, h *binproc.Hub, grpcAddr, name, spec string, cluster *seedtest.Seed, configure func(*config.AgentConfiguration), mutate ...func(*agent.Config)) (*Agent, *config.AgentConfiguration) {
	t.Helper()
	ctx := context.Background()
	cs, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, cs); err != nil {
		t.Fatal(err)
	}
	tok, err := auth.NewSeedBootstrapToken(name, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	body, err := kjson.Marshal(tok.SecretObject())
	if err != nil {
		t.Fatal(err)
	}
	if code, out, err := h.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+auth.BootstrapTokenNamespace+"/secrets", body); err != nil || code != http.StatusCreated {
		t.Fatalf("bootstrap token: %d %v %s", code, err, out)
	}
	ca, err := os.ReadFile(h.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(t, name, spec, cluster)
	cfg.HubClientConnection = config.HubClientConnection{Address: grpcAddr, CABundle: string(ca), BootstrapToken: tok.Token(),
		KubeconfigSecret: config.SecretReference{Namespace: cluster.Namespace(t), Name: "gardenlet-kubeconfig"}}
	if configure != nil {
		configure(cfg)
	}
	return StartAgent(t, cfg, mutate...), cfg
}

// ShootOn creates the landscape's example resources (test/landscape) on the hub process h, the example shoot placed
// on seed, and in cluster the shoot's namespace and its Service kube-apiserver (port 443), as a shoot control plane
// would have them. It returns the shoot's project and name, and the Service's cluster IP and port (which the
// agent's DialService must route to a stand-in).
func ShootOn(t testing.TB, h *binproc.Hub, cluster *seedtest.Seed, seed string) (project, shoot, serviceAddr string) {
	t.Helper()
	ctx := context.Background()
	exs, err := landscape.Examples()
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exs {
		body := ex.JSON
		if ex.Kind.Resource == "shoots" {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			m["spec"].(map[string]any)["seedName"] = seed
			body, _ = json.Marshal(m)
			project, shoot = strings.TrimPrefix(ex.Namespace, "garden-"), ex.Name
		}
		// The shoot waits for the agent to register its seed.
		Eventually(t, "example "+ex.File+" created", func() bool {
			code, _, err := h.Do(ctx, http.MethodPost, ex.Path(), body)
			return err == nil && (code == http.StatusCreated || code == http.StatusConflict)
		})
	}
	ns := tunnel.ShootNamespace(project, shoot)
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &kcorev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cluster.Client.CoreV1().Services(ns).Create(ctx, &kcorev1.Service{ObjectMeta: metav1.ObjectMeta{Name: agent.ShootAPIServerService},
		Spec: kcorev1.ServiceSpec{Ports: []kcorev1.ServicePort{{Name: "kube-apiserver", Port: 443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return project, shoot, net.JoinHostPort(svc.Spec.ClusterIP, "443")
}
