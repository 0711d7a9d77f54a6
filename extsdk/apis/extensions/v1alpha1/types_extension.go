package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*Extension)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=extensions,singular=extension,shortName=ext
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the Extension resource."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of Extension resource."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// Extension asks a generic extension (certificates, DNS, OIDC, ...) to do its part for a shoot; the agent writes one
// per enabled extension type, at the point of the flow its lifecycle says.
type Extension struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired extension; immutable once the object is being deleted.
	Spec ExtensionSpec `json:"spec"`
	// +optional
	Status ExtensionStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *Extension) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *Extension) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// ExtensionList is a list of Extensions.
type ExtensionList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Extensions.
	Items []Extension `json:"items"`
}

// ExtensionSpec is the spec of an Extension.
type ExtensionSpec struct {
	DefaultSpec `json:",inline"`
}

// ExtensionStatus is the status of an Extension.
type ExtensionStatus struct {
	DefaultStatus `json:",inline"`
}
