package landscape

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"

	"github.com/trellis-dev/trellis/test/binproc"
)

// envBinDir names a directory with prebuilt binaries for TestLandscape; without it the test builds them.
const envBinDir = "TRELLIS_LANDSCAPE_BIN_DIR"

// alive reports whether process pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// buildBinaries builds the landscape's binaries from this checkout into a temporary directory, so that the test runs
// the code under test, not whatever bin/ holds. provider-local is built when cmd/provider-local exists.

func buildBinaries(t *testing.T, root string) (dir string, providerLocal bool) {
	t.Helper()
	if dir := os.Getenv(envBinDir); dir != "" {
		_, err := os.Stat(filepath.Join(dir, "provider-local"))
		return dir, err == nil
	}
	// The same packages, in the same order, as test/e2e's landscapes: binproc links them once for both.
	pkgs := []string{"github.com/trellis-dev/trellis/cmd/trellis-hub", "github.com/trellis-dev/trellis/cmd/trellis-agent"}
	if m, _ := filepath.Glob(filepath.Join(root, "cmd", "provider-local", "*.go")); len(m) > 0 {
		pkgs = append(pkgs, "github.com/trellis-dev/trellis/cmd/provider-local")
		providerLocal = true
	}
	pkgs = append(pkgs, "github.com/trellis-dev/trellis/test/localseed")
	dir = t.TempDir()
	begin := time.Now()
	if err := binproc.Build(t.Context(), dir, pkgs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %v in %s", pkgs, time.Since(begin).Round(time.Millisecond))
	return dir, providerLocal
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestLandscape starts a landscape with one seed, checks that everything is ready, kills and restarts the agent,
// stops everything, and starts again on the same directory: the hub keeps its data and the agent its credentials
// (no new CSR, no bootstrap).
func TestLandscape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	root, err := binproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, hasProviderLocal := buildBinaries(t, root)
	if !hasProviderLocal {
		t.Log("provider-local is not built yet (no cmd/provider-local): the landscape runs without it; its checks are skipped")
	}
	cfg := Config{
		Dir:                  t.TempDir(),
		BinDir:               bin,
		TestBinDir:           filepath.Join(root, "bin", "testbin"),
		Seeds:                []SeedConfig{{Name: "local"}},
		Log:                  testWriter{t},
		RequireProviderLocal: hasProviderLocal,
		StopTimeout:          20 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The hub's first free port is taken before the hub binds it, as by a test running beside this one: Start
	// tries other ports.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, heldPort, _ := net.SplitHostPort(held.Addr().String())
	pick, taken := pickFreePort, false
	pickFreePort = func(host string) (string, error) {
		if !taken {
			taken = true
			return heldPort, nil
		}
		return pick(host)
	}
	t.Cleanup(func() { pickFreePort = pick })

	l, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, port, _ := net.SplitHostPort(l.HubAddr); port == heldPort {
		t.Errorf("the hub's address %s is the taken port", l.HubAddr)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = l.Stop()
		}
	})
	if l.ProviderLocal != hasProviderLocal {
		t.Errorf("ProviderLocal = %v, want %v", l.ProviderLocal, hasProviderLocal)
	}
	s := l.Seed("local")
	if ready, err := l.SeedReady(ctx, "local"); err != nil || !ready {
		t.Fatalf("seed ready: %v %v", ready, err)
	}
	// The agent bootstrapped and stored its credentials in the seed.
	if out, _ := s.agent.LogSinceStart(); !strings.Contains(out, "bootstrapped") {
		t.Errorf("the agent's first start did not bootstrap:\n%s", out)
	}
	if _, err := s.Client.CoreV1().Secrets("garden").Get(ctx, "gardenlet-kubeconfig", kmetav1.GetOptions{}); err != nil {
		t.Errorf("the agent's credentials in the seed: %v", err)
	}
	const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	csrs, err := l.hubc.listLen(ctx, csrPath)
	if err != nil || csrs == 0 {
		t.Fatalf("CSRs after the first start: %d %v", csrs, err)
	}

	t.Run("provider-local", func(t *testing.T) {
		if !hasProviderLocal {
			t.Skip("provider-local is not built yet (no cmd/provider-local)")
		}
		// It runs for the hub's ControllerInstallation of provider-local, in its namespace, where the agent installed
		// the chart.
		ci, err := l.ProviderLocalInstallation(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		ns := "extension-" + ci
		if s.ProviderLocalNamespace != ns {
			t.Errorf("provider-local runs in %q, want the installation's namespace %s", s.ProviderLocalNamespace, ns)
		}
		if secrets, err := s.Client.CoreV1().Secrets(ns).List(ctx, kmetav1.ListOptions{LabelSelector: "owner=helm,name=" + ProviderLocalRegistration}); err != nil || len(secrets.Items) == 0 {
			t.Errorf("no Helm release %s in %s: %v", ProviderLocalRegistration, ns, err)
		}
		lease, err := s.Client.CoordinationV1().Leases(ns).Get(ctx, extensionsv1alpha1.HeartbeatLeaseName, kmetav1.GetOptions{})
		if err != nil {
			t.Fatalf("heartbeat lease: %v", err)
		}
		t.Logf("provider-local heartbeat: renewed %s", lease.Spec.RenewTime)
		// Killed, it comes back and renews its heartbeat again.
		if err := l.KillProviderLocal("local"); err != nil {
			t.Fatal(err)
		}
		if l.Pids()["provider-local-local"] != 0 {
			t.Fatal("provider-local runs after KillProviderLocal")
		}
		if err := l.StartProviderLocal(ctx, "local"); err != nil {
			t.Fatal(err)
		}
		again, err := s.Client.CoordinationV1().Leases(ns).Get(ctx, extensionsv1alpha1.HeartbeatLeaseName, kmetav1.GetOptions{})
		if err != nil || !again.Spec.RenewTime.After(lease.Spec.RenewTime.Time) {
			t.Errorf("heartbeat after the restart: %v (before %s)", err, lease.Spec.RenewTime)
		}
	})

	// A killed agent comes back with its stored credentials.
	agentPid := l.Pids()["agent-local"]
	if err := l.KillAgent("local"); err != nil {
		t.Fatal(err)
	}
	if alive(agentPid) || l.Pids()["agent-local"] != 0 {
		t.Fatal("the agent runs after KillAgent")
	}
	if err := l.StartAgent(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.agent.LogSinceStart(); !strings.Contains(out, "using stored credentials") {
		t.Errorf("the restarted agent did not use its stored credentials:\n%s", out)
	}

	pids := l.Pids()
	if len(pids) != 3+boolInt(hasProviderLocal) {
		t.Errorf("running: %v", pids)
	}
	seedServer := s.Config.Host
	if err := l.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) runs after Stop", name, pid)
		}
	}
	// Nothing answers any more, the seed's kube-apiserver (a grandchild) included.
	for _, addr := range []string{l.HubAddr, l.GRPCAddr, strings.TrimPrefix(seedServer, "https://")} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}
	select {
	case err := <-l.Failures():
		t.Errorf("a stop or kill on purpose was reported as a failure: %v", err)
	default:
	}

	// The second start reuses the hub's data and the agent's credentials.
	l2, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l2.Stop(); err != nil {
			t.Errorf("second stop: %v", err)
		}
	}()
	if l2.Token != l.Token {
		t.Error("the admin token changed: the hub did not reuse its data")
	}
	s2 := l2.Seed("local")
	out, _ := s2.agent.LogSinceStart()
	if !strings.Contains(out, "using stored credentials") || strings.Contains(out, "bootstrapping") {
		t.Errorf("the agent bootstrapped again after a restart:\n%s", out)
	}
	if n, err := l2.hubc.listLen(ctx, csrPath); err != nil || n != csrs {
		t.Errorf("CSRs after the second start: %d (before %d) %v", n, csrs, err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
