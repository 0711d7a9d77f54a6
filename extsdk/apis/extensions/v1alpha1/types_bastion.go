package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*Bastion)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=bastions,singular=bastion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=IP,JSONPath=".status.ingress.ip",type=string,description="The public IP address of the temporary bastion host"
// +kubebuilder:printcolumn:name=Hostname,JSONPath=".status.ingress.hostname",type=string,description="The public hostname of the temporary bastion host"
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="The bastion's age."

// Bastion asks the provider extension for a temporary jump host that gives SSH access to a shoot's nodes; the agent
// copies it from the garden's Bastion.
type Bastion struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired bastion; immutable once the object is being deleted.
	Spec BastionSpec `json:"spec"`
	// +optional
	Status BastionStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *Bastion) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *Bastion) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// BastionList is a list of Bastions.
type BastionList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Bastions.
	Items []Bastion `json:"items"`
}

// BastionSpec is the spec of a Bastion.
type BastionSpec struct {
	DefaultSpec `json:",inline"`
	// UserData is the user data of the bastion machine (base64 in JSON); it puts the SSH key in place. Immutable.
	UserData []byte `json:"userData"`
	// Ingress says from where the bastion may be reached.
	Ingress []BastionIngressPolicy `json:"ingress"`
}

// BastionIngressPolicy allows SSH to the bastion from an IP block.
type BastionIngressPolicy struct {
	// IPBlock is the allowed IP block.
	IPBlock networkingv1.IPBlock `json:"ipBlock"`
}

// BastionStatus is the status of a Bastion.
type BastionStatus struct {
	DefaultStatus `json:",inline"`
	// Ingress is the public IP address and/or host name of the bastion.
	// +optional
	Ingress *corev1.LoadBalancerIngress `json:"ingress,omitempty"`
}
