package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// exposureClassHandlerMaxLength keeps the handler's namespaces (istio-ingress-handler-<handler>--<zone>) within the
// length of a namespace name.
const exposureClassHandlerMaxLength = 34

// validateExposureClass checks the handler (required, a DNS label of at most 34 characters) and the scheduling
// (seed selector, tolerations); handler and scheduling are immutable.
func validateExposureClass(_ context.Context, _ Reader, e, old *corev1beta1.ExposureClass) field.ErrorList {
	var errs field.ErrorList
	hp := field.NewPath("handler")
	switch h := e.GetHandler(); {
	case h == "":
		errs = append(errs, field.Required(hp, "must provide a handler"))
	case len(h) > exposureClassHandlerMaxLength:
		errs = append(errs, field.TooLong(hp, h, exposureClassHandlerMaxLength))
	default:
		errs = append(errs, dnsLabel(hp, h)...)
	}
	if s := e.GetScheduling(); s != nil {
		sp := field.NewPath("scheduling")
		errs = append(errs, seedSelector(sp.Child("seedSelector"), s.GetSeedSelector())...)
		errs = append(errs, tolerations(sp.Child("tolerations"), s.GetTolerations())...)
	}
	if old != nil {
		errs = append(errs, immutable(hp, e.GetHandler(), old.GetHandler())...)
		errs = append(errs, immutableMessage(field.NewPath("scheduling"), e.GetScheduling(), old.GetScheduling())...)
	}
	return errs
}
