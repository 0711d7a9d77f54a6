package managedseedset_test

import (
	"fmt"
	"github.com/trellis-dev/trellis/hub/admission"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	ms "github.com/trellis-dev/trellis/hub/controller/managedseedset"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// quiet is how long a test watches that the controller does nothing more.
const quiet = 300 * time.Millisecond

// start runs the controller on the env's registry and fake clock until the test ends.
func (e *env) start(maxRetries int) {
	e.t.Helper()
	g, err := ms.New(ms.Config{Source: e.reg, Admission: admission.Builtin(), Clock: e.clk, MaxShootRetries: &maxRetries})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(g) != 1 || g[0].Name() != ms.ControllerName {
		e.t.Fatalf("group %v, want one controller named %s", g, ms.ControllerName)
	}
	controllertest.Start(e.t, g)
}

// pendingIs waits until the set's pending replica is name/reason ("" name: none).
func (e *env) pendingIs(name, reason string) {
	e.t.Helper()
	controllertest.Eventually(e.t, "pending replica "+name+"/"+reason, func() bool {
		p := e.set().GetStatus().GetPendingReplica()
		return p.GetName() == name && p.GetReason() == reason
	})
}

func (e *env) names(c *store.Collection, namespace string) []string {
	e.t.Helper()
	res, err := c.List(e.ctx, namespace, store.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, o := range res.Items {
		out = append(out, o.GetMetadata().GetName())
	}
	return out
}

// TestScaleOutScaleInDelete runs the controller against the real hub store: a set of 3 creates its replicas one by
// one as the test, playing the agents and gardenlet, marks each shoot reconciled and each seed registered and ready;
// scaled to 1 it deletes two replicas one after the other, by Gardener's priority (all equal: the lowest ordinals),
// each ManagedSeed before its Shoot; deleted, it removes the last replica and then its finalizer.
func TestScaleOutScaleInDelete(t *testing.T) {
	e := newEnv(t)
	e.start(3)
	e.createSet(newSet(3))

	for i := range 3 {
		name := replica(i)
		e.pendingIs(name, ms.ReasonShootReconciling)
		if s := e.shoot(name); s == nil {
			t.Fatalf("shoot %s not created", name)
		}
		// One replica at a time: nothing else starts while this one's shoot reconciles.
		controllertest.Consistently(t, "one replica at a time", quiet, func() bool {
			return e.shoot(replica(i+1)) == nil && e.managedSeed(name) == nil
		})
		if i == 0 {
			e.heartbeatsTriggerNothing(name)
		}

		e.shootReady(name)
		e.pendingIs(name, ms.ReasonManagedSeedPreparing)
		if m := e.managedSeed(name); m.GetSpec().GetShoot().GetName() != name {
			t.Fatalf("ManagedSeed %s: %v", name, m)
		}
		controllertest.Consistently(t, "no new shoot before the seed is registered", quiet, func() bool { return e.shoot(replica(i+1)) == nil })

		// gardenlet registers a seed that is not ready yet, then ready.
		e.gardenletRegisters(name, false)
		e.pendingIs(name, ms.ReasonSeedNotReady)
		e.seedReady(name, true)
		if i < 2 {
			e.pendingIs(replica(i+1), ms.ReasonShootReconciling)
		}
	}
	e.pendingIs("", "")
	set := e.set()
	if st := set.GetStatus(); st.GetReplicas() != 3 || st.GetReadyReplicas() != 3 || st.GetNextReplicaNumber() != 3 ||
		st.GetObservedGeneration() != set.GetMetadata().GetGeneration() {
		t.Fatalf("status after scale-out: %s observedGeneration=%d generation=%d", describe(set), st.GetObservedGeneration(), set.GetMetadata().GetGeneration())
	}
	if !slices.Contains(set.GetMetadata().GetFinalizers(), ms.FinalizerGardener) {
		t.Fatalf("finalizers %q", set.GetMetadata().GetFinalizers())
	}
	if msgs := e.eventMessages(ms.EventCreatingShoot); len(msgs) != 3 {
		t.Errorf("CreatingShoot events %q, want one per replica", msgs)
	}

	// Scale to 1: replicas 0 and 1 go, one after the other, each ManagedSeed (and its seed) before its shoot.
	controllertest.Update(t, e.sets, garden, setName, false, func(s *seedmanagementv1alpha1.ManagedSeedSet) { s.Spec.Replicas = proto.Int32(1) })
	for _, i := range []int{0, 1} {
		name := replica(i)
		e.pendingIs(name, ms.ReasonManagedSeedDeleting)
		if m := e.managedSeed(name); m.GetMetadata().GetDeletionTimestamp() == nil {
			t.Fatalf("ManagedSeed %s not being deleted", name)
		}
		if s := e.shoot(name); s.GetMetadata().GetDeletionTimestamp() != nil {
			t.Fatalf("shoot %s deleted before its ManagedSeed", name)
		}
		e.gardenletDeletes(name)
		e.pendingIs(name, ms.ReasonShootDeleting)
		s := e.shoot(name)
		if s.GetMetadata().GetDeletionTimestamp() == nil || s.GetMetadata().GetAnnotations()[ms.AnnotationConfirmDeletion] != "true" {
			t.Fatalf("shoot %s: deletion %v, annotations %v", name, s.GetMetadata().GetDeletionTimestamp(), s.GetMetadata().GetAnnotations())
		}
		// Nothing else is deleted meanwhile.
		if m := e.managedSeed(replica(i + 1)); m.GetMetadata().GetDeletionTimestamp() != nil {
			t.Fatalf("ManagedSeed %s deleted while %s was pending", replica(i+1), name)
		}
		e.agentDeletedShoot(name)
	}
	e.pendingIs("", "")
	if got := e.names(e.shoots, garden); !slices.Equal(got, []string{replica(2)}) {
		t.Fatalf("shoots after scale-in %q, want only %s", got, replica(2))
	}
	if got := e.names(e.managedSeeds, garden); !slices.Equal(got, []string{replica(2)}) {
		t.Fatalf("ManagedSeeds after scale-in %q, want only %s", got, replica(2))
	}
	if st := e.set().GetStatus(); st.GetReplicas() != 1 || st.GetReadyReplicas() != 1 || st.GetNextReplicaNumber() != 3 {
		t.Fatalf("status after scale-in: %s", describe(e.set()))
	}

	// Delete the set: its last replica goes, then its finalizer.
	controllertest.Delete(t, e.sets, garden, setName)
	e.pendingIs(replica(2), ms.ReasonManagedSeedDeleting)
	e.gardenletDeletes(replica(2))
	e.pendingIs(replica(2), ms.ReasonShootDeleting)
	if e.set() == nil {
		t.Fatal("the set is gone before its last shoot")
	}
	e.agentDeletedShoot(replica(2))
	controllertest.Eventually(t, "the set to be gone", func() bool { return e.set() == nil })
	if s, m, sd := e.names(e.shoots, garden), e.names(e.managedSeeds, garden), e.names(e.seeds, ""); len(s)+len(m)+len(sd) > 0 {
		t.Fatalf("left over: shoots %q, ManagedSeeds %q, seeds %q", s, m, sd)
	}
}

// heartbeatsTriggerNothing: status writes of the pending shoot that change nothing the rules read (the agent's
// progress and conditions) enqueue nothing, so the controller records no further Event.
func (e *env) heartbeatsTriggerNothing(name string) {
	e.t.Helper()
	controllertest.Eventually(e.t, "the controller waiting for the shoot", func() bool { return e.eventCount(ms.EventWaitingForShootReconciled) > 0 })
	before := e.eventCount(ms.EventWaitingForShootReconciled)
	for p := int32(10); p <= 50; p += 20 {
		controllertest.Update(e.t, e.shoots, garden, name, true, func(s *corev1beta1.Shoot) {
			s.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Type: "Create", State: "Processing", Progress: proto.Int32(p)},
				Conditions: []*metav1.Condition{{Type: "APIServerAvailable", Status: "Progressing", Message: fmt.Sprintf("progress %d", p)}}}
		})
	}
	controllertest.Consistently(e.t, "no reconciliation on heartbeats", quiet, func() bool {
		return e.eventCount(ms.EventWaitingForShootReconciled) == before
	})
}

