package managedseedset_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	ms "github.com/trellis-dev/trellis/hub/controller/managedseedset"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// rep describes one replica of a case as the store holds it before the reconciliation.
type rep struct {
	ordinal int
	// shoot: "reconciling" (no outcome yet), "succeeded", "failed", "deleting", "deleteFailed".
	shoot string
	// health is the shoot's status label ("": none, read as progressing).
	health string
	// retry: the shoot still carries gardener.cloud/operation=retry.
	retry bool
	// managedSeed: "" (none), "preparing", "registered", "deleting".
	managedSeed string
	// seed: "" (none), "ready", "notReady".
	seed        string
	protected   bool
	hostsShoots bool
}

// ready is a replica that counts as ready: registered, seed ready, shoot healthy.
func ready(i int) rep {
	return rep{ordinal: i, shoot: "succeeded", health: "healthy", managedSeed: "registered", seed: "ready"}
}

// pending is a status.pendingReplica of a case; since is an hour before the case's clock.
type pending struct {
	ordinal int
	reason  string
	retries *int32
}

func retries(n int32) *int32 { return &n }

// build stores the replica as the controller and the agents would have left it.
func (e *env) build(set *seedmanagementv1alpha1.ManagedSeedSet, r rep) {
	e.t.Helper()
	name := replica(r.ordinal)
	owner := &metav1.OwnerReference{ApiVersion: ms.APIVersion, Kind: ms.Kind, Name: setName, Uid: set.GetMetadata().GetUid(), Controller: proto.Bool(true)}
	labels := map[string]string{setLabel: setName}
	if r.health != "" {
		labels[ms.LabelShootStatus] = r.health
	}
	annotations := map[string]string{}
	if r.retry {
		annotations[ms.AnnotationOperation] = ms.OperationRetry
	}
	if r.protected {
		annotations[ms.AnnotationProtectFromDeletion] = "true"
	}
	shoot := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: garden, Name: name, Labels: labels, Annotations: annotations,
		Finalizers: []string{"gardener"}, OwnerReferences: []*metav1.OwnerReference{owner}},
		Spec: proto.CloneOf(set.GetSpec().GetShootTemplate().GetSpec())}
	controllertest.Create(e.t, e.shoots, shoot)
	op := map[string]*metav1.LastOperation{
		"succeeded":    {Type: "Create", State: "Succeeded"},
		"failed":       {Type: "Create", State: "Failed"},
		"deleting":     {Type: "Delete", State: "Processing"},
		"deleteFailed": {Type: "Delete", State: "Failed"},
	}[r.shoot]
	if strings.HasPrefix(r.shoot, "delet") {
		controllertest.Delete(e.t, e.shoots, garden, name)
	}
	if op != nil {
		controllertest.Update(e.t, e.shoots, garden, name, true, func(s *corev1beta1.Shoot) {
			s.Status = &corev1beta1.ShootStatus{ObservedGeneration: proto.Int64(s.GetMetadata().GetGeneration()), LastOperation: op}
		})
	}
	if r.managedSeed != "" {
		msAnnotations := map[string]string{}
		if r.protected {
			msAnnotations[ms.AnnotationProtectFromDeletion] = "true"
		}
		controllertest.Create(e.t, e.managedSeeds, &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: garden, Name: name,
			Labels: map[string]string{setLabel: setName}, Annotations: msAnnotations, Finalizers: []string{"gardener"},
			OwnerReferences: []*metav1.OwnerReference{owner}},
			Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: name}}})
		switch r.managedSeed {
		case "registered":
			controllertest.Update(e.t, e.managedSeeds, garden, name, true, func(m *seedmanagementv1alpha1.ManagedSeed) {
				m.Status = &seedmanagementv1alpha1.ManagedSeedStatus{ObservedGeneration: proto.Int64(1),
					Conditions: []*metav1.Condition{{Type: ms.ConditionSeedRegistered, Status: "True"}}}
			})
		case "deleting":
			controllertest.Delete(e.t, e.managedSeeds, garden, name)
		}
	}
	if r.seed != "" {
		e.seedReady(name, r.seed == "ready")
	}
	if r.hostsShoots {
		controllertest.Create(e.t, e.shoots, &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "hosted-on-" + name},
			Spec: &corev1beta1.ShootSpec{SeedName: proto.String(name), Region: "local"}})
	}
}

