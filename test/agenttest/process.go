package agenttest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/crds"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// StartHubProcess builds trellis-hub into dir and runs it there (data dir dir/data) with a gRPC-only listener for
// agents and args, until the test ends; it returns the hub and its gRPC-only address. Tests that stop, kill or
// restart the hub, or measure it apart from the agents (its RSS), use it instead of StartHub.
func StartHubProcess(t testing.TB, dir string, args ...string) (*binproc.Hub, string) {
	t.Helper()
	ctx := context.Background()
	if err := binproc.Build(ctx, dir, "github.com/trellis-dev/trellis/cmd/trellis-hub"); err != nil {
		t.Fatal(err)
	}
	grpcAddr, err := binproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	h, err := binproc.StartHub(ctx, binproc.HubConfig{Bin: filepath.Join(dir, "trellis-hub"), DataDir: filepath.Join(dir, "data"),
		Args: append([]string{"--grpc-listen", grpcAddr}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log:\n%s", h.Tail(8<<10))
		}
		_ = h.Stop(10 * time.Second)
	})
	return h, grpcAddr
}

// StartAgentOn runs an agent for seed name (spec: its seedConfig spec) on cluster against the hub process h, whose
// gRPC-only listener is grpcAddr, until the test ends: it installs the extension CRDs in cluster, makes a bootstrap
// token through the hub's API and returns the agent and its configuration (StartAgent with it runs the agent again).
// mutate may adjust the configuration before the agent starts and its agent.Config.
func StartAgentOn(t testing.TB, h *binproc.Hub, grpcAddr, name, spec string, cluster *seedtest.Seed, configure func(*config.AgentConfiguration), mutate ...func(*agent.Config)) (*Agent, *config.AgentConfiguration) {
	t.Helper()
	ctx := context.Background()
	cs, err := apiextensionsclientset.NewForConfig(cluster.Config)
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