// TestRetriesUpToMax runs the controller against a shoot whose reconciliation keeps failing: it is retried
// maxShootRetries times, each retry counted once (the agent takes it, reports Processing, then fails again), then left
// at ShootReconcileFailed; after the sync period a new round of retries starts, as in Gardener.
func TestRetriesUpToMax(t *testing.T) {
	e := newEnv(t)
	e.start(3)
	e.createSet(newSet(2))
	name := replica(0)
	e.pendingIs(name, ms.ReasonShootReconciling)

	retried := func(n int32) func() bool {
		return func() bool {
			p := e.set().GetStatus().GetPendingReplica()
			return p.GetReason() == ms.ReasonShootReconciling && p.GetRetries() == n &&
				e.shoot(name).GetMetadata().GetAnnotations()[ms.AnnotationOperation] == ms.OperationRetry
		}
	}
	for n := int32(1); n <= 3; n++ {
		e.agentShoot(name, "Create", "Failed", "unhealthy")
		controllertest.Eventually(t, fmt.Sprintf("retry %d", n), retried(n))
		// The agent takes the retry: the annotation goes, the operation is Processing again; the count stays.
		e.agentShoot(name, "Create", "Processing", "unhealthy")
		controllertest.Consistently(t, "the count while the retry runs", quiet, func() bool {
			p := e.set().GetStatus().GetPendingReplica()
			return p.GetReason() == ms.ReasonShootReconciling && p.GetRetries() == n
		})
	}
	e.agentShoot(name, "Create", "Failed", "unhealthy")
	e.pendingIs(name, ms.ReasonShootReconcileFailed)
	if p := e.set().GetStatus().GetPendingReplica(); p.GetRetries() != 3 {
		t.Fatalf("retries %d at ShootReconcileFailed, want 3", p.GetRetries())
	}
	if got := e.eventCount(ms.EventRetryingShootReconciliation); got != 3 {
		t.Errorf("%d RetryingShootReconciliation events, want 3", got)
	}
	controllertest.Consistently(t, "no retry after the maximum", quiet, func() bool {
		return e.shoot(name).GetMetadata().GetAnnotations()[ms.AnnotationOperation] == "" && e.shoot(replica(1)) == nil
	})

	// The sync period: a new round.
	controllertest.StepUntil(t, e.clk, "the next round of retries after the sync period", time.Minute, retried(1))
	if e.shoot(replica(1)) != nil {
		t.Fatal("the next replica started while the first one is failing")
	}
}
