package authz

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// Graph says which objects belong to a seed beyond what the objects say themselves: everything a seed's objects
// reference (a shoot's bindings, secrets, cloud profile, project, ...). resource is schema.GroupResource.String()
// ("shoots.core.gardener.cloud", "secrets", "leases.coordination.k8s.io"); namespace is "" for cluster-scoped
// objects.
type Graph interface {
	// Belongs reports whether the object exists and belongs to seed.
	Belongs(seed, resource, namespace, name string) bool
	// HasPath reports whether the object belongs to seed or, when it does not exist, an object of seed references
	// it: what decides a get, so that a missing object the seed's objects name is NotFound rather than Forbidden.
	HasPath(seed, resource, namespace, name string) bool
}

// Reader reads objects from the hub's watch cache; *api.Registry is one.
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error)
}

// Config configures an Authorizer.
type Config struct {
	// Graph answers what belongs to a seed through references. Without it, agents see only the objects that name
	// their seed themselves.
	Graph Graph
	// GraphReady, when set, is closed once the graph holds the store's state; decisions that consult the graph wait
	// for it (at most for their request's lifetime), so agents reconnecting to a starting hub are not denied what
	// belongs to them.
	GraphReady <-chan struct{}
	// Reader reads objects a decision depends on that the graph may not have processed yet: a ShootState's shoot, a
	// BackupEntry's bucket. Optional.
	Reader Reader
	// Index reads Projects and ClusterRoles through the indexes of Indexes, for the decisions of users by project
	// roles. Without it, users other than cluster admins may do nothing.
	Index IndexReader
}

// Authorizer is the hub's api.Authorizer: the seed rules for agents, nothing for bootstrap tokens, everything for
// cluster admins, project roles for everyone else.
type Authorizer struct {
	graph      Graph
	graphReady <-chan struct{}
	reader     Reader
	index      IndexReader
}

var _ api.Authorizer = (*Authorizer)(nil)

// New returns the hub's authorizer.
func New(cfg Config) *Authorizer {
	return &Authorizer{graph: cfg.Graph, graphReady: cfg.GraphReady, reader: cfg.Reader, index: cfg.Index}
}

// Authorize implements api.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, at api.Attributes) error {
	switch {
	case at.User.IsBootstrap():
		return api.Forbidden(at, "a bootstrap token may only be used for the agent's bootstrap exchange")
	case at.User.Seed != "":
		return a.authorizeSeed(ctx, at)
	case at.User.InGroup(auth.GroupAdmins):
		return nil
	}
	return a.authorizeUser(ctx, at)
}

// Filter implements api.Authorizer.
func (a *Authorizer) Filter(ctx context.Context, at api.Attributes) func(store.Object) bool {
	switch {
	case at.User.Seed != "":
		return a.seedFilter(ctx, at)
	case at.User.InGroup(auth.GroupAdmins):
		return nil
	}
	return a.filterUser(ctx, at)
}

// AgentConnectMethod is the one gRPC method a bootstrap token user may call: the agent link, where it may only ask
// for a seed client certificate.
const AgentConnectMethod = agentv1.AgentService_Connect_FullMethodName

// RestrictBootstrap keeps bootstrap token users to the bootstrap exchange. request is a gRPC call's full method or,
// for an HTTP request, "<METHOD> <path>"; everything but AgentConnectMethod is Forbidden for them. Other users pass.
func RestrictBootstrap(u auth.User, request string) error {
	if !u.IsBootstrap() || request == AgentConnectMethod {
		return nil
	}
	return forbidden(fmt.Sprintf("User %q cannot %s: a bootstrap token may only be used for the agent's bootstrap exchange (%s)",
		u.Name, request, AgentConnectMethod))
}

// AuthorizePath decides a request for a path outside the typed API, as kube-apiserver's non-resource URLs:
// discovery documents are for every user but bootstrap tokens; other paths (metrics, profiling) are for cluster
// admins.
func AuthorizePath(u auth.User, verb, path string, discovery bool) error {
	if u.IsBootstrap() || (!discovery && !u.InGroup(auth.GroupAdmins)) {
		return forbidden(fmt.Sprintf("User %q cannot %s path %q", u.Name, verb, path))
	}
	return nil
}

func forbidden(msg string) error {
	return &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusForbidden, Reason: kmetav1.StatusReasonForbidden, Message: "forbidden: " + msg,
	}}
}
