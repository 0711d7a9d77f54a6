package managedseedset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// Reconciler brings ManagedSeedSets in line with their spec, one replica step per call: Gardener's reconciler and
// actuator of the controller in one. Create it with NewReconciler.
type Reconciler struct {
	sets, shoots, managedSeeds, seeds *store.Collection
	// admission reads what the admission checks of the Shoots and ManagedSeeds the controller creates read.
	admission       admission.Reader
	plugins         admission.Plugins
	maxShootRetries int
	syncPeriod      time.Duration
	clock           clock.PassiveClock
	recorder        *controller.Recorder
	log             *slog.Logger
	retried         retriedOperations
}

// retriedOperations remembers, per shoot (uid), the failed operation the controller retried last and when. The agent
// takes a retry in two writes, the annotation's removal and then its new operation (Processing); a shoot seen between
// the two shows the failure already retried without the annotation, which must not count as a new failure. The memory
// is the leader's: after a leader change one retry may be counted twice, as Gardener may count it.
type retriedOperations struct {
	mu  sync.Mutex
	ops map[string]retriedOperation
}

type retriedOperation struct {
	operation string
	at        time.Time
}

// operationOf identifies a shoot's last operation (the agent stamps every write of it).
func operationOf(s *corev1beta1.Shoot) string {
	op := s.GetStatus().GetLastOperation()
	return fmt.Sprintf("%s|%s|%s|%d|%s", op.GetType(), op.GetState(), op.GetLastUpdateTime().AsTime().Format(time.RFC3339Nano),
		op.GetProgress(), op.GetDescription())
}

// taken says whether the shoot's failed operation is the one retried last, less than ttl ago.
func (m *retriedOperations) taken(s *corev1beta1.Shoot, now time.Time, ttl time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.ops[s.GetMetadata().GetUid()]
	return ok && r.operation == operationOf(s) && now.Sub(r.at) < ttl
}

// remember records the retry of the shoot's failed operation and forgets records older than ttl.
func (m *retriedOperations) remember(s *corev1beta1.Shoot, now time.Time, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = map[string]retriedOperation{}
	}
	for uid, r := range m.ops {
		if now.Sub(r.at) >= ttl {
			delete(m.ops, uid)
		}
	}
	m.ops[s.GetMetadata().GetUid()] = retriedOperation{operation: operationOf(s), at: now}
}

var (
	shootKind       = schema.GroupKind{Group: "core.gardener.cloud", Kind: "Shoot"}
	managedSeedKind = schema.GroupKind{Group: Group, Kind: "ManagedSeed"}
)

