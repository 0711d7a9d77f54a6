package admission_test

import (
	"testing"

	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
)

func TestLeaseValidation(t *testing.T) {
	lease := func(spec *coordinationv1.LeaseSpec) *coordinationv1.Lease {
		return &coordinationv1.Lease{Metadata: meta("gardenlet-local", "gardener-system-seed-lease"), Spec: spec}
	}
	runCases(t, []validationCase{
		{name: "valid", obj: lease(&coordinationv1.LeaseSpec{HolderIdentity: ptr("local"), LeaseDurationSeconds: ptr(int32(40)), LeaseTransitions: ptr(int32(0))})},
		{name: "no spec", obj: lease(nil)},
		{name: "duration must be positive", obj: lease(&coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr(int32(0))}),
			paths: []string{"spec.leaseDurationSeconds"}},
		{name: "transitions not negative", obj: lease(&coordinationv1.LeaseSpec{LeaseTransitions: ptr(int32(-1))}),
			paths: []string{"spec.leaseTransitions"}},
		{name: "strategy", obj: lease(&coordinationv1.LeaseSpec{Strategy: ptr("OldestEmulationVersion"), PreferredHolder: ptr("a")})},
		{name: "custom strategy", obj: lease(&coordinationv1.LeaseSpec{Strategy: ptr("example.com/newest")})},
		{name: "unknown strategy", obj: lease(&coordinationv1.LeaseSpec{Strategy: ptr("Newest")}), paths: []string{"spec.strategy"}},
		{name: "preferred holder needs a strategy", obj: lease(&coordinationv1.LeaseSpec{PreferredHolder: ptr("a")}),
			paths: []string{"spec.preferredHolder"}},
	})
}
