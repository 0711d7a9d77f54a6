package agentsim

import (
	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// Fixtures: minimal objects with the references the agent link follows (shoot → secret or credentials binding →
// secret, shoot → cloud profile, seed → backup secret, backup entry → owner shoot). They carry only what the tests
// look at; those written through the API (CredentialsBinding, Backup, BackupEntry) also pass its admission.

// Seed returns a Seed.
func Seed(name string) *corev1beta1.Seed {
	return &corev1beta1.Seed{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"}}}
}

// CloudProfile returns a CloudProfile.
func CloudProfile(name string) *corev1beta1.CloudProfile {
	return &corev1beta1.CloudProfile{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "CloudProfile", Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.CloudProfileSpec{Type: "local"}}
}

// Secret returns a provider Secret.
func Secret(namespace, name string) *kcorev1.Secret {
	return &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string][]byte{"token": []byte("s3cr3t-" + name)}}
}

// SecretBinding returns a SecretBinding of the secret of the same name.
func SecretBinding(namespace, name string) *corev1beta1.SecretBinding {
	return &corev1beta1.SecretBinding{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "SecretBinding",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name}, SecretRef: &metav1.SecretReference{Name: name, Namespace: namespace},
		Provider: &corev1beta1.SecretBindingProvider{Type: "local"}}
}

// Shoot returns a Shoot scheduled on seed using binding and cloud profile.
func Shoot(namespace, name, seed, binding, cloudProfile string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: &corev1beta1.ShootSpec{
			SeedName: proto.String(seed), SecretBindingName: proto.String(binding), CloudProfileName: proto.String(cloudProfile),
			Region: "local", Provider: &corev1beta1.Provider{Type: "local"},
		}}
}

// CredentialsBinding returns a CredentialsBinding (security.gardener.cloud/v1alpha1) of the Secret of the same name
// in the same namespace.
func CredentialsBinding(namespace, name string) *securityv1alpha1.CredentialsBinding {
	return &securityv1alpha1.CredentialsBinding{ApiVersion: "security.gardener.cloud/v1alpha1", Kind: "CredentialsBinding",
		Metadata:       &metav1.ObjectMeta{Namespace: namespace, Name: name},
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: namespace, Name: name},
		Provider:       &securityv1alpha1.CredentialsBindingProvider{Type: "local"}}
}

// Backup returns a Seed's backup configuration (spec.backup, which a shoot's move between seeds requires on both)
// of provider local with the credentials of the Secret namespace/name.
func Backup(namespace, name string) *corev1beta1.Backup {
	return &corev1beta1.Backup{Provider: "local",
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: namespace, Name: name}}
}

// BackupEntry returns a BackupEntry of bucket named and owned by shoot (whose metadata must carry its uid), with no
// seed of its own: it belongs to the seeds of its owner shoot.
func BackupEntry(shoot *corev1beta1.Shoot, bucket string) *corev1beta1.BackupEntry {
	md := shoot.GetMetadata()
	return &corev1beta1.BackupEntry{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupEntry",
		Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: md.GetName(), OwnerReferences: []*metav1.OwnerReference{{
			ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: md.GetName(), Uid: md.GetUid(),
			Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true),
		}}},
		Spec: &corev1beta1.BackupEntrySpec{BucketName: bucket}}
}
