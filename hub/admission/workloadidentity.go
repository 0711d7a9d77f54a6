package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// validateWorkloadIdentity checks spec.audiences (at least one, none empty) and spec.targetSystem.type (one
// provider, immutable).
func validateWorkloadIdentity(_ context.Context, _ Reader, w, old *securityv1alpha1.WorkloadIdentity) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	ap := p.Child("audiences")
	if len(w.GetSpec().GetAudiences()) == 0 {
		errs = append(errs, field.Required(ap, "must provide at least one audience"))
	}
	for i, a := range w.GetSpec().GetAudiences() {
		if a == "" {
			errs = append(errs, field.Required(ap.Index(i), "must specify non-empty audience"))
		}
	}
	tp := p.Child("targetSystem", "type")
	errs = append(errs, providerType(tp, w.GetSpec().GetTargetSystem().GetType())...)
	if old != nil {
		errs = append(errs, immutable(tp, w.GetSpec().GetTargetSystem().GetType(), old.GetSpec().GetTargetSystem().GetType())...)
	}
	return errs
}