// Reconcile takes the set key one step further: it keeps the set's finalizer, reconciles its replicas (or, while the
// set is being deleted, scales it to zero and then drops the finalizer), writes its status and looks again after the
// sync period.
func (r *Reconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	set, ok, err := controller.Get[*seedmanagementv1alpha1.ManagedSeedSet](ctx, r.sets, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	md := set.GetMetadata()
	deleting := md.GetDeletionTimestamp() != nil
	if !slices.Contains(md.GetFinalizers(), FinalizerGardener) {
		if deleting {
			return controller.Result{}, nil
		}
		if set, err = r.addFinalizer(ctx, key); err != nil {
			return controller.Result{}, fmt.Errorf("could not add finalizer: %w", err)
		}
	}

	status, done, err := r.actuate(ctx, set)
	if deleting && done && err == nil {
		r.log.Info("removing finalizer", "managedSeedSet", key.String())
		if err := r.removeFinalizer(ctx, key); err != nil {
			return controller.Result{}, fmt.Errorf("failed to remove finalizer: %w", err)
		}
		return controller.Result{}, nil
	}
	if uerr := r.writeStatus(ctx, key, status); uerr != nil && err == nil {
		err = fmt.Errorf("could not update status: %w", uerr)
	}
	if err != nil {
		return controller.Result{}, fmt.Errorf("could not reconcile ManagedSeedSet %s: %w", key, err)
	}
	return controller.Result{RequeueAfter: r.syncPeriod}, nil
}

// actuate is Gardener's actuator: it takes one step with the set's replicas and returns the new status; done means
// nothing is left to do (the set being deleted may lose its finalizer).
func (r *Reconciler) actuate(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet) (st *seedmanagementv1alpha1.ManagedSeedSetStatus, done bool, err error) {
	st = proto.CloneOf(set.GetStatus())
	if st == nil {
		st = &seedmanagementv1alpha1.ManagedSeedSetStatus{}
	}
	st.ObservedGeneration = proto.Int64(set.GetMetadata().GetGeneration())
	defer func() {
		if err != nil {
			r.recorder.Eventf(ctx, set, controller.EventWarning, EventReconcileError, "%s", err)
		}
	}()

	replicas, err := r.replicas(ctx, set)
	if err != nil {
		return st, false, err
	}
	sortReplicas(replicas, byOrdinal)
	pending := pendingReplica(replicas, st)
	var ready, postponed, deletable []*replica
	for _, rp := range replicas {
		if rp.ready() {
			ready = append(ready, rp)
		} else if rp != pending {
			postponed = append(postponed, rp)
		}
		if rp.deletable() {
			deletable = append(deletable, rp)
		}
	}
	// G115: at most spec.replicas (an int32) plus the replicas being deleted.
	st.Replicas = proto.Int32(int32(len(replicas)))   //nolint:gosec // G115: see above
	st.ReadyReplicas = proto.Int32(int32(len(ready))) //nolint:gosec // G115: see above

	count, target := len(replicas), 0
	if set.GetMetadata().GetDeletionTimestamp() == nil {
		target = int(desiredReplicas(set))
	}
	scalingOut, scalingIn := count < target, count > target

	// While a replica is pending nothing else starts.
	if pending != nil {
		if wait, err := r.reconcileReplica(ctx, set, st, pending, scalingIn); err != nil || wait {
			return st, false, err
		}
	}

	switch {
	case scalingOut:
		ordinal := nextOrdinal(replicas, st)
		if err := r.createReplica(ctx, set, st, ordinal); err != nil {
			return st, false, err
		}
		st.Replicas = proto.Int32(st.GetReplicas() + 1)
		st.NextReplicaNumber = proto.Int32(ordinal + 1)
		return st, false, nil

	case scalingIn:
		if len(deletable) == 0 {
			return st, false, errors.New("no deletable replicas found")
		}
		sortReplicas(deletable, lowerPriority)
		rp := deletable[0]
		if err := r.deleteReplica(ctx, set, st, rp); err != nil {
			return st, false, err
		}
		if rp.ready() {
			st.ReadyReplicas = proto.Int32(st.GetReadyReplicas() - 1)
		}
		return st, false, nil
	}

	for _, rp := range postponed {
		if wait, err := r.reconcileReplica(ctx, set, st, rp, scalingIn); err != nil || wait {
			return st, false, err
		}
	}
	st.PendingReplica = nil
	return st, true, nil
}

// reconcileReplica moves one replica on, or says why the set must wait for it (true): the replica is then pending.
func (r *Reconciler) reconcileReplica(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet, st *seedmanagementv1alpha1.ManagedSeedSetStatus, rp *replica, scalingIn bool) (bool, error) {
	name, full := rp.name(), rp.fullName()
	log := r.log.With("managedSeedSet", keyOf(set).String(), "replica", full)
	switch s := rp.status(); {
	case s == statusShootReconcileFailed && !scalingIn:
		return true, r.retryShoot(ctx, set, st, rp, false)

	case s == statusShootDeleteFailed:
		return true, r.retryShoot(ctx, set, st, rp, true)

	case s == statusShootReconciling && !scalingIn:
		r.event(ctx, set, EventWaitingForShootReconciled, "Waiting for Shoot %s to be reconciled", full)
		r.setPending(st, name, ReasonShootReconciling, keptRetries(st, name, ReasonShootReconciling))

	case s == statusShootDeleting:
		r.event(ctx, set, EventWaitingForShootDeleted, "Waiting for Shoot %s to be deleted", full)
		r.setPending(st, name, ReasonShootDeleting, keptRetries(st, name, ReasonShootDeleting))

	case s == statusShootReconciled && !scalingIn:
		log.Info("creating ManagedSeed")
		r.event(ctx, set, EventCreatingManagedSeed, "Creating ManagedSeed %s", full)
		ms, err := newManagedSeed(set, rp.ordinal())
		if err != nil {
			return false, err
		}
		if err := r.create(ctx, r.managedSeeds, managedSeedKind, ms); err != nil {
			return false, err
		}
		r.setPending(st, name, ReasonManagedSeedPreparing, nil)

	case s == statusShootReconciled: // scaling in: its ManagedSeed is gone
		log.Info("deleting Shoot")
		r.event(ctx, set, EventDeletingShoot, "Deleting Shoot %s", full)
		if err := r.deleteShoot(ctx, rp.shoot); err != nil {
			return false, err
		}
		r.setPending(st, name, ReasonShootDeleting, nil)

	case s == statusManagedSeedPreparing && !scalingIn:
		r.event(ctx, set, EventWaitingForManagedSeedRegistered, "Waiting for ManagedSeed %s to be registered", full)
		r.setPending(st, name, ReasonManagedSeedPreparing, nil)

	case s == statusManagedSeedDeleting:
		r.event(ctx, set, EventWaitingForManagedSeedDeleted, "Waiting for ManagedSeed %s to be deleted", full)
		r.setPending(st, name, ReasonManagedSeedDeleting, nil)

	case !rp.seedReady() && !scalingIn:
		r.event(ctx, set, EventWaitingForSeedReady, "Waiting for Seed %s to be ready", name)
		r.setPending(st, name, ReasonSeedNotReady, nil)

	case rp.health() != healthHealthy && !scalingIn:
		r.event(ctx, set, EventWaitingForShootHealthy, "Waiting for Shoot %s to be healthy", full)
		r.setPending(st, name, ReasonShootNotHealthy, nil)

	default:
		return false, nil
	}
	return true, nil
}

// retryShoot retries the failed reconciliation (or deletion) of a replica's shoot while fewer than maxShootRetries
// retries were made for it, counting them in pendingReplica.retries; then the replica stays pending with reason
// ShootReconcileFailed (ShootDeleteFailed). A shoot that still carries the retry it was given, or shows the failure
// already retried, has not reported the retried operation yet: it is waited for, not retried and counted again.
func (r *Reconciler) retryShoot(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet, st *seedmanagementv1alpha1.ManagedSeedSetStatus, rp *replica, deletion bool) error {
	name, full := rp.name(), rp.fullName()
	waiting, failed, what := ReasonShootReconciling, ReasonShootReconcileFailed, "reconciliation"
	retrying, notRetrying, waitEvent, waitWhat := EventRetryingShootReconciliation, EventNotRetryingShootReconciliation, EventWaitingForShootReconciled, "reconciled"
	if deletion {
		waiting, failed, what = ReasonShootDeleting, ReasonShootDeleteFailed, "deletion"
		retrying, notRetrying, waitEvent, waitWhat = EventRetryingShootDeletion, EventNotRetryingShootDeletion, EventWaitingForShootDeleted, "deleted"
	}
	retries := pendingRetries(st, name, waiting)
	now := r.clock.Now()
	switch {
	case rp.shoot.GetMetadata().GetAnnotations()[AnnotationOperation] == OperationRetry || r.retried.taken(rp.shoot, now, r.syncPeriod):
		r.event(ctx, set, waitEvent, "Waiting for Shoot %s to be %s", full, waitWhat)
		r.setPending(st, name, waiting, keptRetries(st, name, waiting))
	case int(retries) < r.maxShootRetries:
		r.log.Info("retrying Shoot "+what, "managedSeedSet", keyOf(set).String(), "replica", full, "retry", retries+1)
		r.event(ctx, set, retrying, "Retrying Shoot %s %s", full, what)
		if err := r.annotate(ctx, rp.shoot, AnnotationOperation, OperationRetry); err != nil {
			return fmt.Errorf("retry Shoot %s: %w", full, err)
		}
		r.retried.remember(rp.shoot, now, r.syncPeriod)
		r.setPending(st, name, waiting, proto.Int32(retries+1))
	default:
		r.log.Info("not retrying Shoot "+what+" since max retries have been reached", "managedSeedSet", keyOf(set).String(),
			"replica", full, "maxRetries", r.maxShootRetries)
		r.event(ctx, set, notRetrying, "Not retrying Shoot %s %s since max retries have been reached", full, what)
		r.setPending(st, name, failed, proto.Int32(retries))
	}
	return nil
}

// createReplica creates the Shoot of a new replica; its ManagedSeed follows once the Shoot is reconciled.
func (r *Reconciler) createReplica(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet, st *seedmanagementv1alpha1.ManagedSeedSetStatus, ordinal int32) error {
	shoot := newShoot(set, ordinal)
	full := shoot.GetMetadata().GetNamespace() + "/" + shoot.GetMetadata().GetName()
	r.log.Info("creating Shoot", "managedSeedSet", keyOf(set).String(), "replica", full)
	r.event(ctx, set, EventCreatingShoot, "Creating Shoot %s", full)
	if err := r.create(ctx, r.shoots, shootKind, shoot); err != nil {
		return err
	}
	r.setPending(st, shoot.GetMetadata().GetName(), ReasonShootReconciling, nil)
	return nil
}

// deleteReplica deletes the replica's ManagedSeed when it has one, else its Shoot.
func (r *Reconciler) deleteReplica(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet, st *seedmanagementv1alpha1.ManagedSeedSetStatus, rp *replica) error {
	name, full := rp.name(), rp.fullName()
	log := r.log.With("managedSeedSet", keyOf(set).String(), "replica", full)
	if rp.status().managedSeedExists() {
		log.Info("deleting ManagedSeed")
		r.event(ctx, set, EventDeletingManagedSeed, "Deleting ManagedSeed %s", full)
		if _, _, err := r.managedSeeds.Delete(ctx, rp.managedSeed.GetMetadata().GetNamespace(), name, nil); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ManagedSeed %s: %w", full, err)
		}
		r.setPending(st, name, ReasonManagedSeedDeleting, nil)
		return nil
	}
	log.Info("deleting Shoot")
	r.event(ctx, set, EventDeletingShoot, "Deleting Shoot %s", full)
	if err := r.deleteShoot(ctx, rp.shoot); err != nil {
		return err
	}
	r.setPending(st, name, ReasonShootDeleting, nil)
	return nil
}

