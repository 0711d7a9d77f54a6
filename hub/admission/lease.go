package admission

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
)

// leaseStrategyOldestEmulationVersion is Kubernetes' built-in coordinated leader election strategy.
const leaseStrategyOldestEmulationVersion = "OldestEmulationVersion"

// validateLease checks what Kubernetes does: leaseDurationSeconds > 0 and leaseTransitions >= 0 when set, a known or
// domain-qualified strategy, and a preferredHolder only with a strategy.
func validateLease(_ context.Context, _ Reader, l, _ *coordinationv1.Lease) field.ErrorList {
	p := field.NewPath("spec")
	spec := l.GetSpec()
	if spec == nil {
		return nil
	}
	var errs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(p.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if s := spec.Strategy; s != nil {
		sp := p.Child("strategy")
		switch {
		case *s == "":
			errs = append(errs, field.Required(sp, "must not be empty if set"))
		case *s == leaseStrategyOldestEmulationVersion:
		default:
			msgs := validation.IsQualifiedName(*s)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(sp, *s, msg))
			}
			if len(msgs) == 0 && !strings.Contains(*s, "/") {
				errs = append(errs, field.NotSupported(sp, *s, []string{leaseStrategyOldestEmulationVersion, "<domain-prefixed name>"}))
			}
		}
	}
	if h := spec.PreferredHolder; h != nil && *h != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}
