package seedcare_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/crds"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts: a hub (hubtest), the package's shared seed kube-apiserver
// (seedtest) with the extension CRDs, a real agent (controllers off) that gives the controller its mTLS connection
// and its synced cache, and extension heartbeats written with extsdk/heartbeat.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	seedtest.Main(m)
}

// waitTimeout bounds every wait for a condition.
const waitTimeout = 20 * time.Second

// seedSpec is a seed's spec in an agent's seedConfig (indented for seedConfig.spec).
const seedSpec = `    provider:
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

// env is one test's hub.
type env struct {
	hub   *hubtest.Hub
	admin *grpc.ClientConn // the hub with the admin token, for setup and assertions
	log   *slog.Logger
}

// seedEnv is a seed cluster and the agent of a seed on it.
type seedEnv struct {
	name    string
	cluster *seedtest.Seed
	// client reads and writes the seed cluster directly.
	client client.Client
	// conn is the agent's mTLS connection: what the controller gets.
	conn  grpc.ClientConnInterface
	cache *cache.Cache
}

// newEnv starts a hub.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{hub: hubtest.Start(t, func(c *hub.Config) { c.HeartbeatInterval = 500 * time.Millisecond })}
	e.admin = e.hub.GRPC(t)
	e.log = slog.New(slog.DiscardHandler)
	if testing.Verbose() && os.Getenv("TRELLIS_TEST_LOGS") != "" {
		e.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return e
}

// startSeed installs the extension CRDs in cluster, starts an agent for seed name (spec: seedConfig.spec) on it and
// waits until the agent's cache holds the registered Seed.
func (e *env) startSeed(t *testing.T, name, spec string, cluster *seedtest.Seed) *seedEnv {
	t.Helper()
	ctx := context.Background()
	s := &seedEnv{name: name, cluster: cluster}
	cs, err := apiextensionsclientset.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if s.client, err = client.New(cluster.Config, client.Options{Scheme: agent.Scheme()}); err != nil {
		t.Fatal(err)
	}
	tok, err := auth.NewSeedBootstrapToken(name, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.store(t, tok.SecretObject())
	cfg, err := config.Decode([]byte(fmt.Sprintf("apiVersion: agent.trellis.dev/v1alpha1\nkind: AgentConfiguration\nseedConfig:\n  metadata:\n    name: %s\n  spec:\n%s", name, spec)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HubClientConnection = config.HubClientConnection{
		Address: e.hub.GRPCAddr(), CABundle: string(e.hub.CA), BootstrapToken: tok.Token(),
		KubeconfigSecret: config.SecretReference{Namespace: cluster.Namespace(t), Name: "gardenlet-kubeconfig"},
	}
	cfg.SeedClientConnection.Kubeconfig = cluster.KubeconfigPath
	cfg.HeartbeatIntervalSeconds = 1
	cfg.Controllers.Disabled = true
	a, err := agent.New(agent.Config{Configuration: cfg, Logger: e.log.With("component", "agent", "agent", name), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
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
	if s.conn, err = a.HubConn(wctx); err != nil {
		t.Fatalf("no hub connection: %v", err)
	}
	s.cache = a.Cache()
	if err := s.cache.WaitForSync(wctx); err != nil {
		t.Fatalf("no cache sync: %v", err)
	}
	eventually(t, "the Seed in the agent's cache", func() bool {
		_, ok := cache.Get[*corev1beta1.Seed](s.cache, cache.Seeds, "", name)
		return ok
	})
	return s
}

// store writes objects into the hub's store directly (no admission), as the hub's own controllers do.
func (e *env) store(t *testing.T, objs ...store.Object) []store.Object {
	t.Helper()
	var out []store.Object
	for _, o := range objs {
		gv := o.(interface{ GetApiVersion() string }).GetApiVersion()
		group, _, _ := strings.Cut(gv, "/")
		if !strings.Contains(gv, "/") {
			group = ""
		}
		kind := o.(interface{ GetKind() string }).GetKind()
		resource := strings.ToLower(kind) + "s"
		if strings.HasSuffix(kind, "y") {
			resource = strings.ToLower(strings.TrimSuffix(kind, "y")) + "ies"
		}
		c, ok := e.hub.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
		if !ok {
			t.Fatalf("the hub serves no %s.%s", resource, group)
		}
		stored, err := c.Create(context.Background(), o)
		if err != nil {
			t.Fatalf("store %s %s: %v", kind, o.GetMetadata().GetName(), err)
		}
		out = append(out, stored)
	}
	return out
}

// update changes an object in the hub's store directly: its status when status is set, else the rest.
func (e *env) update(t *testing.T, group, resource, namespace, name string, status bool, mutate func(store.Object)) {
	t.Helper()
	c, ok := e.hub.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		t.Fatalf("the hub serves no %s.%s", resource, group)
	}
	if _, err := c.GuaranteedUpdate(context.Background(), namespace, name, status, func(cur store.Object) (store.Object, error) {
		mutate(cur)
		return cur, nil
	}); err != nil {
		t.Fatalf("update %s %s/%s: %v", resource, namespace, name, err)
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
