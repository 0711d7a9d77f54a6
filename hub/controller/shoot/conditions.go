package shoot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// gardenNamespace holds the ManagedSeeds, named as the Seeds they register.
const gardenNamespace = "garden"

// shootConditionTypes are the shoot's own conditions (Gardener's GetShootConditionTypes(false)); every other
// condition of a shoot registered as a seed is one of its Seed's.
var shootConditionTypes = []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy",
	"EveryNodeReady", "SystemComponentsHealthy"}

// mergeSeedConditions returns copies of the shoot's own conditions followed by the seed's (none for nil): Gardener's
// RetainConditions of the shoot types and MergeConditions of the seed's, in which a seed condition of a shoot type
// replaces the shoot's.
func mergeSeedConditions(shoot []*metav1.Condition, seed *corev1beta1.Seed) []*metav1.Condition {
	var out []*metav1.Condition
	index := map[string]int{}
	for _, c := range shoot {
		if slices.Contains(shootConditionTypes, c.GetType()) {
			index[c.GetType()] = len(out)
			out = append(out, proto.CloneOf(c))
		}
	}
	for _, c := range seed.GetStatus().GetConditions() {
		if i, ok := index[c.GetType()]; ok {
			out[i] = proto.CloneOf(c)
			continue
		}
		index[c.GetType()] = len(out)
		out = append(out, proto.CloneOf(c))
	}
	return out
}

func conditionsEqual(a, b []*metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y *metav1.Condition) bool { return proto.Equal(x, y) })
}

// conditionsShootDigest: the shoot's conditions that are not its own, and the deletion. Gardener looks at a shoot
// only when it appears and when its seed's conditions change; here a writer replacing the shoot's conditions with its
// own alone (the agent's care does) gets the seed's back at once.
func conditionsShootDigest(o store.Object) string {
	var foreign []string
	for _, c := range o.(*corev1beta1.Shoot).GetStatus().GetConditions() {
		if !slices.Contains(shootConditionTypes, c.GetType()) {
			foreign = append(foreign, c.GetType()+"="+c.GetStatus())
		}
	}
	return strings.Join(foreign, ",") + deletionDigest(o)
}

// seedConditionsDigest: the seed's conditions without their lastUpdateTime, which heartbeats may move without
// anything else changing.
func seedConditionsDigest(o store.Object) string {
	var cs []*metav1.Condition
	for _, c := range o.(*corev1beta1.Seed).GetStatus().GetConditions() {
		c = proto.CloneOf(c)
		c.LastUpdateTime = nil
		cs = append(cs, c)
	}
	return hash(&corev1beta1.SeedStatus{Conditions: cs})
}

// shootOfManagedSeed maps a ManagedSeed to the shoot it registers (none without spec.shoot).
func shootOfManagedSeed(o store.Object) []controller.Key {
	ms := o.(*seedmanagementv1alpha1.ManagedSeed)
	if ms.GetSpec().GetShoot().GetName() == "" {
		return nil
	}
	return []controller.Key{{Namespace: ms.GetMetadata().GetNamespace(), Name: ms.GetSpec().GetShoot().GetName()}}
}

// managedSeedDigest: the shoot a ManagedSeed registers and its deletion.
func managedSeedDigest(o store.Object) string {
	return o.(*seedmanagementv1alpha1.ManagedSeed).GetSpec().GetShoot().GetName() + deletionDigest(o)
}

// conditionsReconciler copies the conditions of seeds registered by ManagedSeeds into their shoots.
type conditionsReconciler struct {
	c   *collections
	log *slog.Logger
}

// shootsOfSeed maps a Seed to the shoot its ManagedSeed (garden/<seed name>) registers, if any.
func (r *conditionsReconciler) shootsOfSeed(o store.Object) []controller.Key {
	obj, err := r.c.managedSeeds.Get(context.Background(), gardenNamespace, o.GetMetadata().GetName())
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.log.Warn("reading the ManagedSeed of a seed failed", "seed", o.GetMetadata().GetName(), "err", err)
		}
		return nil
	}
	return shootOfManagedSeed(obj)
}

// seedOf returns the Seed the shoot is registered as: the one named as the ManagedSeed whose spec.shoot.name names
// the shoot in the shoot's namespace; nil when there is none (yet).
func (r *conditionsReconciler) seedOf(ctx context.Context, s *corev1beta1.Shoot) (*corev1beta1.Seed, error) {
	ns := s.GetMetadata().GetNamespace()
	res, err := r.c.managedSeeds.List(ctx, ns, store.ListOptions{Fields: fields.OneTermEqualSelector("spec.shoot.name", s.GetMetadata().GetName())})
	if err != nil {
		return nil, fmt.Errorf("list the ManagedSeeds of shoot %s/%s: %w", ns, s.GetMetadata().GetName(), err)
	}
	switch len(res.Items) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("found more than one ManagedSeed for shoot %s/%s", ns, s.GetMetadata().GetName())
	}
	obj, err := r.c.seeds.Get(ctx, "", res.Items[0].GetMetadata().GetName())
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Seed %s: %w", res.Items[0].GetMetadata().GetName(), err)
	}
	return obj.(*corev1beta1.Seed), nil
}

// Reconcile replaces the shoot's seed conditions by those of the seed it is registered as (none when it is not).
// The write is a compare-and-swap on the state read, as in Gardener: conditions that change fast are not merged into
// a stale list.
func (r *conditionsReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.c.shoots, k)
	if err != nil || s == nil {
		return controller.Result{}, err
	}
	seed, err := r.seedOf(ctx, s)
	if err != nil {
		return controller.Result{}, err
	}
	want := mergeSeedConditions(s.GetStatus().GetConditions(), seed)
	if conditionsEqual(want, s.GetStatus().GetConditions()) {
		return controller.Result{}, nil
	}
	next := proto.CloneOf(s)
	if next.Status == nil {
		next.Status = &corev1beta1.ShootStatus{}
	}
	next.Status.Conditions = want
	if _, err := r.c.shoots.UpdateStatus(ctx, next); err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, fmt.Errorf("update the conditions of shoot %s: %w", k, err)
	}
	r.log.Debug("updated the shoot's seed conditions", "shoot", k.String())
	return controller.Result{}, nil
}