// deleteShoot confirms the deletion of a shoot, as Gardener requires, and deletes it.
func (r *Reconciler) deleteShoot(ctx context.Context, s *corev1beta1.Shoot) error {
	ns, name := s.GetMetadata().GetNamespace(), s.GetMetadata().GetName()
	if err := r.annotate(ctx, s, AnnotationConfirmDeletion, "true"); err != nil {
		return fmt.Errorf("confirm the deletion of Shoot %s/%s: %w", ns, name, err)
	}
	if _, _, err := r.shoots.Delete(ctx, ns, name, nil); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Shoot %s/%s: %w", ns, name, err)
	}
	return nil
}

// annotate sets an annotation on a shoot; a shoot that is gone is fine.
func (r *Reconciler) annotate(ctx context.Context, s *corev1beta1.Shoot, key, value string) error {
	_, err := r.shoots.GuaranteedUpdate(ctx, s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), false,
		func(cur store.Object) (store.Object, error) {
			md := cur.GetMetadata()
			if md.GetAnnotations()[key] == value {
				return nil, nil
			}
			if md.Annotations == nil {
				md.Annotations = map[string]string{}
			}
			md.Annotations[key] = value
			return cur, nil
		})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// create stores a replica's new object as the API would: with the kind's defaults, after its admission checks. An
