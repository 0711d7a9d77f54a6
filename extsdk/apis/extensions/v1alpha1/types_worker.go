package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var _ Object = (*Worker)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=workers,singular=worker
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the cloud provider for this resource."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region into which the worker should be deployed."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of the worker."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// Worker asks the provider extension for the machines of a shoot, one pool per Shoot worker pool; the extension
// reports the machine deployments it made in status.machineDeployments.
type Worker struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired set of worker pools; immutable once the object is being deleted.
	Spec WorkerSpec `json:"spec"`
	// +optional
	Status WorkerStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *Worker) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *Worker) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// WorkerList is a list of Workers.
type WorkerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Workers.
	Items []Worker `json:"items"`
}

// WorkerSpec is the spec of a Worker.
type WorkerSpec struct {
	DefaultSpec `json:",inline"`
	// InfrastructureProviderStatus is the Infrastructure's status.providerStatus, forwarded by the agent.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	InfrastructureProviderStatus *runtime.RawExtension `json:"infrastructureProviderStatus,omitempty"`
	// Region is the cloud region of the machines. Immutable.
	Region string `json:"region"`
	// SecretRef points at the secret holding the cloud provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
	// SSHPublicKey is the public SSH key to put on the machines, if any.
	// +optional
	SSHPublicKey []byte `json:"sshPublicKey,omitempty"`
	// Pools are the worker pools.
	// +patchMergeKey=name
	// +patchStrategy=merge
	Pools []WorkerPool `json:"pools" patchStrategy:"merge" patchMergeKey:"name"`
}

// WorkerPool is one pool of equal machines.
type WorkerPool struct {
	// MachineType is the provider's machine type, e.g. "m5.large".
	MachineType string `json:"machineType"`
	// Maximum is the largest size of the pool.
	Maximum int32 `json:"maximum"`
	// MaxSurge is how many machines may be created above the desired count during a rolling update.
	MaxSurge intstr.IntOrString `json:"maxSurge"`
	// MaxUnavailable is how many machines may be unavailable during a rolling update.
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
	// Annotations are put on every Node of the pool.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels are put on every Node of the pool.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are put on every Node of the pool.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// MachineImage names the logical image and version; the provider maps it to its own image (an AMI, ...).
	MachineImage MachineImage `json:"machineImage,omitempty"`
	// Minimum is the smallest size of the pool.
	Minimum int32 `json:"minimum"`
	// Name is the name of the pool.
	Name string `json:"name"`
	// NodeAgentSecretName identifies the parts of the OperatingSystemConfig that require new machines when they
	// change: a new name means the pool must be rolled.
	// +optional
	NodeAgentSecretName *string `json:"nodeAgentSecretName,omitempty"`
	// ProviderConfig is the provider's own configuration of the pool.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	ProviderConfig *runtime.RawExtension `json:"providerConfig,omitempty"`
	// UserDataSecretRef selects the secret key holding the user data handed to the provider when a machine of the
	// pool is created (the OperatingSystemConfig's provision output).
	UserDataSecretRef corev1.SecretKeySelector `json:"userDataSecretRef"`
	// Volume is the root disk of the machines.
	// +optional
	Volume *Volume `json:"volume,omitempty"`
	// DataVolumes are additional disks of the machines.
	// +optional
	DataVolumes []DataVolume `json:"dataVolumes,omitempty"`
	// KubeletDataVolumeName names the data volume that holds the kubelet's state.
	// +optional
	KubeletDataVolumeName *string `json:"kubeletDataVolumeName,omitempty"`
	// Zones are the availability zones the machines are spread over.
	// +optional
	Zones []string `json:"zones,omitempty"`
	// MachineControllerManagerSettings tune the machine-controller-manager for the pool.
	// +optional
	MachineControllerManagerSettings *MachineControllerManagerSettings `json:"machineControllerManager,omitempty"`
	// KubernetesVersion is the Kubernetes version of the pool's kubelets.
	// +optional
	KubernetesVersion *string `json:"kubernetesVersion,omitempty"`
	// KubeletConfig is the kubelet configuration of the pool.
	// +optional
	KubeletConfig *KubeletConfig `json:"kubeletConfig,omitempty"`
	// NodeTemplate describes a machine's resources, so the cluster autoscaler can scale the pool up from zero.
	// +optional
	NodeTemplate *NodeTemplate `json:"nodeTemplate,omitempty"`
	// Architecture is the CPU architecture of the machines and their image, e.g. "amd64".
	// +optional
	Architecture *string `json:"architecture,omitempty"`
	// ClusterAutoscaler holds the cluster autoscaler options of the pool.
	// +optional
	ClusterAutoscaler *ClusterAutoscalerOptions `json:"clusterAutoscaler,omitempty"`
	// Priority is the weight of the pool when the cluster autoscaler picks one to scale.
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// UpdateStrategy is how machines are updated: one of the MachineUpdateStrategy values.
	// +optional
	UpdateStrategy *MachineUpdateStrategy `json:"updateStrategy,omitempty"`
}

