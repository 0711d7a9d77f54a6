package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/machinestandin"
)

// TestManagedSeedOnLocalNode: in `make up`'s landscape with a node, where the seed's agent and provider-local run as
// their charts' pods, a ManagedSeed for a workerless shoot on that seed becomes a Seed with GardenletReady=True. The
// agent's pod installs the agent chart into the shoot; the stand-in machine runner (test/machinestandin: the shoot
// has no machines) runs the agent that the chart describes as a host process, with the shoot as its seed cluster
// through the hub's tunnel, and the hub as the chart's configuration gives it (the address the agent pod uses).
// Deleting the ManagedSeed removes the Seed and the agent's release.
func TestManagedSeedOnLocalNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	landscapeBinaries(t)
	agentDir := binaries(t, "agent", "github.com/trellis-dev/trellis/cmd/trellis-agent")
	ctl := trellisctlBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	begin := time.Now()
	l := startLandscape(ctx, t, landscape.Config{Seeds: []landscape.SeedConfig{{Name: "local"}}, Node: true, Examples: true,
		RequireProviderLocal: true, TunnelListen: "127.0.0.1:0"})
	t.Logf("landscape with a node ready in %v", time.Since(begin).Round(100*time.Millisecond))
	m := &msLandscape{ctx: ctx, t: t, l: l}

	// A workerless shoot in the garden project, on seed local.
	m.do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"garden"},"spec":{"namespace":"garden"}}`, http.StatusCreated)
	var example struct {
		Spec struct {
			Kubernetes struct{ Version string } `json:"kubernetes"`
		} `json:"spec"`
	}
	if !m.get("/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local", &example) {
		t.Fatal("the example shoot")
	}
	m.do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", fmt.Sprintf(`{"metadata":{"name":"soil"},"spec":{`+
		`"cloudProfileName":"local","region":"local","provider":{"type":"local"},"kubernetes":{"version":%q},"seedName":"local"}}`,
		example.Spec.Kubernetes.Version), http.StatusCreated)
	begin = time.Now()
	m.shootSucceeded("soil", 5*time.Minute)
	t.Logf("workerless shoot Succeeded in %v", time.Since(begin).Round(100*time.Millisecond))

	begin = time.Now()
	m.createManagedSeed("soil", `{"nodes":"172.18.0.0/16","pods":"10.1.0.0/16","services":"10.2.0.0/16"}`, "")

	// The stand-in machine of the shoot, through the hub's tunnel.
	dir := t.TempDir()
	kc := m.shootKubeconfig(ctl, dir, "soil")
	r, err := machinestandin.New(machinestandin.Config{Name: "agent-of-soil", Binary: filepath.Join(agentDir, "trellis-agent"), Kubeconfig: kc, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	defer func() { stop(); wg.Wait() }()
	defer func() {
		if t.Failed() {
			if b, err := os.ReadFile(r.LogPath()); err == nil {
				t.Logf("the stand-in agent:\n%s", tailOf(string(b), 6000))
			}
		}
	}()

	m.wait("ManagedSeed soil registered with its Seed GardenletReady", 4*time.Minute, func() bool { return m.registered("soil") })
	t.Logf("ManagedSeed create → Seed GardenletReady, SeedRegistered: %v", time.Since(begin).Round(100*time.Millisecond))

	m.deleteManagedSeed("soil")
	m.wait("the stand-in agent stopped", 30*time.Second, func() bool { return !r.Running() })
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
