package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// TestRunFailsWhenAControllerCannotBeBuilt: an agent whose seed REST configuration cannot make a client (its CA is
// not PEM) does not start half-way: Run returns the seed client's error at once, before connecting to the hub.
func TestRunFailsWhenAControllerCannotBeBuilt(t *testing.T) {
	e := openEnv(t)
	cfg := e.config(t)
	cfg.Controllers.Disabled = false
	bad := rest.CopyConfig(e.seed.Config)
	bad.CAFile, bad.CAData = "", []byte("not a certificate")
	logs := agenttest.NewLogSink()
	a, err := agent.New(agent.Config{Configuration: cfg, Logger: slog.New(logs), SeedClient: e.seed.Client, SeedRESTConfig: bad})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), agenttest.WaitTimeout)
	defer cancel()
	err = a.Run(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want the seed client's error at once", err, ctx.Err())
	}
	if !strings.Contains(err.Error(), "seed-side controllers") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Run = %q, want it to name the seed-side controllers and the CA", err)
	}
	if s := a.Status(); s.Sessions != 0 || s.CRDsInstalled {
		t.Errorf("status after the failed start: %+v, want no session and no CRDs installed", s)
	}
	if err := a.Run(ctx); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("second Run = %v, want the Run-twice error", err)
	}
}

// TestStopLeavesNoGoroutines: an agent with its controllers running stops without leaving a goroutine behind. The hub
// runs in the test process, and it (like client-go's transport cache) starts goroutines of its own the first time an
// agent comes (the leader's loops, per-seed watches), so a first agent runs and stops before the goroutines are
// counted; then a second agent of the same seed (with the stored credentials) runs its controllers and stops, and
// every goroutine that was not there before it must have ended.
func TestStopLeavesNoGoroutines(t *testing.T) {
	e := newEnv(t)
	cfg := e.shootConfig(t)
	run := func() {
		ta := agenttest.StartAgent(t, cfg)
		agenttest.Eventually(t, "the agent's controllers run", func() bool { s := ta.Status(); return s.ControllersRunning && s.Connected })
		ta.Stop()
	}
	run()
	settle()
	before := goleak.IgnoreCurrent()
	run()
	var err error
	for deadline := time.Now().Add(agenttest.WaitTimeout); ; time.Sleep(100 * time.Millisecond) {
		if err = goleak.Find(before); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("goroutines left after the agent stopped:\n%v", err)
	}
}

// settle waits until the number of goroutines has not moved for a second (at most WaitTimeout).
func settle() {
	last, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(agenttest.WaitTimeout); time.Now().Before(deadline) && time.Since(since) < time.Second; {
		time.Sleep(50 * time.Millisecond)
		if n := runtime.NumGoroutine(); n != last {
			last, since = n, time.Now()
		}
	}
}
