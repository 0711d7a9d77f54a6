package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// validateBackupEntry requires spec.bucketName. (A BackupEntry's name may be any name: Gardener derives it from the
// shoot's technical ID and UID.) Admission then requires the bucket's provider type registered for BackupEntry
// (admitBackupEntryExtensions).
func validateBackupEntry(ctx context.Context, r Reader, b, old *corev1beta1.BackupEntry) field.ErrorList {
	if b.GetSpec().GetBucketName() == "" {
		return field.ErrorList{field.Required(field.NewPath("spec", "bucketName"), "bucketName must not be empty")}
	}
	return nil
}
