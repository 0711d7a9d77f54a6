package backupbucket_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts: a hub (hubtest), the shared seed kube-apiserver of the package
// (seedtest) with the extension CRDs, a real agent (controllers off) that gives the controller its mTLS connection
// and its synced cache, and an extension built with extsdk/controller for type "test".
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	seedtest.Main(m)
}

const (
	seedName = "local"
	// waitTimeout bounds every wait for a condition.
	waitTimeout = 20 * time.Second
)

// env is one test's hub, agent and seed.
type env struct {
	hub   *hubtest.Hub
	admin *grpc.ClientConn // the hub with the admin token, for setup and assertions
	seed  *seedtest.Seed
	// seedClient reads and writes the seed directly.
	seedClient client.Client
	agent      *agent.Agent
	// conn is the agent's mTLS connection: what the controller gets.
	conn  grpc.ClientConnInterface
	cache *cache.Cache
	log   *slog.Logger
}

// newEnv starts a hub, creates objs on it, starts an agent for seed "local" whose seedConfig spec is seedSpec (YAML,
// indented for seedConfig.spec) and waits until the agent's cache holds the registered Seed.
func newEnv(t *testing.T, seedSpec string, objs ...any) *env {
	t.Helper()
	e := &env{hub: hubtest.Start(t, func(c *hub.Config) { c.HeartbeatInterval = 500 * time.Millisecond }), seed: seedtest.StartShared(t)}
	e.admin = e.hub.GRPC(t)
	e.log = slog.New(slog.DiscardHandler)
	if testing.Verbose() && os.Getenv("TRELLIS_TEST_LOGS") != "" {
		e.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx := context.Background()
	cs, err := apiextensionsclientset.NewForConfig(e.seed.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if e.seedClient, err = client.New(e.seed.Config, client.Options{Scheme: agent.Scheme()}); err != nil {
		t.Fatal(err)
	}
	tok, err := auth.NewSeedBootstrapToken(seedName, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, tok.SecretObject())
	for _, o := range objs {
		e.create(t, o)
	}

	cfg, err := config.Decode([]byte(fmt.Sprintf(`
apiVersion: agent.trellis.dev/v1alpha1
kind: AgentConfiguration
seedConfig:
  metadata:
    name: %s
  spec:
%s`, seedName, seedSpec)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HubClientConnection = config.HubClientConnection{
		Address: e.hub.GRPCAddr(), CABundle: string(e.hub.CA), BootstrapToken: tok.Token(),
		KubeconfigSecret: config.SecretReference{Namespace: e.seed.Namespace(t), Name: "gardenlet-kubeconfig"},
	}
	cfg.SeedClientConnection.Kubeconfig = e.seed.KubeconfigPath
	cfg.HeartbeatIntervalSeconds = 1
	cfg.Controllers.Disabled = true
	a, err := agent.New(agent.Config{Configuration: cfg, Logger: e.log.With("component", "agent"), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.agent = a
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Error("the agent did not stop")
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, waitTimeout)
	defer wcancel()
	if e.conn, err = a.HubConn(wctx); err != nil {
		t.Fatalf("no hub connection: %v", err)
	}
	e.cache = a.Cache()
	if err := e.cache.WaitForSync(wctx); err != nil {
		t.Fatalf("no cache sync: %v", err)
	}
	eventually(t, "the Seed in the agent's cache", func() bool {
		_, ok := cache.Get[*corev1beta1.Seed](e.cache, cache.Seeds, "", seedName)
		return ok
	})
	return e
}

// create stores obj on the hub with the admin's rights.
func (e *env) create(t *testing.T, obj any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *kcorev1.Secret:
		_, err = kcorev1.NewSecretServiceClient(e.admin).Create(ctx, o)
	case *corev1beta1.BackupBucket:
		_, err = corev1beta1.NewBackupBucketServiceClient(e.admin).Create(ctx, o)
	default:
		t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
}

// run runs the controller built by start until the test ends.
func run(t *testing.T, start func() (interface{ Run(context.Context) error }, error)) {
	t.Helper()
	c, err := start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Error("the controller did not stop")
		}
	})
}

// startExtension runs an extension controller (extsdk) for args in the seed until the test ends.
func startExtension[T extensionsv1alpha1.Object](t *testing.T, e *env, args controller.AddArgs[T]) {
	t.Helper()
	mgr, err := manager.New(e.seed.Config, manager.Options{
		Scheme:     agent.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Logger:     logr.Discard(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Add(mgr, args); err != nil {
		t.Fatal(err)
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

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notFound reports whether err is the hub's NotFound.
func notFound(err error) bool { return status.Code(err) == codes.NotFound }
