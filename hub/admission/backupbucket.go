package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// validateBackupBucket checks spec.provider (type and region), the owner (spec.seedName, or spec.shootRef for
// self-hosted shoots) and spec.credentialsRef (a Secret or WorkloadIdentity with name and namespace); provider and
// seedName are immutable. Admission then requires the provider type registered (admitBackupBucketExtensions).
func validateBackupBucket(ctx context.Context, r Reader, b, old *corev1beta1.BackupBucket) field.ErrorList {
	errs := nameIsDNSLabel(b.GetMetadata())
	p := field.NewPath("spec")
	spec := b.GetSpec()
	if spec.GetProvider().GetType() == "" {
		errs = append(errs, field.Required(p.Child("provider", "type"), "type name must not be empty"))
	}
	if spec.GetProvider().GetRegion() == "" {
		errs = append(errs, field.Required(p.Child("provider", "region"), "region must not be empty"))
	}
	if spec.GetSeedName() == "" && spec.GetShootRef().GetName() == "" {
		errs = append(errs, field.Required(p.Child("seedName"), "seed must not be empty"))
	}
	errs = append(errs, credentialsRef(p.Child("credentialsRef"), spec.GetCredentialsRef(), gvkSecret, gvkWorkloadIdentity)...)
	if old != nil {
		errs = append(errs, immutableMessage(p.Child("provider"), spec.GetProvider(), old.GetSpec().GetProvider())...)
		if old.GetSpec().GetSeedName() != "" {
			errs = append(errs, immutable(p.Child("seedName"), spec.GetSeedName(), old.GetSpec().GetSeedName())...)
		}
	}
	return errs
}
