package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is an extension resource: every kind of this package except Cluster. The generic reconciler of extsdk and
// the agent's shoot flows work on Objects.
// +kubebuilder:object:generate=false
type Object interface {
	metav1.Object
	runtime.Object
	// GetExtensionSpec returns the common part of the spec; changes through it change the object.
	GetExtensionSpec() *DefaultSpec
	// GetExtensionStatus returns the common part of the status; changes through it change the object.
	GetExtensionStatus() *DefaultStatus
}

// ExtensionClass says which cluster an extension resource is for: "shoot" (the default), "seed" or "garden".
type ExtensionClass string

// Extension classes.
const (
	ExtensionClassShoot  ExtensionClass = "shoot"
	ExtensionClassSeed   ExtensionClass = "seed"
	ExtensionClassGarden ExtensionClass = "garden"
)

// DefaultSpec is the part of the spec every extension resource has.
type DefaultSpec struct {
	// Type is the extension type that reconciles the resource, e.g. "local" or "aws".
	Type string `json:"type"`
	// Class is the cluster the resource is for; unset means shoot. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +optional
	Class *ExtensionClass `json:"class,omitempty"`
	// ProviderConfig is the opaque configuration of the extension, copied from the Shoot.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	ProviderConfig *runtime.RawExtension `json:"providerConfig,omitempty"`
}

// DefaultStatus is the part of the status every extension resource has.
type DefaultStatus struct {
	// ProviderStatus is the opaque output of the extension, forwarded by the agent to later resources.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	ProviderStatus *runtime.RawExtension `json:"providerStatus,omitempty"`
	// Conditions are the health conditions the extension reports, with the shoot's condition types.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// LastError is the error of the last operation; nil after a success.
	// +optional
	LastError *LastError `json:"lastError,omitempty"`
	// LastOperation is the last operation on the resource.
	// +optional
	LastOperation *LastOperation `json:"lastOperation,omitempty"`
	// ObservedGeneration is the generation the last operation worked on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State is the extension's own state, saved in ShootState on migration and given back on restore.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	State *runtime.RawExtension `json:"state,omitempty"`
	// Resources are the resources the state refers to, migrated with it.
	// +optional
	Resources []NamedResourceReference `json:"resources,omitempty"`
}

// GetExtensionSpec implements Object for types that embed DefaultSpec.
func (s *DefaultSpec) GetExtensionSpec() *DefaultSpec { return s }

// GetExtensionStatus implements Object for types that embed DefaultStatus.
func (s *DefaultStatus) GetExtensionStatus() *DefaultStatus { return s }

// ConditionStatus is the status of a Condition.
type ConditionStatus string

// Condition statuses; Progressing is Gardener's addition to Kubernetes' three.
const (
	ConditionTrue        ConditionStatus = "True"
	ConditionFalse       ConditionStatus = "False"
	ConditionUnknown     ConditionStatus = "Unknown"
	ConditionProgressing ConditionStatus = "Progressing"
)

// Condition is Gardener's condition (core.gardener.cloud/v1beta1 Condition).
type Condition struct {
	// Type of the condition, e.g. SystemComponentsHealthy.
	Type string `json:"type"`
	// Status is True, False, Unknown or Progressing.
	Status ConditionStatus `json:"status"`
	// LastTransitionTime is when the status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// LastUpdateTime is when the condition was last written.
	LastUpdateTime metav1.Time `json:"lastUpdateTime"`
	// Reason is a machine-readable reason in CamelCase.
	Reason string `json:"reason"`
	// Message is a human-readable message.
	Message string `json:"message"`
	// Codes are error codes describing the condition.
	// +optional
	Codes []ErrorCode `json:"codes,omitempty"`
}

// LastOperationType is the kind of an operation.
type LastOperationType string

// LastOperationState is the state of an operation.
type LastOperationState string

// ErrorCode classifies an error, e.g. ERR_INFRA_UNAUTHORIZED.
type ErrorCode string

// LastOperation describes the last operation on a resource (core.gardener.cloud/v1beta1 LastOperation).
type LastOperation struct {
	// Description says what the operation does or did.
	Description string `json:"description"`
	// LastUpdateTime is when the operation was last written.
	LastUpdateTime metav1.Time `json:"lastUpdateTime"`
	// Progress is the completion in percent.
	Progress int32 `json:"progress"`
	// State is Processing, Succeeded, Error, Failed, Pending or Aborted.
	State LastOperationState `json:"state"`
	// Type is Create, Reconcile, Delete, Migrate or Restore.
	Type LastOperationType `json:"type"`
}

// LastError describes the error of the last operation (core.gardener.cloud/v1beta1 LastError).
type LastError struct {
	// Description of the error.
	Description string `json:"description"`
	// TaskID names the task that failed, when there is one.
	// +optional
	TaskID *string `json:"taskID,omitempty"`
	// Codes classify the error.
	// +optional
	Codes []ErrorCode `json:"codes,omitempty"`
	// LastUpdateTime is when the error was written.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// NamedResourceReference names a resource the extension uses (core.gardener.cloud/v1beta1 NamedResourceReference).
type NamedResourceReference struct {
	// Name of the reference.
	Name string `json:"name"`
	// ResourceRef points at the resource.
	ResourceRef CrossVersionObjectReference `json:"resourceRef"`
}

// CrossVersionObjectReference points at a resource of any kind (autoscaling/v1 CrossVersionObjectReference).
// +structType=atomic
type CrossVersionObjectReference struct {
	// Kind of the referent.
	Kind string `json:"kind"`
	// Name of the referent.
	Name string `json:"name"`
	// APIVersion of the referent.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}