// MachineUpdateStrategy says how the machines of a pool are updated.
type MachineUpdateStrategy string

// Machine update strategies.
const (
	// AutoRollingUpdate replaces machines by new ones.
	AutoRollingUpdate MachineUpdateStrategy = "AutoRollingUpdate"
	// AutoInPlaceUpdate updates machines in place, automatically.
	AutoInPlaceUpdate MachineUpdateStrategy = "AutoInPlaceUpdate"
	// ManualInPlaceUpdate updates machines in place when a user asks for it.
	ManualInPlaceUpdate MachineUpdateStrategy = "ManualInPlaceUpdate"
)

// MachineControllerManagerSettings tune the machine-controller-manager for a worker pool.
type MachineControllerManagerSettings struct {
	// MachineDrainTimeout is how long a drain may take before the machine is deleted anyway.
	// +optional
	MachineDrainTimeout *metav1.Duration `json:"machineDrainTimeout,omitempty"`
	// MachineHealthTimeout is how long a machine may be unhealthy before it is declared failed.
	// +optional
	MachineHealthTimeout *metav1.Duration `json:"machineHealthTimeout,omitempty"`
	// MachineCreationTimeout is how long a machine may take to join before it is declared failed.
	// +optional
	MachineCreationTimeout *metav1.Duration `json:"machineCreationTimeout,omitempty"`
	// MaxEvictRetries is how often a pod eviction is retried before the drain is declared failed.
	// +optional
	MaxEvictRetries *int32 `json:"maxEvictRetries,omitempty"`
	// NodeConditions are the node conditions that, true for MachineHealthTimeout, make a machine failed.
	// +optional
	NodeConditions []string `json:"nodeConditions,omitempty"`
	// InPlaceUpdateTimeout is how long an in-place update may take before it is declared failed.
	// +optional
	InPlaceUpdateTimeout *metav1.Duration `json:"inPlaceUpdateTimeout,omitempty"`
	// DisableHealthTimeout, when true, never declares a machine failed for being unhealthy (for in-place updates).
	// +optional
	DisableHealthTimeout *bool `json:"disableHealthTimeout,omitempty"`
	// AutoPreserveFailedMachineMax is how many failed machines of the pool may be preserved automatically.
	// +optional
	AutoPreserveFailedMachineMax *int32 `json:"autoPreserveFailedMachineMax,omitempty"`
	// MachinePreserveTimeout is how long a machine stays preserved.
	// +optional
	MachinePreserveTimeout *metav1.Duration `json:"machinePreserveTimeout,omitempty"`
}

