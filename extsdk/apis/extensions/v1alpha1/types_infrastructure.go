package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*Infrastructure)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=infrastructures,singular=infrastructure,shortName=infra
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the cloud provider for this resource."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region into which the infrastructure should be deployed."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of infrastructure resource."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// Infrastructure asks the provider extension for the cloud infrastructure of a shoot: networks, subnets, security
// groups, key pairs. Its status.providerStatus is forwarded to the ControlPlane and Worker of the shoot.
type Infrastructure struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired infrastructure; immutable once the object is being deleted.
	Spec InfrastructureSpec `json:"spec"`
	// +optional
	Status InfrastructureStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *Infrastructure) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *Infrastructure) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// InfrastructureList is a list of Infrastructures.
type InfrastructureList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Infrastructures.
	Items []Infrastructure `json:"items"`
}

// InfrastructureSpec is the spec of an Infrastructure.
type InfrastructureSpec struct {
	DefaultSpec `json:",inline"`
	// Region is the cloud region of the infrastructure. Immutable.
	Region string `json:"region"`
	// SecretRef points at the secret holding the cloud provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
	// SSHPublicKey is the public SSH key the infrastructure should know, if any.
	// +optional
	SSHPublicKey []byte `json:"sshPublicKey,omitempty"`
}

// InfrastructureStatus is the status of an Infrastructure.
type InfrastructureStatus struct {
	DefaultStatus `json:",inline"`
	// NodesCIDR is the node network CIDR when the extension created it and the Shoot could not say it up front.
	// +optional
	NodesCIDR *string `json:"nodesCIDR,omitempty"`
	// EgressCIDRs are the CIDRs the shoot's egress traffic comes from, when they are stable enough to report.
	// +optional
	EgressCIDRs []string `json:"egressCIDRs,omitempty"`
	// Networking holds the cluster network CIDRs as the infrastructure set them up.
	// +optional
	Networking *InfrastructureStatusNetworking `json:"networking,omitempty"`
}

// InfrastructureStatusNetworking holds the CIDRs of the cluster networks.
type InfrastructureStatusNetworking struct {
	// Pods are the CIDRs of the pod network.
	// +optional
	Pods []string `json:"pods,omitempty"`
	// Nodes are the CIDRs of the node network.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Services are the CIDRs of the service network.
	// +optional
	Services []string `json:"services,omitempty"`
}
