package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*BackupBucket)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=backupbuckets,singular=backupbucket,shortName=bb
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the cloud provider for this resource."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region into which the backup bucket should be created."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="status of the last operation, one of Aborted, Processing, Succeeded, Error, Failed"
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// BackupBucket asks the provider extension for an object store bucket that holds the etcd backups of a seed's
// shoots; the agent writes one per seed.
type BackupBucket struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired bucket; immutable once the object is being deleted.
	Spec BackupBucketSpec `json:"spec"`
	// +optional
	Status BackupBucketStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *BackupBucket) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *BackupBucket) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// BackupBucketList is a list of BackupBuckets.
type BackupBucketList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the BackupBuckets.
	Items []BackupBucket `json:"items"`
}

// BackupBucketSpec is the spec of a BackupBucket.
type BackupBucketSpec struct {
	DefaultSpec `json:",inline"`
	// Region is the region of the bucket. Immutable.
	Region string `json:"region"`
	// SecretRef points at the secret holding the object store credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// BackupBucketStatus is the status of a BackupBucket.
type BackupBucketStatus struct {
	DefaultStatus `json:",inline"`
	// GeneratedSecretRef points at a secret the extension made, with credentials specific to the bucket.
	// +optional
	GeneratedSecretRef *corev1.SecretReference `json:"generatedSecretRef,omitempty"`
}