// object that exists already is fine.
func (r *Reconciler) create(ctx context.Context, c *store.Collection, gk schema.GroupKind, obj store.Object) error {
	p := r.plugins.For(obj)
	if p.Default != nil {
		p.Default(obj)
	}
	if p.Validate != nil {
		if errs := p.Validate(ctx, r.admission, obj, nil); len(errs) > 0 {
			return apierrors.NewInvalid(gk, obj.GetMetadata().GetName(), errs)
		}
	}
	if p.Admit != nil {
		if err := p.Admit(ctx, r.admission, obj, nil); err != nil {
			return err
		}
	}
	if _, err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s/%s: %w", gk.Kind, obj.GetMetadata().GetNamespace(), obj.GetMetadata().GetName(), err)
	}
	return nil
}

// replicas reads the set's replicas: every Shoot in its namespace its selector matches, with the ManagedSeed and the
// Seed of the same name. The shoots are read as etcd holds them now, not as the cache may still have them, so that a
// new leader does not create a replica the previous one created (Gardener cross-checks its cache with the API server).
func (r *Reconciler) replicas(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet) ([]*replica, error) {
	sel, err := selectorOf(set.GetSpec().GetSelector())
	if err != nil {
		return nil, err
	}
	ns := set.GetMetadata().GetNamespace()
	if err := r.shoots.Sync(ctx); err != nil {
		return nil, err
	}
	shoots, err := r.shoots.List(ctx, ns, store.ListOptions{Labels: sel})
	if err != nil {
		return nil, fmt.Errorf("list Shoots: %w", err)
	}
	managedSeeds, err := r.managedSeeds.List(ctx, ns, store.ListOptions{Labels: sel})
	if err != nil {
		return nil, fmt.Errorf("list ManagedSeeds: %w", err)
	}
	seeds, err := r.seeds.List(ctx, "", store.ListOptions{Labels: sel})
	if err != nil {
		return nil, fmt.Errorf("list Seeds: %w", err)
	}
	msByName := map[string]*seedmanagementv1alpha1.ManagedSeed{}
	for _, o := range managedSeeds.Items {
		msByName[o.GetMetadata().GetName()] = o.(*seedmanagementv1alpha1.ManagedSeed)
	}
	seedByName := map[string]*corev1beta1.Seed{}
	for _, o := range seeds.Items {
		seedByName[o.GetMetadata().GetName()] = o.(*corev1beta1.Seed)
	}
	var out []*replica
	for _, o := range shoots.Items {
		name := o.GetMetadata().GetName()
		rp := &replica{shoot: o.(*corev1beta1.Shoot), managedSeed: msByName[name], seed: seedByName[name]}
		if rp.seed != nil {
			if rp.hasScheduledShoots, err = r.hasScheduledShoots(ctx, name); err != nil {
				return nil, err
			}
		}
		out = append(out, rp)
	}
	return out, nil
}

