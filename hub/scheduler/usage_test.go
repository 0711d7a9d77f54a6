package scheduler

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestReservationCountsOnce: a bind in flight counts once, whether the watch sees it before the worker releases its
// reservation or after; a reservation given up without a bind frees its place and says so.
func TestReservationCountsOnce(t *testing.T) {
	u := newUsage(nil, clocktesting.NewFakeClock(time.Now()), slog.New(slog.DiscardHandler))
	freed := 0
	u.freed = func() { freed++ }
	bound := func(name, rv string) *corev1beta1.Shoot {
		return &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name, ResourceVersion: rv},
			Spec: &corev1beta1.ShootSpec{SeedName: proto.String("a")}}
	}
	x, y := controller.Key{Namespace: "garden-dev", Name: "x"}, controller.Key{Namespace: "garden-dev", Name: "y"}

	if !u.reserve("a", x, 0) || u.snapshot()["a"] != 1 {
		t.Fatalf("reserve: %v", u.snapshot())
	}
	if u.reserve("a", y, 0) {
		t.Fatal("a reservation on a decision that did not see the other one")
	}
	// The watch sees the bind before the worker releases: x counts once, not as a shoot and a reservation.
	u.observe(bound("x", "5"))
	if n := u.snapshot()["a"]; n != 1 {
		t.Fatalf("after the watch saw the bind: %d on seed a, want 1", n)
	}
	u.release("a", x, bound("x", "5"))
	if n := u.snapshot()["a"]; n != 1 || freed != 0 {
		t.Fatalf("after the release: %d on seed a (want 1), freed %d", n, freed)
	}
	// The other order: released with the bind's result first, then the watch's event of the same state.
	if !u.reserve("a", y, 1) {
		t.Fatal("reserve y")
	}
	u.release("a", y, bound("y", "6"))
	u.observe(bound("y", "6"))
	if n := u.snapshot()["a"]; n != 2 || freed != 0 {
		t.Fatalf("after y's bind: %d on seed a (want 2), freed %d", n, freed)
	}
	// Given up without a bind: the place is free again, and the waiting shoots are looked at again.
	z := controller.Key{Namespace: "garden-dev", Name: "z"}
	if !u.reserve("a", z, 2) {
		t.Fatal("reserve z")
	}
	u.release("a", z, nil)
	if n := u.snapshot()["a"]; n != 2 || freed != 1 {
		t.Fatalf("after z gave up: %d on seed a (want 2), freed %d (want 1)", n, freed)
	}
}
