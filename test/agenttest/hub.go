package agenttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/deploy/crds"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// Hub is a running hub with a connection for the test's own setup and assertions.
type Hub struct {
	*hubtest.Hub
	// Admin is a gRPC connection to the hub with the admin token.
	Admin *grpc.ClientConn
}

// ProviderLocalRegistration is the ControllerRegistration StartHub creates: provider-local's kinds, type local, without
// a deployment.
const ProviderLocalRegistration = "provider-local"

// StartHub runs a hub until the test ends, with heartbeat interval HubHeartbeat and provider-local's types registered
// (ProviderLocalRegistration); mutate may change its configuration further.
func StartHub(t testing.TB, mutate ...func(*hub.Config)) *Hub {
	t.Helper()
	h := hubtest.Start(t, append([]func(*hub.Config){func(c *hub.Config) { c.HeartbeatInterval = HubHeartbeat }}, mutate...)...)
	// The agents register Seeds of SeedSpec (provider and DNS type local), which the hub admits once a
	// ControllerRegistration registers the types: provider-local's, without a deployment.
	if code, _ := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/controllerregistrations/"+ProviderLocalRegistration, nil); code == 404 {
		h.RegisterExtensions(t, ProviderLocalRegistration, hubtest.LocalExtensions()...)
	}
	return &Hub{Hub: h, Admin: h.GRPC(t)}
}

// Collection is the hub's store of resource.group ("" for the core group).
func (h *Hub) Collection(t testing.TB, group, resource string) *store.Collection {
	t.Helper()
	c, ok := h.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		t.Fatalf("the hub serves no %s.%s", resource, group)
	}
	return c
}

// Store writes objects into the hub's store directly (no admission), as the hub's own controllers do, and returns
// them as stored. An object's resource is its kind in lower case and plural (y → ies).
func (h *Hub) Store(t testing.TB, objs ...store.Object) []store.Object {
	t.Helper()
	var out []store.Object
	for _, o := range objs {
		group, _, ok := strings.Cut(o.(interface{ GetApiVersion() string }).GetApiVersion(), "/")
		if !ok {
			group = ""
		}
		kind := o.(interface{ GetKind() string }).GetKind()
		resource := strings.ToLower(kind) + "s"
		if strings.HasSuffix(kind, "y") {
			resource = strings.ToLower(strings.TrimSuffix(kind, "y")) + "ies"
		}
		stored, err := h.Collection(t, group, resource).Create(context.Background(), o)
		if err != nil {
			t.Fatalf("store %s %s: %v", kind, o.GetMetadata().GetName(), err)
		}
		out = append(out, stored)
	}
	return out
}

// Update changes an object in the hub's store directly: its status when status is set, else the rest.
func (h *Hub) Update(t testing.TB, group, resource, namespace, name string, status bool, mutate func(store.Object)) {
	t.Helper()
	if _, err := h.Collection(t, group, resource).GuaranteedUpdate(context.Background(), namespace, name, status, func(cur store.Object) (store.Object, error) {
		mutate(cur)
		return cur, nil
	}); err != nil {
		t.Fatalf("update %s %s/%s: %v", resource, namespace, name, err)
	}
}

// BootstrapToken stores a bootstrap token for seed, valid until expiration, and returns it.
func (h *Hub) BootstrapToken(t testing.TB, seed string, expiration time.Time) string {
	t.Helper()
	tok, err := auth.NewSeedBootstrapToken(seed, expiration)
	if err != nil {
		t.Fatal(err)
	}
	h.Store(t, tok.SecretObject())
	return tok.Token()
}

// Seed is a seed cluster and the running agent of a seed on it.
type Seed struct {
	// Name is the seed's name.
	Name string
	// Cluster is the seed cluster.
	Cluster *seedtest.Seed
	// Client reads and writes the seed cluster directly, with the agent's scheme.
	Client client.Client
	// Agent is the seed's agent; its controllers are off.
	Agent *Agent
	// AgentConfig is the agent's configuration: StartAgent with it runs the seed's agent again (it finds its client
	// certificate in the seed).
	AgentConfig *config.AgentConfiguration
	// Conn is the agent's mTLS connection to the hub, and Cache its synced cache: what a controller gets.
	Conn  grpc.ClientConnInterface
	Cache *cache.Cache
}

