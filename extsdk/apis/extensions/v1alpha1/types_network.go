package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*Network)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=networks,singular=network
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the network provider for this resource."
// +kubebuilder:printcolumn:name="Pod CIDR",JSONPath=".spec.podCIDR",type=string,description="The CIDR that will be used for pods."
// +kubebuilder:printcolumn:name="Service CIDR",JSONPath=".spec.serviceCIDR",type=string,description="The CIDR that will be used for services."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of network resource."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// Network asks the network extension (a CNI such as calico or cilium) for the pod network of a shoot.
type Network struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired network; immutable once the object is being deleted.
	Spec NetworkSpec `json:"spec"`
	// +optional
	Status NetworkStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *Network) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *Network) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// NetworkList is a list of Networks.
type NetworkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Networks.
	Items []Network `json:"items"`
}

// IPFamily is an IP protocol version.
type IPFamily string

// IP families.
const (
	// IPFamilyIPv4 is IPv4.
	IPFamilyIPv4 IPFamily = "IPv4"
	// IPFamilyIPv6 is IPv6.
	IPFamilyIPv6 IPFamily = "IPv6"
)

// NetworkSpec is the spec of a Network.
type NetworkSpec struct {
	DefaultSpec `json:",inline"`
	// PodCIDR is the CIDR of the pod network. Immutable.
	PodCIDR string `json:"podCIDR"`
	// ServiceCIDR is the CIDR of the service network. Immutable.
	ServiceCIDR string `json:"serviceCIDR"`
	// IPFamilies are the IP versions of the shoot's networks.
	// +optional
	IPFamilies []IPFamily `json:"ipFamilies,omitempty"`
}

// NetworkStatus is the status of a Network.
type NetworkStatus struct {
	DefaultStatus `json:",inline"`
	// IPFamilies are the IP versions actually in use; they differ from the spec during a dual-stack migration.
	// +optional
	IPFamilies []IPFamily `json:"ipFamilies,omitempty"`
}
