package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// validateBackupEntry requires spec.bucketName, and with registered extensions required, the bucket's provider type
// registered for BackupEntry. (A BackupEntry's name may be any name: Gardener derives it from the shoot's technical
// ID and UID.)
func validateBackupEntry(ctx context.Context, r Reader, b, old *corev1beta1.BackupEntry) field.ErrorList {
	if b.GetSpec().GetBucketName() == "" {
		return field.ErrorList{field.Required(field.NewPath("spec", "bucketName"), "bucketName must not be empty")}
	}
	return admitBackupEntryExtensions(ctx, r, b, old)
}
