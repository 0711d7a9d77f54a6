package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var _ Object = (*BackupEntry)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=backupentries,singular=backupentry,shortName=be
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the cloud provider for this resource."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region into which the backup entry should be created."
// +kubebuilder:printcolumn:name=Bucket,JSONPath=".spec.bucketName",type=string,description="The name of the bucket into which the backup entry should be created."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="status of the last operation, one of Aborted, Processing, Succeeded, Error, Failed"
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// BackupEntry asks the provider extension for the part of a backup bucket that holds one shoot's etcd backups; the
// agent writes one per shoot, and it may outlive the shoot for the retention period.
type BackupEntry struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired entry; immutable once the object is being deleted.
	Spec BackupEntrySpec `json:"spec"`
	// +optional
	Status BackupEntryStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *BackupEntry) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *BackupEntry) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// BackupEntryList is a list of BackupEntries.
type BackupEntryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the BackupEntries.
	Items []BackupEntry `json:"items"`
}

// BackupEntrySpec is the spec of a BackupEntry.
type BackupEntrySpec struct {
	DefaultSpec `json:",inline"`
	// BackupBucketProviderStatus is the BackupBucket's status.providerStatus, forwarded by the agent.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	BackupBucketProviderStatus *runtime.RawExtension `json:"backupBucketProviderStatus,omitempty"`
	// Region is the region of the bucket. Immutable.
	Region string `json:"region"`
	// BucketName is the name of the bucket the entry lives in.
	BucketName string `json:"bucketName"`
	// SecretRef points at the secret holding the object store credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// BackupEntryStatus is the status of a BackupEntry.
type BackupEntryStatus struct {
	DefaultStatus `json:",inline"`
}
