package admission_test

import (
	"context"
	"testing"

	"github.com/trellis-dev/trellis/hub/admission"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestShootSpecEqualMemo: within one write's validation and admission (WithSpecComparison) a Shoot's spec found
// equal to the stored one is not compared again, for the same two objects only; a spec found different is compared
// again (validation may default it into the stored one's), and other objects are compared afresh.
func TestShootSpecEqualMemo(t *testing.T) {
	shoot := func(region string) *corev1beta1.Shoot {
		return &corev1beta1.Shoot{Spec: &corev1beta1.ShootSpec{Region: region}}
	}
	for _, memo := range []bool{false, true} {
		ctx := context.Background()
		if memo {
			ctx = admission.WithSpecComparison(ctx)
		}
		old, s := shoot("a"), shoot("b")
		if admission.ShootSpecEqual(ctx, s, old) {
			t.Fatalf("memo %v: different specs compared equal", memo)
		}
		// Validation defaults the spec into the stored one's: compared again, equal.
		s.Spec.Region = "a"
		if !admission.ShootSpecEqual(ctx, s, old) {
			t.Fatalf("memo %v: a spec that became equal is still different", memo)
		}
		// Other objects are compared, not answered from the memo.
		if other := shoot("c"); admission.ShootSpecEqual(ctx, other, old) || admission.ShootSpecEqual(ctx, s, other) {
			t.Fatalf("memo %v: another object's spec compared equal", memo)
		}
		if !admission.ShootSpecEqual(ctx, s, old) {
			t.Fatalf("memo %v: equal specs compared different", memo)
		}
		// The same two objects again: remembered with the memo (the objects do not change between validation and
		// admission), compared without it.
		s.Spec.Region = "z"
		if got := admission.ShootSpecEqual(ctx, s, old); got != memo {
			t.Fatalf("memo %v: the same objects compared equal %v", memo, got)
		}
	}
}
