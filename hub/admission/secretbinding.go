package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// defaultSecretBinding applies Gardener's SetDefaults_SecretBinding: the secret and the quotas default to the
// binding's namespace.
func defaultSecretBinding(b *corev1beta1.SecretBinding) {
	ns := b.GetMetadata().GetNamespace()
	if b.SecretRef == nil {
		b.SecretRef = &metav1.SecretReference{}
	}
	if b.SecretRef.Namespace == "" {
		b.SecretRef.Namespace = ns
	}
	for _, q := range b.Quotas {
		if q != nil && q.Namespace == "" {
			q.Namespace = ns
		}
	}
}

// validateSecretBinding checks secretRef.name, quotas[].name and provider.type; secretRef, quotas and provider are
// immutable.
func validateSecretBinding(_ context.Context, _ Reader, b, old *corev1beta1.SecretBinding) field.ErrorList {
	var errs field.ErrorList
	if b.GetSecretRef().GetName() == "" {
		errs = append(errs, field.Required(field.NewPath("secretRef", "name"), "must provide a name"))
	}
	for i, q := range b.GetQuotas() {
		errs = append(errs, objectReferenceName(field.NewPath("quotas").Index(i), q)...)
	}
	pp := field.NewPath("provider")
	switch {
	case b.GetProvider() == nil:
		errs = append(errs, field.Required(pp, "must specify a provider"))
	case b.GetProvider().GetType() == "":
		errs = append(errs, field.Required(pp.Child("type"), "must specify a provider type"))
	}
	if old != nil {
		errs = append(errs, immutableMessage(field.NewPath("secretRef"), b.GetSecretRef(), old.GetSecretRef())...)
		errs = append(errs, immutableMessages(field.NewPath("quotas"), b.GetQuotas(), old.GetQuotas())...)
		if old.GetProvider() != nil {
			errs = append(errs, immutableMessage(pp, b.GetProvider(), old.GetProvider())...)
		}
	}
	return errs
}
