package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=clusters,singular=cluster
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// Cluster gives extensions the garden objects of one shoot: the agent writes it, named like the shoot's namespace
// in the seed (shoot--<project>--<name>), before the shoot's flow starts. It has no status and is not an Object.
type Cluster struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec holds the garden objects.
	Spec ClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Clusters.
	Items []Cluster `json:"items"`
}

// ClusterSpec holds the garden objects of a shoot as JSON (core.gardener.cloud/v1beta1, with apiVersion and kind).
type ClusterSpec struct {
	// CloudProfile is the CloudProfile the shoot refers to.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	CloudProfile runtime.RawExtension `json:"cloudProfile"`
	// Seed is the Seed the shoot runs on; empty for self-hosted shoots.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Seed runtime.RawExtension `json:"seed,omitempty"`
	// Shoot is the Shoot.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	Shoot runtime.RawExtension `json:"shoot"`
}
