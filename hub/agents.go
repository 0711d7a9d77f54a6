package hub

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/csr"
	"github.com/trellis-dev/trellis/hub/leader"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Version is the hub's build version, reported to agents.
var Version = "dev"

// systemNamespaces exist in every garden: kube-system holds bootstrap tokens, garden the garden's own objects,
// gardener-system-seed-lease the seeds' Leases, trellis-system the users' AccessTokens.
var systemNamespaces = []string{"kube-system", "garden", seedgraph.LeaseNamespace, auth.UserTokenNamespace}

// ensureNamespaces creates the system namespaces that do not exist yet.
func ensureNamespaces(ctx context.Context, reg *api.Registry) error {
	c, ok := reg.Collection(schema.GroupResource{Resource: "namespaces"})
	if !ok {
		return fmt.Errorf("namespaces are not served")
	}
	for _, ns := range systemNamespaces {
		_, err := c.Create(ctx, &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace", Metadata: &metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// ensureClusterIdentity publishes the garden's cluster identity in ConfigMap kube-system/cluster-identity, as
// gardener-apiserver does: want, or a random identity when want is empty and none is stored. A stored identity never
// changes: a different want is refused.
func ensureClusterIdentity(ctx context.Context, reg *api.Registry, want string) error {
	c, ok := reg.Collection(schema.GroupResource{Resource: "configmaps"})
	if !ok {
		return fmt.Errorf("configmaps are not served")
	}
	const key = "cluster-identity"
	cur, err := c.Get(ctx, authz.ClusterIdentityNamespace, authz.ClusterIdentityName)
	switch {
	case err == nil:
		have := cur.(*kcorev1.ConfigMap).GetData()[key]
		if want != "" && have != want {
			return fmt.Errorf("cluster identity %q differs from the stored one %q (ConfigMap %s/%s); it cannot change",
				want, have, authz.ClusterIdentityNamespace, authz.ClusterIdentityName)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read the cluster identity: %w", err)
	}
	if want == "" {
		want = "garden-" + string(uuid.NewUUID())
	}
	_, err = c.Create(ctx, &kcorev1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap",
		Metadata:  &metav1.ObjectMeta{Namespace: authz.ClusterIdentityNamespace, Name: authz.ClusterIdentityName},
		Immutable: proto.Bool(true), Data: map[string]string{key: want}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("store the cluster identity: %w", err)
	}
	if apierrors.IsAlreadyExists(err) { // another replica was first: check against its identity
		return ensureClusterIdentity(ctx, reg, want)
	}
	return nil
}

// agentParts is everything the agent link adds to a replica.
type agentParts struct {
	graph     *seedgraph.Graph
	link      *agentlink.Server
	elector   *leader.Elector
	lifecycle *agentlink.Lifecycle
	// stop ends the sessions and the leader's work, ahead of the hub's graceful shutdown (sessions are long-lived
	// streams a graceful stop would otherwise wait for).
	stop context.CancelFunc
	// graphReady is closed once the graph holds the store's state.
	graphReady <-chan struct{}
}

// startAgentLink builds the seed graph, the agent link (registered on grpcSrv) and the leader-only controllers
// (CSR approval, seed lifecycle, and the controller-manager's loops, controllermanager.go), and runs them on wg until
// ctx ends.
func (h *Hub) startAgentLink(ctx context.Context, wg *sync.WaitGroup, st *store.Store, reg *api.Registry, ca *pki.CA, grpcSrv grpc.ServiceRegistrar, promReg prometheus.Registerer) (*agentParts, error) {
	if err := ensureNamespaces(ctx, reg); err != nil {
		return nil, err
	}
	if err := ensureClusterIdentity(ctx, reg, h.cfg.ClusterIdentity); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	graph := seedgraph.New()
	graphReady := make(chan struct{})
	link, err := agentlink.New(agentlink.Config{
		Source: reg, Graph: graph, GraphReady: graphReady, CA: ca, Etcd: st.Client(), Prefix: st.Prefix(),
		Identify:          identify,
		HubVersion:        Version,
		HeartbeatInterval: h.cfg.HeartbeatInterval,
		Registerer:        promReg,
		Log:               h.log.With("component", "agentlink"),
	})
	if err != nil {
		stop()
		return nil, err
	}
	agentv1.RegisterAgentServiceServer(grpcSrv, link)
	lifecycle := agentlink.NewLifecycle(agentlink.LifecycleConfig{
		Source: reg, Etcd: st.Client(), Prefix: st.Prefix(), MonitorPeriod: h.cfg.MonitorPeriod, ShootMonitorPeriod: h.cfg.shootMonitorPeriod,
		Log: h.log.With("component", "seed-lifecycle"),
	})
	csrs := csr.NewController(reg, ca, h.log.With("component", "csr"))
	loops, err := controllerManager(reg, h.cfg.Components.ControllerManager, h.cfg.Controllers, h.log)
	if err != nil {
		stop()
		return nil, err
	}
	elector := leader.New(leader.Config{Client: st.Client(), Key: st.Prefix() + "/leader", Log: h.log.With("component", "leader")})
	run := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && ctx.Err() == nil {
				h.log.Error(name+" stopped", "err", err)
			}
		}()
	}
	run("seed graph", func() error { return graph.Run(ctx, reg, h.log.With("component", "seedgraph"), graphReady) })
	run("agent link", func() error { return link.Run(ctx) })
	run("leader election", func() error {
		fns := []func(context.Context){
			func(ctx context.Context) { _ = csrs.Run(ctx) },
			func(ctx context.Context) { _ = lifecycle.Run(ctx) },
		}
		for _, l := range loops {
			fns = append(fns, func(ctx context.Context) { _ = l.Run(ctx) })
		}
		return elector.Run(ctx, fns...)
	})
	return &agentParts{graph: graph, link: link, elector: elector, lifecycle: lifecycle, stop: stop, graphReady: graphReady}, nil
}

// identify maps the authenticated user of a stream to an agent link identity.
func identify(ctx context.Context) (agentlink.Identity, error) {
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return agentlink.Identity{}, apierrors.NewUnauthorized("not authenticated")
	}
	return agentlink.Identity{User: u.Name, Seed: u.Seed, CertNotAfter: u.CertNotAfter, BootstrapTokenID: u.BootstrapTokenID}, nil
}

// IsLeader reports whether this replica leads the control-plane loops now (false before Ready).
func (h *Hub) IsLeader() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents != nil && h.agents.elector.IsLeader()
}

// AgentLink returns the agent link (after Ready), for tests and in-process tools.
func (h *Hub) AgentLink() *agentlink.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.agents == nil {
		return nil
	}
	return h.agents.link
}
