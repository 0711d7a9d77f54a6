package extsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Cluster is the decoded view of a Cluster resource: the Shoot, Seed and CloudProfile the agent wrote into its spec,
// as Trellis' typed API objects. The agent writes the Cluster named after the shoot's namespace before any extension
// resource of the shoot.
type Cluster struct {
	// Resource is the Cluster as read, with the raw JSON of the three objects in its spec.
	Resource *extensionsv1alpha1.Cluster
	// Shoot is spec.shoot; nil when the spec holds none.
	Shoot *corev1beta1.Shoot
	// Seed is spec.seed; nil when the spec holds none.
	Seed *corev1beta1.Seed
	// CloudProfile is spec.cloudProfile; nil when the spec holds none.
	CloudProfile *corev1beta1.CloudProfile
}

// GetCluster reads the Cluster named namespace (extension resources of a shoot live in the namespace the Cluster is
// named after) and decodes it. A missing Cluster is an error for which apierrors.IsNotFound is true: resources in the
// seed's garden namespace and cluster-scoped resources have none, and callers that serve them tolerate it.
func GetCluster(ctx context.Context, c client.Reader, namespace string) (*Cluster, error) {
	obj := &extensionsv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, obj); err != nil {
		return nil, fmt.Errorf("get cluster %s: %w", namespace, err)
	}
	return DecodeCluster(obj)
}

// DecodeCluster decodes the objects in obj's spec with the hub's JSON codec (proto/kjson), the JSON Gardener's API
// server serves. Fields the Trellis API does not know are ignored rather than rejected: a Cluster written by a newer
// agent must not stop every extension of the seed.
func DecodeCluster(obj *extensionsv1alpha1.Cluster) (*Cluster, error) {
	c := &Cluster{Resource: obj}
	var err error
	if c.Shoot, err = decode(obj.Spec.Shoot, "shoot", &corev1beta1.Shoot{}); err != nil {
		return nil, err
	}
	if c.Seed, err = decode(obj.Spec.Seed, "seed", &corev1beta1.Seed{}); err != nil {
		return nil, err
	}
	if c.CloudProfile, err = decode(obj.Spec.CloudProfile, "cloudProfile", &corev1beta1.CloudProfile{}); err != nil {
		return nil, err
	}
	return c, nil
}

// decode reads raw into m; it returns nil when raw holds nothing.
func decode[M proto.Message](raw runtime.RawExtension, field string, m M) (M, error) {
	var zero M
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return zero, fmt.Errorf("cluster spec.%s: %w", field, err)
		}
	}
	if len(data) == 0 || string(data) == "null" {
		return zero, nil
	}
	if err := (kjson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
		return zero, fmt.Errorf("cluster spec.%s: %w", field, err)
	}
	return m, nil
}

// ShootFailed says whether the shoot's last operation is Failed. Gardener then stops retrying the shoot, and
// extensions follow: the reconciler skips the resources of a failed shoot. False for a nil Cluster.
func (c *Cluster) ShootFailed() bool {
	return c != nil && c.Shoot.GetStatus().GetLastOperation().GetState() == string(extensionsv1alpha1.LastOperationStateFailed)
}

// ShootForceDeletion says whether the shoot carries confirmation.gardener.cloud/force-deletion with a true value:
// the reconciler then calls ForceDelete instead of Delete. False for a nil Cluster.
func (c *Cluster) ShootForceDeletion() bool {
	if c == nil {
		return false
	}
	v, ok := c.Shoot.GetMetadata().GetAnnotations()[extensionsv1alpha1.AnnotationForceDeletion]
	if !ok {
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// ShootHibernated says whether the shoot is to be hibernated (spec.hibernation.enabled). False for a nil Cluster.
func (c *Cluster) ShootHibernated() bool {
	return c != nil && c.Shoot.GetSpec().GetHibernation().GetEnabled()
}