// TestRules: each case stores a set and its replicas on the real store, reconciles once on a fake clock and checks
// the step Gardener's controller takes: which object it creates, deletes or retries, the pending replica, the
// counters and the Events.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		// mutate changes the set before it is created.
		mutate   func(*seedmanagementv1alpha1.ManagedSeedSet)
		deleting bool
		next     int32
		pending  *pending
		reps     []rep
		// maxRetries is maxShootRetries (default 3).
		maxRetries *int

		wantPending *pending // nil: none
		wantErr     string
		// wantCreated are new objects: "shoot-N" or "managedseed-N"; wantDeleted those marked for deletion.
		wantCreated, wantDeleted []string
		wantRetried              []int // shoots newly annotated with the retry
		wantEvent                string
		wantReplicas, wantReady  int32
		wantNext                 int32
		wantGone                 bool // the set lost its finalizer and is gone
		check                    func(t *testing.T, e *env)
	}{
		// Scale out, one replica at a time.
		{name: "a new set creates the first shoot and nothing else", replicas: 3,
			wantCreated: []string{"shoot-0"}, wantPending: &pending{0, ms.ReasonShootReconciling, nil}, wantEvent: ms.EventCreatingShoot,
			wantReplicas: 1, wantNext: 1, check: checkNewShoot},
		{name: "a shoot the API would refuse is not created", replicas: 3,
			mutate:  func(s *seedmanagementv1alpha1.ManagedSeedSet) { s.Spec.ShootTemplate.Spec.Region = "nowhere" },
			wantErr: `spec.region: Unsupported value: "nowhere"`, wantEvent: ms.EventReconcileError},
		{name: "a reconciling shoot is waited for", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, nil},
			reps: []rep{{ordinal: 0, shoot: "reconciling"}}, wantPending: &pending{0, ms.ReasonShootReconciling, nil},
			wantEvent: ms.EventWaitingForShootReconciled, wantReplicas: 1, wantNext: 1, check: checkSinceKept},
		{name: "a reconciled shoot gets its ManagedSeed", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, nil},
			reps: []rep{{ordinal: 0, shoot: "succeeded", health: "healthy"}}, wantCreated: []string{"managedseed-0"},
			wantPending: &pending{0, ms.ReasonManagedSeedPreparing, nil}, wantEvent: ms.EventCreatingManagedSeed,
			wantReplicas: 1, wantNext: 1, check: checkNewManagedSeed},
		{name: "a ManagedSeed is waited for until it registered its seed", replicas: 3, next: 1, pending: &pending{0, ms.ReasonManagedSeedPreparing, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "healthy", managedSeed: "preparing"}},
			wantPending: &pending{0, ms.ReasonManagedSeedPreparing, nil}, wantEvent: ms.EventWaitingForManagedSeedRegistered, wantReplicas: 1, wantNext: 1},
		{name: "a registered seed is waited for until it is ready", replicas: 3, next: 1, pending: &pending{0, ms.ReasonManagedSeedPreparing, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "healthy", managedSeed: "registered", seed: "notReady"}},
			wantPending: &pending{0, ms.ReasonSeedNotReady, nil}, wantEvent: ms.EventWaitingForSeedReady, wantReplicas: 1, wantNext: 1},
		{name: "a registered seed without a Seed yet is not ready", replicas: 3, next: 1, pending: &pending{0, ms.ReasonManagedSeedPreparing, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "healthy", managedSeed: "registered"}},
			wantPending: &pending{0, ms.ReasonSeedNotReady, nil}, wantReplicas: 1, wantNext: 1},
		{name: "the shoot must be healthy", replicas: 3, next: 1, pending: &pending{0, ms.ReasonSeedNotReady, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "progressing", managedSeed: "registered", seed: "ready"}},
			wantPending: &pending{0, ms.ReasonShootNotHealthy, nil}, wantEvent: ms.EventWaitingForShootHealthy, wantReplicas: 1, wantNext: 1},
		{name: "a ready replica lets the next one start", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootNotHealthy, nil},
			reps: []rep{ready(0)}, wantCreated: []string{"shoot-1"}, wantPending: &pending{1, ms.ReasonShootReconciling, nil},
			wantReplicas: 2, wantReady: 1, wantNext: 2},
		{name: "nextReplicaNumber only grows", replicas: 2, next: 5, reps: []rep{ready(0)},
			wantCreated: []string{"shoot-5"}, wantPending: &pending{5, ms.ReasonShootReconciling, nil}, wantReplicas: 2, wantReady: 1, wantNext: 6},
		{name: "the next ordinal is past the highest one", replicas: 2, next: 0, reps: []rep{ready(3)},
			wantCreated: []string{"shoot-4"}, wantPending: &pending{4, ms.ReasonShootReconciling, nil}, wantReplicas: 2, wantReady: 1, wantNext: 5},
		{name: "the pending replica holds the next one back", replicas: 3, next: 2, pending: &pending{1, ms.ReasonShootNotHealthy, nil},
			reps:        []rep{ready(0), {ordinal: 1, shoot: "succeeded", health: "unhealthy", managedSeed: "registered", seed: "ready"}},
			wantPending: &pending{1, ms.ReasonShootNotHealthy, nil}, wantReplicas: 2, wantReady: 1, wantNext: 2, check: checkSinceKept},
		// As in Gardener, only the pending replica holds scale-out back; the others are looked at when the count is
		// reached.
		{name: "a replica that is not ready but not pending does not hold scale-out back", replicas: 3, next: 2,
			reps:        []rep{ready(0), {ordinal: 1, shoot: "succeeded", health: "unhealthy", managedSeed: "registered", seed: "ready"}},
			wantCreated: []string{"shoot-2"}, wantPending: &pending{2, ms.ReasonShootReconciling, nil}, wantReplicas: 3, wantReady: 1, wantNext: 3},
		{name: "when the count is reached the replicas that are not ready are waited for", replicas: 2, next: 2,
			reps:        []rep{ready(0), {ordinal: 1, shoot: "succeeded", health: "unhealthy", managedSeed: "registered", seed: "ready"}},
			wantPending: &pending{1, ms.ReasonShootNotHealthy, nil}, wantEvent: ms.EventWaitingForShootHealthy, wantReplicas: 2, wantReady: 1, wantNext: 2},
		{name: "all ready: nothing pending", replicas: 2, next: 2, pending: &pending{1, ms.ReasonSeedNotReady, nil},
			reps: []rep{ready(0), ready(1)}, wantReplicas: 2, wantReady: 2, wantNext: 2},

		// Retries.
		{name: "a failed shoot is retried", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, nil},
			reps: []rep{{ordinal: 0, shoot: "failed"}}, wantRetried: []int{0},
			wantPending: &pending{0, ms.ReasonShootReconciling, retries(1)}, wantEvent: ms.EventRetryingShootReconciliation, wantReplicas: 1, wantNext: 1},
		{name: "the retries are counted", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, retries(2)},
			reps: []rep{{ordinal: 0, shoot: "failed"}}, wantRetried: []int{0},
			wantPending: &pending{0, ms.ReasonShootReconciling, retries(3)}, wantReplicas: 1, wantNext: 1},
		{name: "after maxShootRetries the shoot is left failed", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, retries(3)},
			reps: []rep{{ordinal: 0, shoot: "failed"}}, wantPending: &pending{0, ms.ReasonShootReconcileFailed, retries(3)},
			wantEvent: ms.EventNotRetryingShootReconciliation, wantReplicas: 1, wantNext: 1},
		// Gardener counts the retries of the reason ShootReconciling only: the next look at a set left at
		// ShootReconcileFailed (after the sync period: the shoot's changes do not trigger one while it stays failed)
		// starts a new round of retries.
		{name: "a set left at ShootReconcileFailed starts a new round of retries when it is looked at again", replicas: 3, next: 1,
			pending: &pending{0, ms.ReasonShootReconcileFailed, retries(3)}, reps: []rep{{ordinal: 0, shoot: "failed"}}, wantRetried: []int{0},
			wantPending: &pending{0, ms.ReasonShootReconciling, retries(1)}, wantReplicas: 1, wantNext: 1},
		{name: "maxShootRetries 0: never retried", replicas: 3, next: 1, maxRetries: ptrInt(0), pending: &pending{0, ms.ReasonShootReconciling, nil},
			reps: []rep{{ordinal: 0, shoot: "failed"}}, wantPending: &pending{0, ms.ReasonShootReconcileFailed, retries(0)}, wantReplicas: 1, wantNext: 1},
		{name: "a retry the agent has not taken yet is not counted again", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, retries(1)},
			reps: []rep{{ordinal: 0, shoot: "failed", retry: true}}, wantPending: &pending{0, ms.ReasonShootReconciling, retries(1)},
			wantEvent: ms.EventWaitingForShootReconciled, wantReplicas: 1, wantNext: 1},
		{name: "waiting for a retried shoot keeps the count", replicas: 3, next: 1, pending: &pending{0, ms.ReasonShootReconciling, retries(2)},
			reps: []rep{{ordinal: 0, shoot: "reconciling"}}, wantPending: &pending{0, ms.ReasonShootReconciling, retries(2)}, wantReplicas: 1, wantNext: 1},
		{name: "a failed deletion is retried", replicas: 0, next: 1, pending: &pending{0, ms.ReasonShootDeleting, nil},
			reps: []rep{{ordinal: 0, shoot: "deleteFailed"}}, wantRetried: []int{0},
			wantPending: &pending{0, ms.ReasonShootDeleting, retries(1)}, wantEvent: ms.EventRetryingShootDeletion, wantReplicas: 1, wantNext: 1},
		{name: "a failed deletion is left after maxShootRetries", replicas: 0, next: 1, pending: &pending{0, ms.ReasonShootDeleting, retries(3)},
			reps: []rep{{ordinal: 0, shoot: "deleteFailed"}}, wantPending: &pending{0, ms.ReasonShootDeleteFailed, retries(3)},
			wantEvent: ms.EventNotRetryingShootDeletion, wantReplicas: 1, wantNext: 1},

		// Scale in: one replica at a time, lowest priority first.
		{name: "scale in: among equals the lowest ordinal goes, its ManagedSeed first", replicas: 1, next: 3,
			reps: []rep{ready(0), ready(1), ready(2)}, wantDeleted: []string{"managedseed-0"},
			wantPending: &pending{0, ms.ReasonManagedSeedDeleting, nil}, wantEvent: ms.EventDeletingManagedSeed,
			wantReplicas: 3, wantReady: 2, wantNext: 3},
		{name: "scale in: the worse shoot health goes first", replicas: 1, next: 3, reps: []rep{ready(0),
			{ordinal: 1, shoot: "succeeded", health: "progressing", managedSeed: "registered", seed: "ready"},
			{ordinal: 2, shoot: "succeeded", health: "unhealthy", managedSeed: "registered", seed: "ready"}},
			wantDeleted: []string{"managedseed-2"}, wantPending: &pending{2, ms.ReasonManagedSeedDeleting, nil}, wantReplicas: 3, wantReady: 1, wantNext: 3},
		{name: "scale in: a seed that is not ready goes before a worse health", replicas: 1, next: 3, reps: []rep{
			{ordinal: 0, shoot: "succeeded", health: "unhealthy", managedSeed: "registered", seed: "ready"},
			{ordinal: 1, shoot: "succeeded", health: "healthy", managedSeed: "registered", seed: "notReady"}, ready(2)},
			wantDeleted: []string{"managedseed-1"}, wantPending: &pending{1, ms.ReasonManagedSeedDeleting, nil}, wantReplicas: 3, wantReady: 1, wantNext: 3},
		{name: "scale in: a replica without a ManagedSeed goes first, its shoot confirmed", replicas: 2, next: 3,
			pending: &pending{2, ms.ReasonShootReconciling, nil}, reps: []rep{ready(0), ready(1), {ordinal: 2, shoot: "reconciling"}},
			wantDeleted: []string{"shoot-2"}, wantPending: &pending{2, ms.ReasonShootDeleting, nil}, wantEvent: ms.EventDeletingShoot,
			wantReplicas: 3, wantReady: 2, wantNext: 3, check: checkConfirmed(2)},
		{name: "scale in: a failed shoot goes before a reconciling one", replicas: 1, next: 3,
			reps:        []rep{ready(0), {ordinal: 1, shoot: "reconciling"}, {ordinal: 2, shoot: "failed"}},
			wantDeleted: []string{"shoot-2"}, wantPending: &pending{2, ms.ReasonShootDeleting, nil}, wantReplicas: 3, wantReady: 1, wantNext: 3},
		{name: "scale in: protected replicas and seeds that host shoots stay", replicas: 2, next: 3,
			reps:        []rep{with(ready(0), func(r *rep) { r.protected = true }), with(ready(1), func(r *rep) { r.hostsShoots = true }), ready(2)},
			wantDeleted: []string{"managedseed-2"}, wantPending: &pending{2, ms.ReasonManagedSeedDeleting, nil}, wantReplicas: 3, wantReady: 2, wantNext: 3},
		{name: "scale in: nothing deletable is an error", replicas: 0, next: 1,
			reps: []rep{with(ready(0), func(r *rep) { r.hostsShoots = true })}, wantErr: "no deletable replicas found",
			wantEvent: ms.EventReconcileError, wantReplicas: 1, wantReady: 1, wantNext: 1},
		{name: "scale in: a ManagedSeed being deleted is waited for", replicas: 1, next: 2, pending: &pending{0, ms.ReasonManagedSeedDeleting, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "healthy", managedSeed: "deleting", seed: "ready"}, ready(1)},
			wantPending: &pending{0, ms.ReasonManagedSeedDeleting, nil}, wantEvent: ms.EventWaitingForManagedSeedDeleted, wantReplicas: 2, wantReady: 1, wantNext: 2},
		{name: "scale in: once its ManagedSeed is gone the shoot goes", replicas: 1, next: 2, pending: &pending{0, ms.ReasonManagedSeedDeleting, nil},
			reps:        []rep{{ordinal: 0, shoot: "succeeded", health: "healthy"}, ready(1)},
			wantDeleted: []string{"shoot-0"}, wantPending: &pending{0, ms.ReasonShootDeleting, nil}, wantReplicas: 2, wantReady: 1, wantNext: 2,
			check: checkConfirmed(0)},
		{name: "scale in: a shoot being deleted is waited for", replicas: 1, next: 2, pending: &pending{0, ms.ReasonShootDeleting, nil},
			reps:        []rep{{ordinal: 0, shoot: "deleting"}, ready(1)},
			wantPending: &pending{0, ms.ReasonShootDeleting, nil}, wantEvent: ms.EventWaitingForShootDeleted, wantReplicas: 2, wantReady: 1, wantNext: 2},
		{name: "scale in done: the pending replica is cleared", replicas: 1, next: 2, pending: &pending{0, ms.ReasonShootDeleting, nil},
			reps: []rep{ready(1)}, wantReplicas: 1, wantReady: 1, wantNext: 2},

		// Deletion of the set.
		{name: "a set being deleted scales in to zero", replicas: 2, deleting: true, next: 1, reps: []rep{ready(0)},
			wantDeleted: []string{"managedseed-0"}, wantPending: &pending{0, ms.ReasonManagedSeedDeleting, nil}, wantReplicas: 1, wantReady: 0, wantNext: 1},
		{name: "a set being deleted without replicas loses its finalizer", replicas: 2, deleting: true, next: 1, wantGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			maxRetries := 3
			if tc.maxRetries != nil {
				maxRetries = *tc.maxRetries
			}
			r := e.reconciler(maxRetries)
			set := newSet(tc.replicas)
			if tc.mutate != nil {
				tc.mutate(set)
			}
			set = e.createSet(set)
			if tc.deleting || tc.pending != nil || tc.next > 0 {
				controllertest.Update(t, e.sets, garden, setName, true, func(s *seedmanagementv1alpha1.ManagedSeedSet) {
					s.Status = &seedmanagementv1alpha1.ManagedSeedSetStatus{NextReplicaNumber: proto.Int32(tc.next)}
					if p := tc.pending; p != nil {
						s.Status.PendingReplica = &seedmanagementv1alpha1.PendingReplica{Name: replica(p.ordinal), Reason: p.reason,
							Retries: p.retries, Since: timestamppb.New(e.clk.Now().Add(-time.Hour).Truncate(time.Second))}
					}
				})
			}
			if tc.deleting {
				controllertest.Update(t, e.sets, garden, setName, false, func(s *seedmanagementv1alpha1.ManagedSeedSet) {
					s.Metadata.Finalizers = []string{ms.FinalizerGardener}
				})
				controllertest.Delete(t, e.sets, garden, setName)
			}
			for _, rp := range tc.reps {
				e.build(set, rp)
			}
			before := e.objects()

			res, err := e.reconcile(r)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case err == nil && !tc.wantGone && res.RequeueAfter != syncPeriod:
				t.Errorf("requeue after %v, want the sync period %v", res.RequeueAfter, syncPeriod)
			}

			after := e.objects()
			var created, deleted []string
			for k, o := range after {
				if b, ok := before[k]; !ok {
					created = append(created, k)
				} else if o.deleting && !b.deleting {
					deleted = append(deleted, k)
				}
			}
			for k := range before {
				if _, ok := after[k]; !ok {
					deleted = append(deleted, k)
				}
			}
			slices.Sort(created)
			slices.Sort(deleted)
			if !slices.Equal(created, tc.wantCreated) {
				t.Errorf("created %q, want %q", created, tc.wantCreated)
			}
			if !slices.Equal(deleted, tc.wantDeleted) {
				t.Errorf("deleted %q, want %q", deleted, tc.wantDeleted)
			}
			var retried []int
			for _, rp := range tc.reps {
				if s := e.shoot(replica(rp.ordinal)); !rp.retry && s.GetMetadata().GetAnnotations()[ms.AnnotationOperation] == ms.OperationRetry {
					retried = append(retried, rp.ordinal)
				}
			}
			if !slices.Equal(retried, tc.wantRetried) {
				t.Errorf("retried shoots %v, want %v", retried, tc.wantRetried)
			}
			if tc.wantEvent != "" && e.eventCount(tc.wantEvent) == 0 {
				t.Errorf("no %s event; events: %v", tc.wantEvent, controllertest.Events(t, e.events, garden, setName, ""))
			}

			got := e.set()
			if tc.wantGone {
				if got != nil {
					t.Fatalf("the set is still there: finalizers %q", got.GetMetadata().GetFinalizers())
				}
				return
			}
			if !tc.deleting && !slices.Contains(got.GetMetadata().GetFinalizers(), ms.FinalizerGardener) {
				t.Error("the set has no finalizer")
			}
			st := got.GetStatus()
			if st.GetObservedGeneration() != got.GetMetadata().GetGeneration() {
				t.Errorf("observedGeneration %d, generation %d", st.GetObservedGeneration(), got.GetMetadata().GetGeneration())
			}
			if st.GetReplicas() != tc.wantReplicas || st.GetReadyReplicas() != tc.wantReady || st.GetNextReplicaNumber() != tc.wantNext {
				t.Errorf("status %s, want replicas=%d ready=%d next=%d", describe(got), tc.wantReplicas, tc.wantReady, tc.wantNext)
			}
			p := st.GetPendingReplica()
			switch w := tc.wantPending; {
			case w == nil && p != nil:
				t.Errorf("pending %s, want none", describe(got))
			case w != nil && (p.GetName() != replica(w.ordinal) || p.GetReason() != w.reason || !equalRetries(p.Retries, w.retries)):
				t.Errorf("pending %s, want %s/%s retries=%v", describe(got), replica(w.ordinal), w.reason, w.retries)
			case w != nil && p.GetSince() == nil:
				t.Error("pendingReplica.since is not set")
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func ptrInt(n int) *int { return &n }

func with(r rep, f func(*rep)) rep { f(&r); return r }

func equalRetries(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// object is what a case compares before and after: existence and deletion of shoots and ManagedSeeds.
type object struct{ deleting bool }

func (e *env) objects() map[string]object {
	e.t.Helper()
	out := map[string]object{}
	for prefix, c := range map[string]*store.Collection{"shoot-": e.shoots, "managedseed-": e.managedSeeds} {
		res, err := c.List(e.ctx, garden, store.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, o := range res.Items {
			md := o.GetMetadata()
			out[prefix+strings.TrimPrefix(md.GetName(), setName+"-")] = object{deleting: md.GetDeletionTimestamp() != nil}
		}
	}
	return out
}

// checkNewShoot: the new shoot is the template's, named, labelled, owned, with its placeholder replaced and the API's
// defaults (the Kubernetes version completed from the cloud profile).
func checkNewShoot(t *testing.T, e *env) {
	s := e.shoot(replica(0))
	md := s.GetMetadata()
	if md.GetLabels()[setLabel] != setName || md.GetAnnotations()["example.com/note"] != "from the template" {
		t.Errorf("labels %v, annotations %v: not the template's", md.GetLabels(), md.GetAnnotations())
	}
	refs := md.GetOwnerReferences()
	if len(refs) != 1 || refs[0].GetKind() != ms.Kind || refs[0].GetApiVersion() != ms.APIVersion || refs[0].GetName() != setName ||
		!refs[0].GetController() || refs[0].GetUid() != e.set().GetMetadata().GetUid() {
		t.Errorf("owner references %v, want the set as controller", refs)
	}
	if d := s.GetSpec().GetDns().GetDomain(); d != replica(0)+".example.com" {
		t.Errorf("dns domain %q, want the placeholder replaced", d)
	}
	if v := s.GetSpec().GetKubernetes().GetVersion(); v != "1.33.5" {
		t.Errorf("kubernetes version %q, want 1.33.5 (admission's default from the cloud profile)", v)
	}
	if s.GetSpec().GetPurpose() != "evaluation" {
		t.Errorf("purpose %q, want the API's default", s.GetSpec().GetPurpose())
	}
	if msgs := e.eventMessages(ms.EventCreatingShoot); !slices.Equal(msgs, []string{"Creating Shoot garden/" + replica(0)}) {
		t.Errorf("events %q", msgs)
	}
}

// checkNewManagedSeed: the ManagedSeed names its shoot, carries the template's labels and gardenlet, with the
// placeholder in the seed template replaced and the API's defaults, and is owned by the set.
func checkNewManagedSeed(t *testing.T, e *env) {
	m := e.managedSeed(replica(0))
	if m.GetSpec().GetShoot().GetName() != replica(0) || m.GetMetadata().GetLabels()[setLabel] != setName {
		t.Errorf("ManagedSeed %v", m)
	}
	if name := m.GetMetadata().GetOwnerReferences(); len(name) != 1 || name[0].GetName() != setName || !name[0].GetController() {
		t.Errorf("owner references %v", name)
	}
	raw := string(m.GetSpec().GetGardenlet().GetConfig().GetRaw())
	if !strings.Contains(raw, `"domain":"ingress.`+replica(0)+`.example.com"`) || strings.Contains(raw, "replica-name") {
		t.Errorf("gardenlet config %s: want the ingress domain of the replica", raw)
	}
	if m.GetSpec().GetGardenlet().GetBootstrap() != "BootstrapToken" || !m.GetSpec().GetGardenlet().GetMergeWithParent() {
		t.Errorf("gardenlet %v: want the API's defaults", m.GetSpec().GetGardenlet())
	}
}

// checkSinceKept: waiting for the same reason does not move pendingReplica.since.
func checkSinceKept(t *testing.T, e *env) {
	since := e.set().GetStatus().GetPendingReplica().GetSince().AsTime()
	if want := e.clk.Now().Add(-time.Hour).Truncate(time.Second); !since.Equal(want) {
		t.Errorf("since %v, want it kept at %v", since, want)
	}
}

// checkConfirmed: a deleted shoot carries Gardener's deletion confirmation.
func checkConfirmed(i int) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) {
		if s := e.shoot(replica(i)); s.GetMetadata().GetAnnotations()[ms.AnnotationConfirmDeletion] != "true" {
			t.Errorf("shoot %s deleted without confirmation: %v", replica(i), s.GetMetadata().GetAnnotations())
		}
	}
}

// TestRetryTakenIsCountedOnce: the agent takes a retry in two writes, the annotation's removal and then its new
// operation; a reconciliation in between sees the failure it retried without the annotation and must not retry and
// count it again. A new failure (a new operation) is counted.
func TestRetryTakenIsCountedOnce(t *testing.T) {
	e := newEnv(t)
	r := e.reconciler(3)
	set := e.createSet(newSet(2))
	controllertest.Update(t, e.sets, garden, setName, true, func(s *seedmanagementv1alpha1.ManagedSeedSet) {
		s.Status = &seedmanagementv1alpha1.ManagedSeedSetStatus{NextReplicaNumber: proto.Int32(1),
			PendingReplica: &seedmanagementv1alpha1.PendingReplica{Name: replica(0), Reason: ms.ReasonShootReconciling}}
	})
	e.build(set, rep{ordinal: 0, shoot: "failed"})
	step := func(wantRetries int32, wantAnnotated bool) {
		t.Helper()
		if _, err := e.reconcile(r); err != nil {
			t.Fatal(err)
		}
		p := e.set().GetStatus().GetPendingReplica()
		annotated := e.shoot(replica(0)).GetMetadata().GetAnnotations()[ms.AnnotationOperation] == ms.OperationRetry
		if p.GetReason() != ms.ReasonShootReconciling || p.GetRetries() != wantRetries || annotated != wantAnnotated {
			t.Fatalf("pending %s, retry annotation %t; want retries %d, annotation %t", describe(e.set()), annotated, wantRetries, wantAnnotated)
		}
	}
	takeRetry := func() {
		controllertest.Update(t, e.shoots, garden, replica(0), false, func(s *corev1beta1.Shoot) {
			delete(s.Metadata.Annotations, ms.AnnotationOperation)
		})
	}

	step(1, true)
	takeRetry()
	step(1, false) // the agent has not reported the retried operation yet
	step(1, false)
	e.agentShoot(replica(0), "Create", "Failed", "unhealthy") // the retried operation failed
	step(2, true)
	if got := e.eventCount(ms.EventRetryingShootReconciliation); got != 2 {
		t.Errorf("%d RetryingShootReconciliation events, want 2", got)
	}
}
