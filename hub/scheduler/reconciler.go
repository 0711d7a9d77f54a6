package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Event reasons, as Gardener names them.
const (
	EventSchedulingSuccessful = "SchedulingSuccessful"
	EventSchedulingFailed     = "SchedulingFailed"
)

const (
	// maxDecisions bounds how often one reconciliation decides again because the shoot's spec changed or the chosen
	// seed went away between the decision and the bind; past it the reconciliation is retried with backoff.
	maxDecisions = 5
	// maxReservations bounds how often one decision is taken again because another worker reserved the same seed
	// first (each time one of them made progress).
	maxReservations = 100
	// failureRefresh bounds how often the same scheduling failure of a shoot is written: its SchedulingFailed event
	// (controller.Recorder.Coalesce) and its lastOperation, whose lastUpdateTime alone would change. A shoot that
	// stays unschedulable is retried with backoff as in Gardener, but its retries within a minute write nothing.
	failureRefresh = time.Minute
)

// errContention: a decision could not reserve its seed, others always got there first.
var errContention = errors.New("the chosen seeds kept being taken by concurrent scheduling decisions")

// reconciler schedules one shoot (Gardener's shoot scheduler Reconciler): it determines the seed, binds the shoot to
// it, and reports the outcome as an event, or a failure also in status.lastOperation.
type reconciler struct {
	c        *collections
	strategy string
	usage    *usage
	events   recorder
	clock    clock.PassiveClock
	log      *slog.Logger
}

// Reconcile schedules the shoot key names, if it waits for this scheduler. An error is retried with backoff.
func (r *reconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	if err := r.usage.wait(ctx); err != nil {
		return controller.Result{}, err
	}
	log := r.log.With("shoot", key.String())
	for range maxDecisions {
		shoot, ok, err := controller.Get[*corev1beta1.Shoot](ctx, r.c.shoots, key)
		if err != nil {
			return controller.Result{}, fmt.Errorf("error retrieving object from store: %w", err)
		}
		if !ok {
			return controller.Result{}, nil
		}
		if !Pending(shoot) {
			return controller.Result{}, nil // scheduled meanwhile, being deleted, or another scheduler's
		}
		seed, err := r.decide(ctx, shoot, log)
		if errors.Is(err, errContention) {
			return controller.Result{}, err
		}
		if err != nil {
			r.reportFailed(ctx, shoot, err, log)
			return controller.Result{}, fmt.Errorf("failed to determine seed for shoot: %w", err)
		}
		bound, outcome, err := r.bind(ctx, shoot, seed)
		r.usage.release(seed, key, bound)
		switch {
		case err != nil:
			r.reportFailed(ctx, shoot, err, log)
			return controller.Result{}, fmt.Errorf("failed to bind shoot to seed: %w", err)
		case outcome == bindDone:
			log.Info("Shoot successfully scheduled to seed", "cloudprofile", cloudProfileRef(shoot).GetName(),
				"region", shoot.GetSpec().GetRegion(), "seed", seed, "strategy", r.strategy)
			r.events.Eventf(ctx, eventObject(bound), controller.EventNormal, EventSchedulingSuccessful, "Scheduled to seed '%s'", seed)
			return controller.Result{}, nil
		case outcome == bindSkipped:
			return controller.Result{}, nil
		}
		// bindStale: decide again on the current state.
	}
	return controller.Result{}, fmt.Errorf("shoot %s kept changing while it was scheduled", key)
}

// decide determines the seed and reserves a place on it.
func (r *reconciler) decide(ctx context.Context, shoot *corev1beta1.Shoot, log *slog.Logger) (string, error) {
	in, err := r.landscape(ctx, shoot, log)
	if err != nil {
		return "", err
	}
	for range maxReservations {
		in.Usage = r.usage.snapshot()
		seed, err := DetermineSeed(shoot, in, log)
		if err != nil {
			return "", err
		}
		name := seed.GetMetadata().GetName()
		if r.usage.reserve(name, keyOf(shoot), in.Usage[name]) {
			return name, nil
		}
	}
	return "", errContention
}