// hasScheduledShoots says whether any shoot is scheduled on the seed.
func (r *Reconciler) hasScheduledShoots(ctx context.Context, seed string) (bool, error) {
	res, err := r.shoots.List(ctx, "", store.ListOptions{Fields: fields.OneTermEqualSelector("spec.seedName", seed), Limit: 1})
	if err != nil {
		return false, fmt.Errorf("list the Shoots of Seed %s: %w", seed, err)
	}
	return len(res.Items) > 0, nil
}

func (r *Reconciler) addFinalizer(ctx context.Context, key controller.Key) (*seedmanagementv1alpha1.ManagedSeedSet, error) {
	out, err := r.sets.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if md.GetDeletionTimestamp() != nil || slices.Contains(md.GetFinalizers(), FinalizerGardener) {
			return nil, nil
		}
		md.Finalizers = append(md.Finalizers, FinalizerGardener)
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return out.(*seedmanagementv1alpha1.ManagedSeedSet), nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, key controller.Key) error {
	_, err := r.sets.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if !slices.Contains(md.GetFinalizers(), FinalizerGardener) {
			return nil, nil
		}
		md.Finalizers = slices.DeleteFunc(md.Finalizers, func(f string) bool { return f == FinalizerGardener })
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Reconciler) writeStatus(ctx context.Context, key controller.Key, st *seedmanagementv1alpha1.ManagedSeedSetStatus) error {
	if st == nil {
		return nil
	}
	_, err := r.sets.GuaranteedUpdate(ctx, key.Namespace, key.Name, true, func(cur store.Object) (store.Object, error) {
		cur.(*seedmanagementv1alpha1.ManagedSeedSet).Status = proto.CloneOf(st)
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Reconciler) event(ctx context.Context, set *seedmanagementv1alpha1.ManagedSeedSet, reason, format string, args ...any) {
	r.recorder.Eventf(ctx, set, controller.EventNormal, reason, format, args...)
}

// setPending makes the replica name pending for reason with retries; since moves only when one of them changes.
func (r *Reconciler) setPending(st *seedmanagementv1alpha1.ManagedSeedSetStatus, name, reason string, retries *int32) {
	cur := st.GetPendingReplica()
	if cur != nil && cur.GetName() == name && cur.GetReason() == reason && equalPtr(cur.Retries, retries) {
		return
	}
	st.PendingReplica = &seedmanagementv1alpha1.PendingReplica{Name: name, Reason: reason,
		Since: timestamppb.New(r.clock.Now().Truncate(time.Second)), Retries: retries}
}

// pendingRetries is how often the pending replica name was retried for reason (0 when it is not pending for it).
func pendingRetries(st *seedmanagementv1alpha1.ManagedSeedSetStatus, name, reason string) int32 {
	if p := st.GetPendingReplica(); p != nil && p.GetName() == name && p.GetReason() == reason {
		return p.GetRetries()
	}
	return 0
}

// keptRetries are the retries of the pending replica name while it stays pending for reason (nil otherwise).
func keptRetries(st *seedmanagementv1alpha1.ManagedSeedSetStatus, name, reason string) *int32 {
	if p := st.GetPendingReplica(); p != nil && p.GetName() == name && p.GetReason() == reason && p.Retries != nil {
		return proto.Int32(p.GetRetries())
	}
	return nil
}

func equalPtr(a, b *int32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// pendingReplica is the replica status.pendingReplica names, if it still exists.
func pendingReplica(rs []*replica, st *seedmanagementv1alpha1.ManagedSeedSetStatus) *replica {
	p := st.GetPendingReplica()
	if p == nil {
		return nil
	}
	for _, rp := range rs {
		if rp.name() == p.GetName() {
			return rp
		}
	}
	return nil
}

// nextOrdinal is the ordinal of the next replica: status.nextReplicaNumber, or past the highest existing ordinal
// (rs is sorted by ordinal).
func nextOrdinal(rs []*replica, st *seedmanagementv1alpha1.ManagedSeedSetStatus) int32 {
	next := st.GetNextReplicaNumber()
	if len(rs) > 0 {
		next = max(next, rs[len(rs)-1].ordinal()+1)
	}
	return next
}

// desiredReplicas is spec.replicas, defaulted to 1 as the API does.
func desiredReplicas(set *seedmanagementv1alpha1.ManagedSeedSet) int32 {
	if spec := set.GetSpec(); spec != nil && spec.Replicas != nil {
		return *spec.Replicas
	}
	return 1
}

func keyOf(set *seedmanagementv1alpha1.ManagedSeedSet) controller.Key {
	return controller.Key{Namespace: set.GetMetadata().GetNamespace(), Name: set.GetMetadata().GetName()}
}
