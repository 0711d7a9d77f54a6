package agenttest

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

const (
	// WaitTimeout bounds every wait of the harness and of Eventually.
	WaitTimeout = 20 * time.Second
	// HubHeartbeat is the heartbeat interval of the hubs StartHub starts; agents are configured with 1 s and adopt
	// the hub's shorter one.
	HubHeartbeat = 500 * time.Millisecond
)

// SeedSpec is a seed's spec in an agent's seedConfig, indented for seedConfig.spec: provider and DNS of type
// "local", an nginx ingress, the networks of the local setup, no backups.
const SeedSpec = `    provider:
      type: local
      region: local
    ingress:
      domain: ingress.local.seed.example.com
      controller:
        kind: nginx
    dns:
      provider:
        type: local
        credentialsRef:
          apiVersion: v1
          kind: Secret
          name: internal-domain
          namespace: garden
    networks:
      nodes: 172.18.0.0/16
      pods: 10.1.0.0/16
      services: 10.2.0.0/16
`

// Main runs the tests of a controller package: controller-runtime's log is discarded (extension managers log
// through it), and the tests share one seed cluster (seedtest.Main, seedtest.StartShared). Call it from TestMain.
func Main(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	seedtest.Main(m)
}

// Eventually polls cond until it holds and fails the test after WaitTimeout; what names the condition in the failure.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timescale.Scale(WaitTimeout))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timescale.Scale(WaitTimeout), what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stderrLogs is the handler that copies logs to stderr: with -v and TRELLIS_TEST_LOGS set, else nil.
func stderrLogs() slog.Handler {
	if testing.Verbose() && os.Getenv("TRELLIS_TEST_LOGS") != "" {
		return slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return nil
}

// Logger is a log for a controller under test: discarded, or to stderr with -v and TRELLIS_TEST_LOGS set.
func Logger() *slog.Logger {
	if h := stderrLogs(); h != nil {
		return slog.New(h)
	}
	return slog.New(slog.DiscardHandler)
}

// Runner is what RunController runs: a controller's Run.
type Runner interface{ Run(context.Context) error }

// RunController runs the controller start returns until the test ends; the test fails when start fails, when Run
// returns an error, or when Run does not return within WaitTimeout of the end.
func RunController(t testing.TB, start func() (Runner, error)) {
	t.Helper()
	c, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(goRun(t, "the controller", c.Run))
}

// goRun calls run in a goroutine until the returned stop is called. stop, which may be called more than once, ends
// run's context and waits for it to return: the test fails when run returns an error or does not return within
// WaitTimeout. what names run in the failures.
func goRun(t testing.TB, what string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	return sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Run: %v", what, err)
			}
		case <-time.After(timescale.Scale(WaitTimeout)):
			t.Errorf("%s did not stop", what)
		}
	})
}

// Extension is an extension controller for StartExtensions: extsdk's controller for args.
func Extension[T extensionsv1alpha1.Object](args controller.AddArgs[T]) func(manager.Manager) error {
	return func(mgr manager.Manager) error { return controller.Add(mgr, args) }
}

// stub is the actuator of Stub.
type stub[T extensionsv1alpha1.Object] struct{ set func(T) }

func (s stub[T]) Reconcile(_ context.Context, _ logr.Logger, obj T, _ *extsdk.Cluster) error {
	if s.set != nil {
		s.set(obj)
	}
	return nil
}

func (stub[T]) Delete(context.Context, logr.Logger, T, *extsdk.Cluster) error { return nil }

// Stub is an extension for StartExtensions that reports every object of type "local" of the kind newObj makes
// ready at once, after set (if not nil) set its outputs, and deletes nothing: tests about the agent use it where
// the real provider-local does not matter.
func Stub[T extensionsv1alpha1.Object](newObj func() T, set func(T)) func(manager.Manager) error {
	return Extension(controller.AddArgs[T]{Actuator: stub[T]{set: set}, Type: "local", NewObject: newObj})
}

// StartExtensions runs extension controllers in the test's process until the test ends: a controller-runtime manager
// for the seed cluster cfg with the agent's scheme, to which each of adds adds its controllers. The manager serves no
// metrics or probes and skips the name validation of controllers, so that tests may start the same extension
// again.
func StartExtensions(t testing.TB, cfg *rest.Config, adds ...func(manager.Manager) error) {
	t.Helper()
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:     agent.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Logger:     logr.Discard(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, add := range adds {
		if err := add(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("extension manager: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}
