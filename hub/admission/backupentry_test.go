package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

func TestBackupEntryValidation(t *testing.T) {
	entry := &corev1beta1.BackupEntry{
		Metadata: meta("shoot--dev--crazy-botany--3b1c0f4e", "shoot--dev--crazy-botany"),
		Spec:     &corev1beta1.BackupEntrySpec{BucketName: "0f1e2d3c", SeedName: ptr("aws")},
	}
	runCases(t, []validationCase{
		{name: "valid", obj: entry},
		{name: "bucket required", obj: with(entry, func(e *corev1beta1.BackupEntry) { e.Spec.BucketName = "" }), paths: []string{"spec.bucketName"}},
		{name: "no spec", obj: &corev1beta1.BackupEntry{Metadata: meta("e", "garden")}, paths: []string{"spec.bucketName"}},
	})
}