// landscape reads what a decision needs besides the shoot and the usage: the seeds, the cloud profile and its region
// ConfigMap. Errors are Gardener's (a missing cloud profile is the store's NotFound).
func (r *reconciler) landscape(ctx context.Context, shoot *corev1beta1.Shoot, log *slog.Logger) (Landscape, error) {
	in := Landscape{Strategy: r.strategy}
	res, err := r.c.seeds.List(ctx, "", store.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("list seeds: %w", err)
	}
	in.Seeds = make([]*corev1beta1.Seed, 0, len(res.Items))
	for _, o := range res.Items {
		in.Seeds = append(in.Seeds, o.(*corev1beta1.Seed))
	}
	if in.CloudProfileName, in.CloudProfile, err = r.cloudProfile(ctx, shoot); err != nil {
		return in, err
	}
	cms, err := r.c.configMaps.List(ctx, GardenNamespace, store.ListOptions{
		Labels: labels.SelectorFromSet(labels.Set{LabelSchedulingPurpose: SchedulingPurposeRegionConfig})})
	if err != nil {
		return in, fmt.Errorf("list region ConfigMaps: %w", err)
	}
	regionConfigs := make([]*kcorev1.ConfigMap, 0, len(cms.Items))
	for _, o := range cms.Items {
		regionConfigs = append(regionConfigs, o.(*kcorev1.ConfigMap))
	}
	in.RegionConfig = pickRegionConfig(regionConfigs, in.CloudProfileName, log)
	return in, nil
}

// cloudProfileRef is the shoot's cloud profile reference: spec.cloudProfile (kind CloudProfile when unset), else
// spec.cloudProfileName; nil when it names none.
func cloudProfileRef(shoot *corev1beta1.Shoot) *corev1beta1.CloudProfileReference {
	if ref := shoot.GetSpec().GetCloudProfile(); ref != nil {
		if ref.GetKind() == "" {
			return &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: ref.GetName()}
		}
		return ref
	}
	if name := shoot.GetSpec().GetCloudProfileName(); name != "" {
		return &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: name}
	}
	return nil
}

// cloudProfile reads the shoot's CloudProfile, or its NamespacedCloudProfile (whose status.cloudProfileSpec is the
// merged profile), as Gardener's GetCloudProfile does.
func (r *reconciler) cloudProfile(ctx context.Context, shoot *corev1beta1.Shoot) (string, *corev1beta1.CloudProfileSpec, error) {
	ref := cloudProfileRef(shoot)
	if ref == nil {
		return "", nil, &Unschedulable{Rule: RuleCloudProfile, Err: errNoCloudProfile}
	}
	switch ref.GetKind() {
	case "CloudProfile":
		obj, err := r.c.cloudProfiles.Get(ctx, "", ref.GetName())
		if err != nil {
			return "", nil, &Unschedulable{Rule: RuleCloudProfile, Err: err}
		}
		return ref.GetName(), obj.(*corev1beta1.CloudProfile).GetSpec(), nil
	case "NamespacedCloudProfile":
		obj, err := r.c.namespacedCloudProfiles.Get(ctx, shoot.GetMetadata().GetNamespace(), ref.GetName())
		if err != nil {
			return "", nil, &Unschedulable{Rule: RuleCloudProfile, Err: err}
		}
		return ref.GetName(), obj.(*corev1beta1.NamespacedCloudProfile).GetStatus().GetCloudProfileSpec(), nil
	}
	return "", nil, unschedulable(RuleCloudProfile, "could not get cloud profile of kind %q", ref.GetKind())
}

// bindOutcome says how a bind ended without error.
type bindOutcome int

const (
	bindDone    bindOutcome = iota // spec.seedName written
	bindSkipped                    // the shoot no longer waits for this scheduler (or was replaced): nothing to do
	bindStale                      // the shoot's spec changed, or the seed went away, since the decision
)

