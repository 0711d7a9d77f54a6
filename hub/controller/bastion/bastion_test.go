package bastion_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/bastion"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

func collections(t *testing.T) (bastions, shoots *store.Collection, reg *api.Registry) {
	t.Helper()
	reg = controllertest.NewRegistry(t)
	bastions = controllertest.Collection(t, reg, "operations.gardener.cloud", "bastions")
	shoots = controllertest.Collection(t, reg, "core.gardener.cloud", "shoots")
	return bastions, shoots, reg
}

func newShoot(name, seed string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name}, Spec: &corev1beta1.ShootSpec{SeedName: proto.String(seed), Region: "r"}}
}

func newBastion(name, shoot, seed string, expiresIn *time.Duration) *operationsv1alpha1.Bastion {
	b := &operationsv1alpha1.Bastion{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name, Finalizers: []string{"gardener"}},
		Spec: &operationsv1alpha1.BastionSpec{ShootRef: &metav1.LocalObjectReference{Name: shoot}, SeedName: proto.String(seed)}}
	if expiresIn != nil {
		b.Status = &operationsv1alpha1.BastionStatus{ExpirationTimestamp: timestamppb.New(time.Now().Add(*expiresIn))}
	}
	return b
}

func d(v time.Duration) *time.Duration { return &v }

// TestRules: each case creates a shoot and a bastion on the real store and reconciles once at a moment on a fake
// clock: the bastion is deleted (marked, its agent finalizer keeps it) or kept with a requeue.
func TestRules(t *testing.T) {
	const maxLifetime = 24 * time.Hour
	for _, tc := range []struct {
		name        string
		shoot       *corev1beta1.Shoot // nil: no shoot
		deleteShoot bool
		expiresIn   *time.Duration // the bastion's expiration after its creation; nil: none
		at          time.Duration  // after the bastion's creation
		deleted     bool
		requeue     time.Duration // approximately, when kept
	}{
		{name: "fresh, no expiration", shoot: newShoot("s", "seed-1"), requeue: maxLifetime},
		{name: "fresh, expires in 1h", shoot: newShoot("s", "seed-1"), expiresIn: d(time.Hour), requeue: time.Hour},
		{name: "expired", shoot: newShoot("s", "seed-1"), expiresIn: d(time.Hour), at: time.Hour + time.Second, deleted: true},
		{name: "far expiration, past max lifetime", shoot: newShoot("s", "seed-1"), expiresIn: d(1000 * time.Hour), at: maxLifetime + time.Second, deleted: true},
		{name: "far expiration, before max lifetime", shoot: newShoot("s", "seed-1"), expiresIn: d(1000 * time.Hour), at: maxLifetime - time.Hour, requeue: time.Hour},
		{name: "shoot gone", deleted: true},
		{name: "shoot being deleted", shoot: newShoot("s", "seed-1"), deleteShoot: true, deleted: true},
		{name: "shoot moved to another seed", shoot: newShoot("s", "seed-2"), deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			bastions, shoots, _ := collections(t)
			if tc.shoot != nil {
				if tc.deleteShoot {
					tc.shoot.Metadata.Finalizers = []string{"gardener"}
				}
				controllertest.Create(t, shoots, tc.shoot)
				if tc.deleteShoot {
					controllertest.Delete(t, shoots, "garden-dev", "s")
				}
			}
			// The bastion is built now, not with the table: its expiration counts from about its creation.
			created := controllertest.Create(t, bastions, newBastion("b", "s", "seed-1", tc.expiresIn))
			// The clock starts at the bastion's creation, to the second, as the store stamps it.
			clk := clocktesting.NewFakePassiveClock(created.GetMetadata().GetCreationTimestamp().AsTime().Add(tc.at))
			r := &bastion.Reconciler{Bastions: bastions, Shoots: shoots, MaxLifetime: maxLifetime, Clock: clk}
			res, err := r.Reconcile(ctx, controller.Key{Namespace: "garden-dev", Name: "b"})
			if err != nil {
				t.Fatal(err)
			}
			cur, err := bastions.Get(ctx, "garden-dev", "b")
			if err != nil {
				t.Fatal(err)
			}
			if deleted := cur.GetMetadata().GetDeletionTimestamp() != nil; deleted != tc.deleted {
				t.Fatalf("deleted = %v, want %v", deleted, tc.deleted)
			}
			if !tc.deleted {
				// The expiration counts from just before the creation, which the store stamps to the second.
				if diff := res.RequeueAfter - tc.requeue; diff < -5*time.Second || diff > 5*time.Second {
					t.Errorf("requeue after %v, want about %v", res.RequeueAfter, tc.requeue)
				}
			}
		})
	}
}

// TestControllerDeletesOnTheClock: the running controller deletes a bastion at its maximum lifetime on a fake clock,
// although its expiration is far, and at once when its shoot moves.
func TestControllerDeletesOnTheClock(t *testing.T) {
	ctx := context.Background()
	bastions, shoots, reg := collections(t)
	for _, n := range []string{"s", "s2"} {
		controllertest.Create(t, shoots, newShoot(n, "seed-1"))
	}
	controllertest.Create(t, bastions, newBastion("lifetime", "s", "seed-1", d(1000*time.Hour)))
	controllertest.Create(t, bastions, newBastion("moved", "s2", "seed-1", d(1000*time.Hour)))
	clk := clocktesting.NewFakeClock(time.Now())
	c, err := bastion.New(bastion.Config{Source: reg, MaxLifetime: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer controllertest.Start(t, c)()
	deleted := func(name string) bool {
		o, err := bastions.Get(ctx, "garden-dev", name)
		return apierrors.IsNotFound(err) || (err == nil && o.GetMetadata().GetDeletionTimestamp() != nil)
	}
	// Both are looked at and kept; then the clock passes the maximum lifetime of one hour.
	controllertest.Eventually(t, "the requeue timers", func() bool { return clk.Waiters() >= 2 })
	if deleted("lifetime") || deleted("moved") {
		t.Fatal("a bastion was deleted before its time")
	}
	// The shoot of one moves to another seed: its bastion goes at once.
	controllertest.Update(t, shoots, "garden-dev", "s2", false, func(cur *corev1beta1.Shoot) {
		cur.Spec.SeedName = proto.String("seed-2")
	})
	controllertest.Eventually(t, "the bastion of the moved shoot to be deleted", func() bool { return deleted("moved") })
	if deleted("lifetime") {
		t.Fatal("the other bastion was deleted before its maximum lifetime")
	}
	clk.Step(time.Hour + 2*time.Second)
	controllertest.Eventually(t, "the bastion past its maximum lifetime to be deleted", func() bool { return deleted("lifetime") })
}
