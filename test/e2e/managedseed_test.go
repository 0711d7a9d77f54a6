package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		code, out, err := l.Do(ctx, method, path, []byte(body))
		if err != nil || code != want {
			t.Fatalf("%s %s: %d %v %s", method, path, code, err, out)
		}
		return out
	}
	get := func(path string, v any) bool {
		code, out, err := l.Do(ctx, http.MethodGet, path, nil)
		return err == nil && code == http.StatusOK && json.Unmarshal(out, v) == nil
	}
	wait := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				if logs, err := l.Seed("local").AgentPodLogs(ctx); err == nil {
					t.Logf("the agent's pod:\n%s", tailOf(logs, 8000))
				}
				t.Fatalf("%s: not after %v", what, timeout)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// A workerless shoot in the garden project, on seed local.
	do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"garden"},"spec":{"namespace":"garden"}}`, http.StatusCreated)
	var example struct {
		Spec struct {
			Kubernetes struct{ Version string } `json:"kubernetes"`
		} `json:"spec"`
	}
	if !get("/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local", &example) {
		t.Fatal("the example shoot")
	}
	do(http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots", fmt.Sprintf(`{"metadata":{"name":"soil"},"spec":{`+
		`"cloudProfileName":"local","region":"local","provider":{"type":"local"},"kubernetes":{"version":%q},"seedName":"local"}}`,
		example.Spec.Kubernetes.Version), http.StatusCreated)
	begin = time.Now()
	wait("shoot soil Succeeded", 5*time.Minute, func() bool {
		var s struct {
			Status struct {
				LastOperation struct{ State string } `json:"lastOperation"`
			} `json:"status"`
		}
		return get("/apis/core.gardener.cloud/v1beta1/namespaces/garden/shoots/soil", &s) && s.Status.LastOperation.State == "Succeeded"
	})
	t.Logf("workerless shoot Succeeded in %v", time.Since(begin).Round(100*time.Millisecond))

	const seedSpec = `{"provider":{"type":"local","region":"local"},"ingress":{"domain":"ingress.soil.seed.example.com","controller":{"kind":"nginx"}},` +
		`"dns":{"provider":{"type":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","namespace":"garden","name":"` + landscape.DNSSecretName + `"}}},` +
		`"networks":{"nodes":"172.18.0.0/16","pods":"10.1.0.0/16","services":"10.2.0.0/16"}}`
	begin = time.Now()
	do(http.MethodPost, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds", `{"metadata":{"name":"soil"},"spec":{"shoot":{"name":"soil"},`+
		`"gardenlet":{"config":{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration","seedConfig":{"spec":`+seedSpec+`}}}}}`,
		http.StatusCreated)

	// The stand-in machine of the shoot, through the hub's tunnel.
	dir := t.TempDir()
	kc := filepath.Join(dir, "soil.kubeconfig")
	wait("an admin kubeconfig of shoot soil", 2*time.Minute, func() bool {
		cmd := exec.CommandContext(ctx, ctl, "shoot", "kubeconfig", "soil", "-p", "garden", "--file", kc)
		cmd.Env = []string{"TRELLIS_HUB=" + l.HubURL, "TRELLIS_CA=" + l.CAFile, "TRELLIS_TOKEN=" + l.Token, "HOME=" + dir,
			"TRELLISCONFIG=" + filepath.Join(dir, "trellisconfig")}
		return cmd.Run() == nil
	})
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

	type cond struct{ Type, Status string }
	registered := func() bool {
		var ms struct {
			Status struct{ Conditions []cond } `json:"status"`
		}
		var seed struct {
			Status struct{ Conditions []cond } `json:"status"`
		}
		if !get("/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", &ms) ||
			!get("/apis/core.gardener.cloud/v1beta1/seeds/soil", &seed) {
			return false
		}
		has := func(cs []cond, typ string) bool {
			for _, c := range cs {
				if c.Type == typ && c.Status == "True" {
					return true
				}
			}
			return false
		}
		return has(ms.Status.Conditions, "SeedRegistered") && has(ms.Status.Conditions, "ShootReconciled") && has(seed.Status.Conditions, "GardenletReady")
	}
	wait("ManagedSeed soil registered with its Seed GardenletReady", 4*time.Minute, registered)
	t.Logf("ManagedSeed create → Seed GardenletReady, SeedRegistered: %v", time.Since(begin).Round(100*time.Millisecond))

	begin = time.Now()
	do(http.MethodDelete, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", "", http.StatusOK)
	wait("ManagedSeed soil gone", 3*time.Minute, func() bool {
		code, _, err := l.Do(ctx, http.MethodGet, "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/managedseeds/soil", nil)
		return err == nil && code == http.StatusNotFound
	})
	t.Logf("ManagedSeed delete → gone: %v", time.Since(begin).Round(100*time.Millisecond))
	if code, _, err := l.Do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/soil", nil); err != nil || code != http.StatusNotFound {
		t.Fatalf("the Seed: %d %v, want 404", code, err)
	}
	wait("the stand-in agent stopped", 30*time.Second, func() bool { return !r.Running() })
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
