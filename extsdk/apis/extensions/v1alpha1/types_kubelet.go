package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletConfig is the kubelet configuration of a worker pool (core.gardener.cloud/v1beta1 KubeletConfig as far as
// the Worker carries it).
type KubeletConfig struct {
	// FeatureGates switches kubelet feature gates on or off.
	// +optional
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ContainerLogMaxSize is the size at which a container log is rotated, e.g. "100Mi".
	// +optional
	ContainerLogMaxSize *resource.Quantity `json:"containerLogMaxSize,omitempty"`
	// ContainerLogMaxFiles is how many log files a container may keep.
	// +optional
	ContainerLogMaxFiles *int32 `json:"containerLogMaxFiles,omitempty"`
	// CPUCFSQuota switches CPU throttling of pods through CFS quota.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
	// CPUManagerPolicy is the CPU manager policy, e.g. "none" or "static".
	// +optional
	CPUManagerPolicy *string `json:"cpuManagerPolicy,omitempty"`
	// EvictionHard are the thresholds that evict pods at once.
	// +optional
	EvictionHard *KubeletConfigEviction `json:"evictionHard,omitempty"`
	// EvictionMaxPodGracePeriod is the longest grace period, in seconds, of a pod evicted by a soft threshold.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// EvictionMinimumReclaim is how much the kubelet reclaims beyond a threshold once it evicts.
	// +optional
	EvictionMinimumReclaim *KubeletConfigEvictionMinimumReclaim `json:"evictionMinimumReclaim,omitempty"`
	// EvictionPressureTransitionPeriod is how long the kubelet waits before leaving an eviction pressure condition.
	// +optional
	EvictionPressureTransitionPeriod *metav1.Duration `json:"evictionPressureTransitionPeriod,omitempty"`
	// EvictionSoft are the thresholds that evict pods once they held for their grace period.
	// +optional
	EvictionSoft *KubeletConfigEviction `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod are the grace periods of the EvictionSoft thresholds.
	// +optional
	EvictionSoftGracePeriod *KubeletConfigEvictionSoftGracePeriod `json:"evictionSoftGracePeriod,omitempty"`
	// FailSwapOn makes the kubelet refuse to start when swap is on.
	// +optional
	FailSwapOn *bool `json:"failSwapOn,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage in percent that starts image garbage collection.
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage in percent image garbage collection frees down to.
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// ImageMinimumGCAge is the youngest an unused image may be to be collected.
	// +optional
	ImageMinimumGCAge *metav1.Duration `json:"imageMinimumGCAge,omitempty"`
	// ImageMaximumGCAge is the age after which an unused image is collected.
	// +optional
	ImageMaximumGCAge *metav1.Duration `json:"imageMaximumGCAge,omitempty"`
	// ImagePullCredentialsVerificationPolicy is the kubelet's imagePullCredentialsVerificationPolicy.
	// +optional
	ImagePullCredentialsVerificationPolicy *string `json:"imagePullCredentialsVerificationPolicy,omitempty"`
	// KubeReserved are the resources reserved for the kubelet and the container runtime.
	// +optional
	KubeReserved *KubeletConfigReserved `json:"kubeReserved,omitempty"`
	// MaxParallelImagePulls is how many images may be pulled at once.
	// +optional
	MaxParallelImagePulls *int32 `json:"maxParallelImagePulls,omitempty"`
	// MaxPods is the largest number of pods on a node.
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// MemorySwap configures the swap memory available to containers.
	// +optional
	MemorySwap *MemorySwapConfiguration `json:"memorySwap,omitempty"`
	// PodPIDsLimit is the largest number of process IDs per pod.
	// +optional
	PodPIDsLimit *int64 `json:"podPidsLimit,omitempty"`
	// PreloadedImagesVerificationAllowlist are the images exempt from credential re-verification.
	// +optional
	PreloadedImagesVerificationAllowlist []string `json:"preloadedImagesVerificationAllowlist,omitempty"`
	// ProtectKernelDefaults makes the kubelet require the kernel tunables to be its defaults.
	// +optional
	ProtectKernelDefaults *bool `json:"protectKernelDefaults,omitempty"`
	// RegistryBurst is the burst size of image pulls.
	// +optional
	RegistryBurst *int32 `json:"registryBurst,omitempty"`
	// RegistryPullQPS is the limit of image pulls per second; 0 means no limit.
	// +optional
	RegistryPullQPS *int32 `json:"registryPullQPS,omitempty"`
	// SeccompDefault makes RuntimeDefault the default seccomp profile.
	// +optional
	SeccompDefault *bool `json:"seccompDefault,omitempty"`
	// SerializeImagePulls pulls one image at a time.
	// +optional
	SerializeImagePulls *bool `json:"serializeImagePulls,omitempty"`
	// SingleProcessOOMKill keeps memory.oom.group unset on cgroup v2, so the OOM killer kills single processes.
	// +optional
	SingleProcessOOMKill *bool `json:"singleProcessOOMKill,omitempty"`
	// StreamingConnectionIdleTimeout is how long a streaming connection may be idle before it is closed.
	// +optional
	StreamingConnectionIdleTimeout *metav1.Duration `json:"streamingConnectionIdleTimeout,omitempty"`
}

// KubeletConfigEviction are eviction thresholds, e.g. "100Mi" or "5%".
type KubeletConfigEviction struct {
	// MemoryAvailable is the threshold of free memory.
	// +optional
	MemoryAvailable *string `json:"memoryAvailable,omitempty"`
	// ImageFSAvailable is the threshold of free space on the image filesystem.
	// +optional
	ImageFSAvailable *string `json:"imageFSAvailable,omitempty"`
	// ImageFSInodesFree is the threshold of free inodes on the image filesystem.
	// +optional
	ImageFSInodesFree *string `json:"imageFSInodesFree,omitempty"`
	// NodeFSAvailable is the threshold of free space on the node filesystem.
	// +optional
	NodeFSAvailable *string `json:"nodeFSAvailable,omitempty"`
	// NodeFSInodesFree is the threshold of free inodes on the node filesystem.
	// +optional
	NodeFSInodesFree *string `json:"nodeFSInodesFree,omitempty"`
}

// KubeletConfigEvictionMinimumReclaim are the amounts reclaimed beyond the eviction thresholds.
type KubeletConfigEvictionMinimumReclaim struct {
	// MemoryAvailable is the memory to reclaim.
	// +optional
	MemoryAvailable *resource.Quantity `json:"memoryAvailable,omitempty"`
	// ImageFSAvailable is the image filesystem space to reclaim.
	// +optional
	ImageFSAvailable *resource.Quantity `json:"imageFSAvailable,omitempty"`
	// ImageFSInodesFree is the image filesystem inodes to reclaim.
	// +optional
	ImageFSInodesFree *resource.Quantity `json:"imageFSInodesFree,omitempty"`
	// NodeFSAvailable is the node filesystem space to reclaim.
	// +optional
	NodeFSAvailable *resource.Quantity `json:"nodeFSAvailable,omitempty"`
	// NodeFSInodesFree is the node filesystem inodes to reclaim.
	// +optional
	NodeFSInodesFree *resource.Quantity `json:"nodeFSInodesFree,omitempty"`
}

// KubeletConfigEvictionSoftGracePeriod are the grace periods of the soft eviction thresholds.
type KubeletConfigEvictionSoftGracePeriod struct {
	// MemoryAvailable is the grace period of the memory threshold.
	// +optional
	MemoryAvailable *metav1.Duration `json:"memoryAvailable,omitempty"`
	// ImageFSAvailable is the grace period of the image filesystem space threshold.
	// +optional
	ImageFSAvailable *metav1.Duration `json:"imageFSAvailable,omitempty"`
	// ImageFSInodesFree is the grace period of the image filesystem inodes threshold.
	// +optional
	ImageFSInodesFree *metav1.Duration `json:"imageFSInodesFree,omitempty"`
	// NodeFSAvailable is the grace period of the node filesystem space threshold.
	// +optional
	NodeFSAvailable *metav1.Duration `json:"nodeFSAvailable,omitempty"`
	// NodeFSInodesFree is the grace period of the node filesystem inodes threshold.
	// +optional
	NodeFSInodesFree *metav1.Duration `json:"nodeFSInodesFree,omitempty"`
}

// KubeletConfigReserved are resources reserved on a node.
type KubeletConfigReserved struct {
	// CPU is the reserved CPU.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory is the reserved memory.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// EphemeralStorage is the reserved ephemeral storage.
	// +optional
	EphemeralStorage *resource.Quantity `json:"ephemeralStorage,omitempty"`
	// PID is the reserved number of process IDs.
	// +optional
	PID *resource.Quantity `json:"pid,omitempty"`
}

// SwapBehavior is the kubelet's swap behaviour for containers.
type SwapBehavior string

// Swap behaviours.
const (
	// NoSwap gives containers no swap.
	NoSwap SwapBehavior = "NoSwap"
	// LimitedSwap gives containers swap in proportion to their memory request.
	LimitedSwap SwapBehavior = "LimitedSwap"
)

// MemorySwapConfiguration configures the swap memory available to containers.
type MemorySwapConfiguration struct {
	// SwapBehavior is NoSwap or LimitedSwap.
	// +optional
	SwapBehavior *SwapBehavior `json:"swapBehavior,omitempty"`
}
