package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*ContainerRuntime)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=containerruntimes,singular=containerruntime,shortName=cr
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the Container Runtime resource."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="status of the last operation, one of Aborted, Processing, Succeeded, Error, Failed"
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// ContainerRuntime asks a container runtime extension (gVisor, Kata, ...) to install its runtime on the nodes of one
// worker pool; the agent writes one per pool and runtime type.
type ContainerRuntime struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired runtime; immutable once the object is being deleted.
	Spec ContainerRuntimeSpec `json:"spec"`
	// +optional
	Status ContainerRuntimeStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *ContainerRuntime) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *ContainerRuntime) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// ContainerRuntimeList is a list of ContainerRuntimes.
type ContainerRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ContainerRuntimes.
	Items []ContainerRuntime `json:"items"`
}

// ContainerRuntimeSpec is the spec of a ContainerRuntime.
type ContainerRuntimeSpec struct {
	DefaultSpec `json:",inline"`
	// BinaryPath is the directory on the machines the runtime's binaries are copied to.
	BinaryPath string `json:"binaryPath"`
	// WorkerPool is the worker pool the runtime is for.
	WorkerPool ContainerRuntimeWorkerPool `json:"workerPool"`
}

// ContainerRuntimeWorkerPool names a worker pool and selects its nodes.
type ContainerRuntimeWorkerPool struct {
	// Name is the name of the pool. Immutable.
	Name string `json:"name"`
	// Selector matches the nodes of the pool.
	Selector metav1.LabelSelector `json:"selector"`
}

// ContainerRuntimeStatus is the status of a ContainerRuntime.
type ContainerRuntimeStatus struct {
	DefaultStatus `json:",inline"`
}

// ContainerDRuntimeContainersBinFolder is where container runtime extensions put their binaries for containerd.
const ContainerDRuntimeContainersBinFolder = "/var/bin/containerruntimes"