// bind writes spec.seedName and nothing else, as the shoots/binding subresource does, on the shoot's current state:
// writes of others in between (status, finalizers, labels) are kept and retried over by the store. The decision
// still holds only while the shoot is the same object (uid), still waits for this scheduler, has the spec it was
// made for (generation), and the seed exists and is not being deleted (the binding's admission rule); otherwise
// nothing is written and the outcome says why. bound is the written state.
func (r *reconciler) bind(ctx context.Context, decided *corev1beta1.Shoot, seed string) (bound *corev1beta1.Shoot, outcome bindOutcome, err error) {
	md := decided.GetMetadata()
	out, err := r.c.shoots.GuaranteedUpdate(ctx, md.GetNamespace(), md.GetName(), false, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Shoot)
		switch {
		case s.GetMetadata().GetUid() != md.GetUid() || !Pending(s):
			outcome = bindSkipped
			return nil, nil
		case s.GetMetadata().GetGeneration() != md.GetGeneration():
			outcome = bindStale
			return nil, nil
		}
		obj, err := r.c.seeds.Get(ctx, "", seed)
		if apierrors.IsNotFound(err) || (err == nil && obj.GetMetadata().GetDeletionTimestamp() != nil) {
			outcome = bindStale
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if s.Spec == nil {
			s.Spec = &corev1beta1.ShootSpec{}
		}
		s.Spec.SeedName = proto.String(seed)
		outcome = bindDone
		return s, nil
	})
	if apierrors.IsNotFound(err) {
		return nil, bindSkipped, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if outcome != bindDone {
		return nil, outcome, nil
	}
	return out.(*corev1beta1.Shoot), bindDone, nil
}

// eventObject is what an event needs of a shoot (its identity), so that queued events hold little memory.
func eventObject(s *corev1beta1.Shoot) *corev1beta1.Shoot {
	md := s.GetMetadata()
	return &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid(),
		ResourceVersion: md.GetResourceVersion()}}
}

// reportFailed records why the shoot could not be scheduled, as Gardener does: a SchedulingFailed event and
// status.lastOperation {Create, Pending, description}. Unlike Gardener, the same failure is written at most once per
// failureRefresh (events aggregated as Kubernetes' recorder does, no write that would only move lastUpdateTime), so
// that many unschedulable shoots retried with backoff do not keep the API busy. Failing to record is logged, not
// returned: the reconciliation's own error is what gets retried.
func (r *reconciler) reportFailed(ctx context.Context, shoot *corev1beta1.Shoot, cause error, log *slog.Logger) {
	if ctx.Err() != nil {
		return
	}
	description := "Failed to schedule Shoot: " + cause.Error()
	r.events.Eventf(ctx, eventObject(shoot), controller.EventWarning, EventSchedulingFailed, "%s", description)
	md := shoot.GetMetadata()
	_, err := r.c.shoots.GuaranteedUpdate(ctx, md.GetNamespace(), md.GetName(), true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Shoot)
		if s.GetMetadata().GetUid() != md.GetUid() {
			return nil, nil
		}
		if s.Status == nil {
			s.Status = &corev1beta1.ShootStatus{}
		}
		if s.Status.LastOperation == nil {
			s.Status.LastOperation = &metav1.LastOperation{}
		}
		op := s.Status.LastOperation
		now := r.clock.Now()
		if op.Type == "Create" && op.State == "Pending" && op.Description == description && op.LastUpdateTime != nil &&
			now.Sub(op.LastUpdateTime.AsTime()) < failureRefresh {
			return nil, nil // recorded lately: no write that only moves lastUpdateTime
		}
		op.Type, op.State, op.Description = "Create", "Pending", description
		op.LastUpdateTime = timestamppb.New(now)
		return s, nil
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		log.Error("Failed to report scheduling failure to shoot status", "err", err)
	}
}
