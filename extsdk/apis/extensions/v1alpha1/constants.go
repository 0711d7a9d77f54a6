package v1alpha1

// Annotations and their values, as Gardener spells them.
const (
	// AnnotationOperation asks for an operation: one of the Operation* values.
	AnnotationOperation = "gardener.cloud/operation"
	// AnnotationTimestamp is written with AnnotationOperation=reconcile (RFC 3339 with nanoseconds); an object is
	// ready only when its lastOperation was updated at or after it (truncated to the second).
	AnnotationTimestamp = "gardener.cloud/timestamp"

	// OperationReconcile asks for a reconcile; the extension removes it when it starts.
	OperationReconcile = "reconcile"
	// OperationMigrate asks the extension to clean up seed-local objects and save its state; removed at the end.
	OperationMigrate = "migrate"
	// OperationRestore asks the extension to restore from status.state and reconcile; removed at the end.
	OperationRestore = "restore"
	// OperationWaitForState tells the extension to do nothing while the agent writes the state to restore.
	OperationWaitForState = "wait-for-state"

	// AnnotationForceDeletion on a Shoot ("true") makes extensions force-delete instead of delete.
	AnnotationForceDeletion = "confirmation.gardener.cloud/force-deletion"
	// AnnotationConfirmDeletion ("true") must be on extension objects and CRDs before they are deleted.
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
	// LabelDeletionProtected marks CRDs (and objects) that need AnnotationConfirmDeletion before deletion.
	LabelDeletionProtected = "gardener.cloud/deletion-protected"
)

// Operation types.
const (
	LastOperationTypeCreate    LastOperationType = "Create"
	LastOperationTypeReconcile LastOperationType = "Reconcile"
	LastOperationTypeDelete    LastOperationType = "Delete"
	LastOperationTypeMigrate   LastOperationType = "Migrate"
	LastOperationTypeRestore   LastOperationType = "Restore"
)

// Operation states. Error is retried; Failed is not.
const (
	LastOperationStateProcessing LastOperationState = "Processing"
	LastOperationStateSucceeded  LastOperationState = "Succeeded"
	LastOperationStateError      LastOperationState = "Error"
	LastOperationStateFailed     LastOperationState = "Failed"
	LastOperationStatePending    LastOperationState = "Pending"
	LastOperationStateAborted    LastOperationState = "Aborted"
)

// Error codes. The ones marked non-retryable stop automatic retries of a shoot.
const (
	ErrorInfraUnauthenticated          ErrorCode = "ERR_INFRA_UNAUTHENTICATED" // non-retryable
	ErrorInfraUnauthorized             ErrorCode = "ERR_INFRA_UNAUTHORIZED"    // non-retryable
	ErrorInfraQuotaExceeded            ErrorCode = "ERR_INFRA_QUOTA_EXCEEDED"  // non-retryable
	ErrorInfraRateLimitsExceeded       ErrorCode = "ERR_INFRA_RATE_LIMITS_EXCEEDED"
	ErrorInfraDependencies             ErrorCode = "ERR_INFRA_DEPENDENCIES" // non-retryable
	ErrorRetryableInfraDependencies    ErrorCode = "ERR_RETRYABLE_INFRA_DEPENDENCIES"
	ErrorInfraResourcesDepleted        ErrorCode = "ERR_INFRA_RESOURCES_DEPLETED"
	ErrorCleanupClusterResources       ErrorCode = "ERR_CLEANUP_CLUSTER_RESOURCES"
	ErrorConfigurationProblem          ErrorCode = "ERR_CONFIGURATION_PROBLEM" // non-retryable
	ErrorRetryableConfigurationProblem ErrorCode = "ERR_RETRYABLE_CONFIGURATION_PROBLEM"
	ErrorProblematicWebhook            ErrorCode = "ERR_PROBLEMATIC_WEBHOOK" // non-retryable
)

// Shoot condition types that extensions report in status.conditions (never APIServerAvailable).
const (
	ShootAPIServerAvailable           = "APIServerAvailable"
	ShootControlPlaneHealthy          = "ControlPlaneHealthy"
	ShootEveryNodeReady               = "EveryNodeReady"
	ShootSystemComponentsHealthy      = "SystemComponentsHealthy"
	ShootObservabilityComponentsReady = "ObservabilityComponentsHealthy"
)

// Lifecycle strategies of Extension resources (ControllerRegistration spec.resources[].lifecycle).
const (
	BeforeKubeAPIServer = "BeforeKubeAPIServer"
	AfterKubeAPIServer  = "AfterKubeAPIServer"
	AfterWorker         = "AfterWorker"
)

// HeartbeatLeaseName is the Lease an extension renews in its namespace to show it is alive.
const HeartbeatLeaseName = "gardener-extension-heartbeat"

// How a Worker's machines join the shoot (Trellis' contract between the agent and Worker extensions; Gardener's
// machine-controller-manager makes a bootstrap token per machine with its own access to the shoot instead).
const (
	// BootstrapTokenPlaceholder stands in the provision OperatingSystemConfig's user data for the bootstrap token;
	// the Worker extension replaces it before handing the user data to a machine.
	BootstrapTokenPlaceholder = "<<BOOTSTRAP_TOKEN>>"
	// MachineBootstrapTokenSecret is the Secret in the shoot's seed namespace that holds, under
	// MachineBootstrapTokenKey, a bootstrap token "<id>.<secret>" of the shoot with which its kubelets request their
	// client certificates (TLS bootstrap); the agent creates the token in the shoot and this Secret.
	MachineBootstrapTokenSecret = "machine-bootstrap-token"
	// MachineBootstrapTokenKey is the data key of MachineBootstrapTokenSecret.
	MachineBootstrapTokenKey = "token"
	// KubeletBootstrapKubeconfigPath is where the provision user data puts the kubelet's bootstrap kubeconfig (the
	// shoot's API server, its CA, and BootstrapTokenPlaceholder as the token), Gardener's path.
	KubeletBootstrapKubeconfigPath = "/var/lib/kubelet/kubeconfig-bootstrap"
	// KubeletConfigPath is where the OperatingSystemConfig puts the kubelet's configuration (a KubeletConfiguration:
	// clusterDNS and clusterDomain of the shoot, among others), Gardener's path.
	KubeletConfigPath = "/var/lib/kubelet/config/kubelet"
)
