package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// validateControllerInstallation checks that the installation names its registration and its target: the seed
// (spec.seedRef) or, for self-hosted shoots, the shoot (spec.shootRef), not both. The references are immutable, and
// nothing of the spec changes once the installation is being deleted.
func validateControllerInstallation(_ context.Context, _ Reader, ci, old *corev1beta1.ControllerInstallation) field.ErrorList {
	errs := nameIsDNSLabel(ci.GetMetadata())
	p := field.NewPath("spec")
	spec := ci.GetSpec()
	if old != nil && ci.GetMetadata().GetDeletionTimestamp() != nil && !protoEqual(spec, old.GetSpec()) {
		return append(errs, field.Forbidden(p, "cannot update the spec if the deletion timestamp is set"))
	}
	if spec.GetRegistrationRef().GetName() == "" {
		errs = append(errs, field.Required(p.Child("registrationRef", "name"), "field is required"))
	}
	hasShoot := spec.GetShootRef().GetName() != ""
	switch {
	case hasShoot && spec.GetSeedRef().GetName() != "":
		errs = append(errs, field.Forbidden(p.Child("seedRef"), "must not be set together with spec.shootRef"))
	case !hasShoot && spec.GetSeedRef().GetName() == "":
		errs = append(errs, field.Required(p.Child("seedRef", "name"), "field is required"))
	}
	if old != nil {
		os := old.GetSpec()
		errs = append(errs, immutable(p.Child("registrationRef", "name"), spec.GetRegistrationRef().GetName(), os.GetRegistrationRef().GetName())...)
		errs = append(errs, immutable(p.Child("seedRef", "name"), spec.GetSeedRef().GetName(), os.GetSeedRef().GetName())...)
		errs = append(errs, immutable(p.Child("shootRef", "name"), spec.GetShootRef().GetName(), os.GetShootRef().GetName())...)
	}
	return errs
}