// Base is what a controller of the seed gets (controller.Base), logging to Logger, with the retry bounds given.
func (s *Seed) Base(retryMin, retryMax time.Duration) controller.Base {
	return controller.Base{SeedName: s.Name, Cache: s.Cache, Hub: s.Conn, Seed: s.Client,
		Log: Logger().With("seed", s.Name), RetryMin: retryMin, RetryMax: retryMax}
}

// StartSeed installs the extension CRDs in cluster and starts an agent for seed name (spec: its seedConfig spec, see
// Config) on it, which bootstraps with a token of the hub and runs until the test ends. It returns once the agent
// has its hub connection and its cache holds the registered Seed. mutate may adjust the agent's agent.Config.
func (h *Hub) StartSeed(t testing.TB, name, spec string, cluster *seedtest.Seed, mutate ...func(*agent.Config)) *Seed {
	t.Helper()
	ctx := context.Background()
	s := &Seed{Name: name, Cluster: cluster}
	cs, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if s.Client, err = client.New(cluster.Config, client.Options{Scheme: agent.Scheme()}); err != nil {
		t.Fatal(err)
	}
	cfg := Config(t, name, spec, cluster)
	cfg.HubClientConnection = config.HubClientConnection{
		Address: h.GRPCAddr(), CABundle: string(h.CA), BootstrapToken: h.BootstrapToken(t, name, time.Now().Add(time.Hour)),
		KubeconfigSecret: config.SecretReference{Namespace: cluster.Namespace(t), Name: "gardenlet-kubeconfig"},
	}
	s.AgentConfig = cfg
	s.Agent = StartAgent(t, cfg, mutate...)
	wctx, cancel := context.WithTimeout(ctx, timescale.Scale(WaitTimeout))
	defer cancel()
	if s.Conn, err = s.Agent.HubConn(wctx); err != nil {
		t.Fatalf("no hub connection: %v", err)
	}
	s.Cache = s.Agent.Cache()
	if err := s.Cache.WaitForSync(wctx); err != nil {
		t.Fatalf("no cache sync: %v", err)
	}
	Eventually(t, "the Seed in the agent's cache", func() bool {
		_, ok := cache.Get[*corev1beta1.Seed](s.Cache, resources.Seeds, "", name)
		return ok
	})
	return s
}

// Config is the configuration of an agent for seed name on cluster: seedConfig with the name and spec (YAML indented
// for seedConfig.spec, such as SeedSpec), the cluster's kubeconfig, 1 s heartbeats, and the controllers off (a
// controller test runs the controller it tests itself; the agent's own tests turn them on where they test them). The
// caller sets HubClientConnection.
func Config(t testing.TB, name, spec string, cluster *seedtest.Seed) *config.AgentConfiguration {
	t.Helper()
	cfg, err := config.Decode(fmt.Appendf(nil, "apiVersion: %s\nkind: %s\nseedConfig:\n  metadata:\n    name: %s\n  spec:\n%s",
		config.APIVersion, config.Kind, name, spec))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SeedClientConnection.Kubeconfig = cluster.KubeconfigPath
	cfg.HeartbeatIntervalSeconds = 1
	cfg.Controllers.Disabled = true
	// Agents of a test share the machine: their endpoints listen on free ports.
	cfg.Server = config.Server{HealthProbes: "127.0.0.1:0", Metrics: "127.0.0.1:0"}
	return cfg
}

// Secret is an Opaque Secret namespace/name on the hub with data.
func Secret(namespace, name string, data map[string]string) *kcorev1.Secret {
	s := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Type: "Opaque", Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// CreateNamespace creates namespace name in the seed cluster and deletes it when the test ends.
func (s *Seed) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	if err := s.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1k.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1k.ObjectMeta{Name: name}})
	})
}
