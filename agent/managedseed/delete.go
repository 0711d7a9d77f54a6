package managedseed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// delete takes a deleted ManagedSeed apart in Gardener's order: the Seed (which the hub deletes only once no shoot
// uses it), then the agent's release and the garden namespace in the shoot (s; nil when the shoot is gone), the
// bootstrap tokens, and last the finalizer.
func (c *Controller) delete(ctx context.Context, ms *seedmanagementv1alpha1.ManagedSeed, s *corev1beta1.Shoot) (time.Duration, error) {
	if !slices.Contains(ms.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return 0, nil
	}
	name, key := ms.GetMetadata().GetName(), hubobject.Key(ms)
	seed, err := c.getSeed(ctx, name)
	if err != nil {
		return 0, err
	}
	if seed != nil {
		if seed.GetMetadata().GetDeletionTimestamp() == nil {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
			_, err := c.seeds.Delete(cctx, &metav1.DeleteRequest{Name: name})
			cancel()
			switch {
			case status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.FailedPrecondition:
				// Shoots still use the seed: wait for them.
				c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleting,
					fmt.Sprintf("Waiting for seed %s to be deleted: %s", name, status.Convert(err).Message())})
				return c.cfg.PollInterval, nil
			case err != nil && status.Code(err) != codes.NotFound:
				c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleteError, err.Error()})
				return 0, fmt.Errorf("delete seed %s: %w", name, err)
			}
			c.log.Info("deleted the Seed of a ManagedSeed", "managedSeed", key)
		}
		c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleting, fmt.Sprintf("Unregistering seed %s", name)})
		return c.cfg.PollInterval, nil
	}
	if s != nil {
		gone, err := c.undeploy(ctx, s)
		if err != nil {
			c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleteError, err.Error()})
			return 0, err
		}
		if !gone {
			c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleting,
				fmt.Sprintf("Seed %s is gone; waiting for the agent and namespace %s to be deleted from the shoot", name, Namespace)})
			return c.cfg.PollInterval, nil
		}
	}
	if err := c.dropToken(ctx, key); err != nil {
		return 0, err
	}
	c.setConditions(ctx, ms, cond{ConditionSeedRegistered, "False", reasonDeleting, fmt.Sprintf("Seed %s has been unregistered", name)})
	if _, err := c.objects.RemoveFinalizer(ctx, ms, FinalizerGardener); err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	c.log.Info("ManagedSeed deleted", "managedSeed", key)
	return 0, nil
}

// undeploy uninstalls the agent's release from the shoot and deletes the garden namespace; it reports whether the
// namespace is gone.
func (c *Controller) undeploy(ctx context.Context, s *corev1beta1.Shoot) (bool, error) {
	rc, core, err := c.shootClients(ctx, s)
	if err != nil {
		return false, err
	}
	rels, err := c.releases(rc)
	if err != nil {
		return false, err
	}
	if err := rels.Uninstall(ctx, Release, Namespace); err != nil {
		return false, fmt.Errorf("remove the agent from the shoot: %w", err)
	}
	ns, err := core.Namespaces().Get(ctx, Namespace, kmetav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read namespace %s in the shoot: %w", Namespace, err)
	case ns.DeletionTimestamp == nil:
		if err := core.Namespaces().Delete(ctx, Namespace, kmetav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete namespace %s in the shoot: %w", Namespace, err)
		}
	}
	return false, nil
}

// seedSpec is the Seed template's spec in Gardener's JSON as the new agent reads it: decoded as a Seed spec, fields
// the Seed API no longer has dropped (the gardenlet ignores them too), and encoded again.
func seedSpec(raw json.RawMessage) (map[string]any, error) {
	spec := &corev1beta1.SeedSpec{}
	if err := (kjson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, spec); err != nil {
		return nil, err
	}
	b, err := kjson.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
