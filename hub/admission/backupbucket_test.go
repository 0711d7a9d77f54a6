package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validBackupBucket() *corev1beta1.BackupBucket {
	return &corev1beta1.BackupBucket{
		Metadata: meta("0f1e2d3c", ""),
		Spec: &corev1beta1.BackupBucketSpec{
			Provider:       &corev1beta1.BackupBucketProvider{Type: "aws", Region: "eu-west-1"},
			SeedName:       ptr("aws"),
			CredentialsRef: secretRef("backup", "garden"),
		},
	}
}

func TestBackupBucketValidation(t *testing.T) {
	bb := func(f func(*corev1beta1.BackupBucket)) *corev1beta1.BackupBucket { return with(validBackupBucket(), f) }
	cases := []validationCase{
		{name: "valid", obj: validBackupBucket()},
		{name: "workload identity", obj: bb(func(b *corev1beta1.BackupBucket) {
			b.Spec.CredentialsRef = &metav1.ObjectReference{ApiVersion: "security.gardener.cloud/v1alpha1", Kind: "WorkloadIdentity", Name: "w", Namespace: "garden"}
		})},
		{name: "empty", obj: &corev1beta1.BackupBucket{Metadata: meta("b", "")},
			paths: []string{"spec.credentialsRef", "spec.provider.region", "spec.provider.type", "spec.seedName"}},
		{name: "owned by a self-hosted shoot", obj: bb(func(b *corev1beta1.BackupBucket) {
			b.Spec.SeedName = nil
			b.Spec.ShootRef = &metav1.ObjectReference{Name: "s", Namespace: "garden"}
		})},
		{name: "credentials incomplete", obj: bb(func(b *corev1beta1.BackupBucket) {
			b.Spec.CredentialsRef = &metav1.ObjectReference{ApiVersion: "v1", Kind: "ConfigMap"}
		}), paths: []string{"spec.credentialsRef", "spec.credentialsRef.name", "spec.credentialsRef.namespace"}},
		{name: "provider and seed are immutable", old: validBackupBucket(), obj: bb(func(b *corev1beta1.BackupBucket) {
			b.Spec.Provider.Region = "eu-central-1"
			b.Spec.SeedName = ptr("other")
		}), paths: []string{"spec.provider", "spec.seedName"}},
	}
	runCases(t, cases)
}
