package hub

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/seedgraph"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Version is the hub's build version, reported to agents.
var Version = "dev"

// systemNamespaces exist in every garden: kube-system holds bootstrap tokens, garden the garden's own objects,
// gardener-system-seed-lease the seeds' Leases, trellis-system the users' AccessTokens.
var systemNamespaces = []string{"kube-system", "garden", seedgraph.LeaseNamespace, auth.UserTokenNamespace}

// ensureGarden creates what every garden holds: the system namespaces and the cluster identity.
func ensureGarden(ctx context.Context, reg *api.Registry, clusterIdentity string) error {
	if err := ensureNamespaces(ctx, reg); err != nil {
		return err
	}
	return ensureClusterIdentity(ctx, reg, clusterIdentity)
}

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

// identify maps the authenticated user of a stream to an agent link identity.
func identify(ctx context.Context) (agentlink.Identity, error) {
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return agentlink.Identity{}, apierrors.NewUnauthorized("not authenticated")
	}
	return agentlink.Identity{User: u.Name, Seed: u.Seed, CertNotAfter: u.CertNotAfter,
		CertAuthorityKeyID: u.CertAuthorityKeyID, BootstrapTokenID: u.BootstrapTokenID}, nil
}