// ClusterAutoscalerOptions are the cluster autoscaler options of a worker pool.
type ClusterAutoscalerOptions struct {
	// ScaleDownUtilizationThreshold is the utilisation (a fraction "0.0"–"1.0") below which a node may be removed.
	// +optional
	ScaleDownUtilizationThreshold *string `json:"scaleDownUtilizationThreshold,omitempty"`
	// ScaleDownGpuUtilizationThreshold is the GPU utilisation (a fraction) below which a node may be removed.
	// +optional
	ScaleDownGpuUtilizationThreshold *string `json:"scaleDownGpuUtilizationThreshold,omitempty"`
	// ScaleDownUnneededTime is how long a node must be unneeded before it may be removed.
	// +optional
	ScaleDownUnneededTime *metav1.Duration `json:"scaleDownUnneededTime,omitempty"`
	// ScaleDownUnreadyTime is how long an unready node must be unneeded before it may be removed.
	// +optional
	ScaleDownUnreadyTime *metav1.Duration `json:"scaleDownUnreadyTime,omitempty"`
	// MaxNodeProvisionTime is how long the autoscaler waits for a node to be provisioned.
	// +optional
	MaxNodeProvisionTime *metav1.Duration `json:"maxNodeProvisionTime,omitempty"`
}

// NodeTemplate describes the resources of a pool's machine.
type NodeTemplate struct {
	// Capacity is the expected capacity of a Node.
	Capacity corev1.ResourceList `json:"capacity"`
	// VirtualCapacity is the expected capacity in virtual extended resources.
	// +optional
	VirtualCapacity corev1.ResourceList `json:"virtualCapacity,omitempty"`
}

// MachineImage is the logical name and version of a machine image.
type MachineImage struct {
	// Name is the logical image name, e.g. "gardenlinux".
	Name string `json:"name"`
	// Version is the image version.
	Version string `json:"version"`
}

// Volume is the root disk of a pool's machines.
type Volume struct {
	// Name makes the volume referenceable.
	// +optional
	Name *string `json:"name,omitempty"`
	// Type is the provider's volume type.
	// +optional
	Type *string `json:"type,omitempty"`
	// Size is the size of the volume, e.g. "20Gi".
	Size string `json:"size"`
	// Encrypted says whether the volume is encrypted.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
}

// DataVolume is an additional disk of a pool's machines.
type DataVolume struct {
	// Name makes the volume referenceable.
	Name string `json:"name"`
	// Type is the provider's volume type.
	// +optional
	Type *string `json:"type,omitempty"`
	// Size is the size of the volume, e.g. "50Gi".
	Size string `json:"size"`
	// Encrypted says whether the volume is encrypted.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
}

// WorkerStatus is the status of a Worker.
type WorkerStatus struct {
	DefaultStatus `json:",inline"`
	// MachineDeployments are the machine deployments the extension made; the agent configures the cluster
	// autoscaler from them.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	MachineDeployments []MachineDeployment `json:"machineDeployments,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	// MachineDeploymentsLastUpdateTime is when MachineDeployments last changed.
	// +optional
	MachineDeploymentsLastUpdateTime *metav1.Time `json:"machineDeploymentsLastUpdateTime,omitempty"`
	// InPlaceUpdates is the state of in-place updates.
	// +optional
	InPlaceUpdates *InPlaceUpdatesWorkerStatus `json:"inPlaceUpdates,omitempty"`
}

// InPlaceUpdatesWorkerStatus is the state of in-place updates of a Worker.
type InPlaceUpdatesWorkerStatus struct {
	// WorkerPoolToHashMap maps each pool name to the hash of its in-place-updatable configuration.
	// +optional
	WorkerPoolToHashMap map[string]string `json:"workerPoolToHashMap,omitempty"`
}

// MachineDeployment is a machine deployment the extension made for a pool (one per pool and zone, usually).
type MachineDeployment struct {
	// Name is the name of the MachineDeployment.
	Name string `json:"name"`
	// Minimum is its smallest size.
	Minimum int32 `json:"minimum"`
	// Maximum is its largest size.
	Maximum int32 `json:"maximum"`
	// Priority is its weight when the cluster autoscaler picks one to scale.
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// AutoPreserveFailedMachineMax is how many of its failed machines may be preserved automatically.
	// +optional
	AutoPreserveFailedMachineMax *int32 `json:"autoPreserveFailedMachineMax,omitempty"`
}
