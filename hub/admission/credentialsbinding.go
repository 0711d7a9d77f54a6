package admission

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// defaultCredentialsBinding applies Gardener's SetDefaults_CredentialsBinding: the credentials and the quotas default
// to the binding's namespace.
func defaultCredentialsBinding(b *securityv1alpha1.CredentialsBinding) {
	ns := b.GetMetadata().GetNamespace()
	if b.CredentialsRef == nil {
		b.CredentialsRef = &metav1.ObjectReference{}
	}
	if b.CredentialsRef.Namespace == "" {
		b.CredentialsRef.Namespace = ns
	}
	for _, q := range b.Quotas {
		if q != nil && q.Namespace == "" {
			q.Namespace = ns
		}
	}
}

// validateCredentialsBinding checks credentialsRef (a v1 Secret, a security.gardener.cloud/v1alpha1
// WorkloadIdentity or a core.gardener.cloud/v1beta1 InternalSecret, with name and namespace), provider.type (one
// provider) and quotas[].name; credentialsRef, quotas and provider are immutable.
func validateCredentialsBinding(_ context.Context, _ Reader, b, old *securityv1alpha1.CredentialsBinding) field.ErrorList {
	errs := credentialsRef(field.NewPath("credentialsRef"), b.GetCredentialsRef(), gvkSecret, gvkWorkloadIdentity, gvkInternalSecret)
	errs = append(errs, providerType(field.NewPath("provider", "type"), b.GetProvider().GetType())...)
	for i, q := range b.GetQuotas() {
		errs = append(errs, objectReferenceName(field.NewPath("quotas").Index(i), q)...)
	}
	if old != nil {
		errs = append(errs, immutableMessage(field.NewPath("credentialsRef"), b.GetCredentialsRef(), old.GetCredentialsRef())...)
		errs = append(errs, immutableMessages(field.NewPath("quotas"), b.GetQuotas(), old.GetQuotas())...)
		errs = append(errs, immutableMessage(field.NewPath("provider"), b.GetProvider(), old.GetProvider())...)
	}
	return errs
}

// providerType requires a single provider type (Gardener refuses comma-separated lists).
func providerType(p *field.Path, t string) field.ErrorList {
	if t == "" {
		return field.ErrorList{field.Required(p, "must specify a provider type")}
	}
	if strings.Contains(t, ",") {
		return field.ErrorList{field.Invalid(p, t, "multiple providers specified")}
	}
	return nil
}
