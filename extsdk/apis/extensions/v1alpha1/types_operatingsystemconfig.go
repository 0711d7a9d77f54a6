package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ Object = (*OperatingSystemConfig)(nil)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=operatingsystemconfigs,singular=operatingsystemconfig,shortName=osc
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="gardener.cloud/deletion-protected=true"
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the operating system configuration."
// +kubebuilder:printcolumn:name=Purpose,JSONPath=".spec.purpose",type=string,description="The purpose of the operating system configuration."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of operating system configuration."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"

// OperatingSystemConfig asks the operating system extension to turn units and files into the configuration of a
// worker pool's machines: for purpose "provision" the user data that boots a machine, for purpose "reconcile" the
// units and files gardener-node-agent keeps in place on running machines.
type OperatingSystemConfig struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired configuration; immutable once the object is being deleted.
	Spec OperatingSystemConfigSpec `json:"spec"`
	// +optional
	Status OperatingSystemConfigStatus `json:"status"`
}

// GetExtensionSpec implements Object.
func (o *OperatingSystemConfig) GetExtensionSpec() *DefaultSpec { return &o.Spec.DefaultSpec }

// GetExtensionStatus implements Object.
func (o *OperatingSystemConfig) GetExtensionStatus() *DefaultStatus { return &o.Status.DefaultStatus }

// +kubebuilder:object:root=true

// OperatingSystemConfigList is a list of OperatingSystemConfigs.
type OperatingSystemConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the OperatingSystemConfigs.
	Items []OperatingSystemConfig `json:"items"`
}

// OperatingSystemConfigPurpose says what the output of an OperatingSystemConfig is for.
type OperatingSystemConfigPurpose string

// Purposes of an OperatingSystemConfig.
const (
	// OperatingSystemConfigPurposeProvision: the output is the user data that bootstraps a new machine.
	OperatingSystemConfigPurposeProvision OperatingSystemConfigPurpose = "provision"
	// OperatingSystemConfigPurposeReconcile: the output is applied on running machines by gardener-node-agent.
	OperatingSystemConfigPurposeReconcile OperatingSystemConfigPurpose = "reconcile"
)

// Well-known values around OperatingSystemConfigs.
const (
	// OperatingSystemConfigDefaultFilePermission is the permission of a file that sets none (octal 0644).
	OperatingSystemConfigDefaultFilePermission int32 = 0o644
	// OperatingSystemConfigSecretDataKey is the key of the generated configuration in the secret of
	// status.cloudConfig.secretRef.
	OperatingSystemConfigSecretDataKey = "cloud_config"
)

// OperatingSystemConfigSpec is the spec of an OperatingSystemConfig.
type OperatingSystemConfigSpec struct {
	DefaultSpec `json:",inline"`
	// CRIConfig configures the container runtime interface.
	// +optional
	CRIConfig *CRIConfig `json:"criConfig,omitempty"`
	// Purpose is provision or reconcile. Immutable.
	Purpose OperatingSystemConfigPurpose `json:"purpose"`
	// Units are the (systemd) units of the configuration.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	Units []Unit `json:"units,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	// Files are the files to write to the host's file system.
	// +patchMergeKey=path
	// +patchStrategy=merge
	// +optional
	Files []File `json:"files,omitempty" patchStrategy:"merge" patchMergeKey:"path"`
	// InPlaceUpdates configures in-place updates of the machines.
	// +optional
	InPlaceUpdates *InPlaceUpdates `json:"inPlaceUpdates,omitempty"`
}

// UnitCommand is what to do with a unit.
type UnitCommand string

// Unit commands.
const (
	// CommandStart starts the unit.
	CommandStart UnitCommand = "start"
	// CommandRestart restarts the unit.
	CommandRestart UnitCommand = "restart"
	// CommandStop stops the unit.
	CommandStop UnitCommand = "stop"
)

// Unit is a (systemd) unit.
type Unit struct {
	// Name is the unit name, e.g. "kubelet.service".
	Name string `json:"name"`
	// Command is start, restart or stop.
	// +optional
	Command *UnitCommand `json:"command,omitempty"`
	// Enable says whether the unit is enabled.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// Content is the unit file.
	// +optional
	Content *string `json:"content,omitempty"`
	// DropIns are the drop-ins of the unit.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	DropIns []DropIn `json:"dropIns,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	// FilePaths are the files the unit depends on; a change of one restarts the unit. Each must be the path of a
	// File of the OperatingSystemConfig.
	// +optional
	FilePaths []string `json:"filePaths,omitempty"`
}

// DropIn is a drop-in of a systemd unit.
type DropIn struct {
	// Name is the drop-in's file name.
	Name string `json:"name"`
	// Content is the drop-in's content.
	Content string `json:"content"`
}

// File is a file to write to the host's file system, with its content inline, in a secret or in an image.
type File struct {
	// Path is where the file is written.
	Path string `json:"path"`
	// Permissions are the file's permissions; unset leaves the operating system's default.
	// +optional
	Permissions *int32 `json:"permissions,omitempty"`
	// Content is the file's content.
	Content FileContent `json:"content"`
	// HostName, when set, writes the file only on the host of that name. Files may share a path only if each of
	// them has a HostName.
	// +optional
	HostName *string `json:"hostName,omitempty"`
}

// FileContent is the content of a File: exactly one of SecretRef, Inline and ImageRef.
type FileContent struct {
	// SecretRef takes the content from a secret in the same namespace.
	// +optional
	SecretRef *FileContentSecretRef `json:"secretRef,omitempty"`
	// Inline holds the content.
	// +optional
	Inline *FileContentInline `json:"inline,omitempty"`
	// TransmitUnencoded asks the extension to send the content to the node without encoding it, so it can still be
	// changed in clear text on the way.
	// +optional
	TransmitUnencoded *bool `json:"transmitUnencoded,omitempty"`
	// ImageRef takes the content from a file in a container image.
	// +optional
	ImageRef *FileContentImageRef `json:"imageRef,omitempty"`
}

// FileContentSecretRef names a key of a secret in the same namespace.
type FileContentSecretRef struct {
	// Name is the secret's name.
	Name string `json:"name"`
	// DataKey is the key in the secret's data.
	DataKey string `json:"dataKey"`
}

// FileContentInline is inline file content.
type FileContentInline struct {
	// Encoding is the encoding of Data: FileEncodingPlain or FileEncodingB64 (base64).
	Encoding string `json:"encoding"`
	// Data is the content, encoded as Encoding says.
	Data string `json:"data"`
}

// File content encodings.
const (
	// FileEncodingPlain is plain text content.
	FileEncodingPlain = ""
	// FileEncodingB64 is base64-encoded content.
	FileEncodingB64 = "b64"
)

// FileContentImageRef names a file in a container image.
type FileContentImageRef struct {
	// Image is the image reference with tag.
	Image string `json:"image"`
	// FilePathInImage is the path of the file in the image.
	FilePathInImage string `json:"filePathInImage"`
}

// InPlaceUpdates configures in-place updates of a pool's machines.
type InPlaceUpdates struct {
	// OperatingSystemVersion is the operating system version to update to.
	OperatingSystemVersion string `json:"operatingSystemVersion"`
	// KubeletVersion is the kubelet version to update to.
	KubeletVersion string `json:"kubelet"`
	// CredentialsRotation says when credential rotations were last started.
	// +optional
	CredentialsRotation *CredentialsRotation `json:"credentialsRotation,omitempty"`
}

// CredentialsRotation says when credential rotations were last started.
type CredentialsRotation struct {
	// CertificateAuthorities is the rotation of the certificate authorities.
	// +optional
	CertificateAuthorities *CARotation `json:"certificateAuthorities,omitempty"`
	// ServiceAccountKey is the rotation of the service account signing key.
	// +optional
	ServiceAccountKey *ServiceAccountKeyRotation `json:"serviceAccountKey,omitempty"`
}

// CARotation is the rotation of the certificate authorities.
type CARotation struct {
	// LastInitiationTime is when the rotation was last started.
	// +optional
	LastInitiationTime *metav1.Time `json:"lastInitiationTime,omitempty"`
}

// ServiceAccountKeyRotation is the rotation of the service account signing key.
type ServiceAccountKeyRotation struct {
	// LastInitiationTime is when the rotation was last started.
	// +optional
	LastInitiationTime *metav1.Time `json:"lastInitiationTime,omitempty"`
}

// CRIName names a container runtime interface implementation.
type CRIName string

// CRINameContainerD is containerd, the only supported CRI.
const CRINameContainerD CRIName = "containerd"

// CgroupDriverName names a cgroup driver.
type CgroupDriverName string

// Cgroup drivers.
const (
	// CgroupDriverCgroupfs is the cgroupfs driver.
	CgroupDriverCgroupfs CgroupDriverName = "cgroupfs"
	// CgroupDriverSystemd is the systemd driver.
	CgroupDriverSystemd CgroupDriverName = "systemd"
)

// CRIConfig configures the container runtime interface.
type CRIConfig struct {
	// Name is the CRI implementation; only containerd. Immutable.
	// +kubebuilder:validation:Enum=containerd
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	Name CRIName `json:"name"`
	// CgroupDriver is the CRI's cgroup driver: cgroupfs or systemd.
	// +optional
	CgroupDriver *CgroupDriverName `json:"cgroupDriver,omitempty"`
	// Containerd configures containerd; only for purpose reconcile.
	// +optional
	Containerd *ContainerdConfig `json:"containerd,omitempty"`
}

// ContainerdConfig configures containerd.
type ContainerdConfig struct {
	// Registries configures registry hosts (hosts.toml).
	// +optional
	Registries []RegistryConfig `json:"registries,omitempty"`
	// SandboxImage is the pause image.
	SandboxImage string `json:"sandboxImage"`
	// Plugins configures the plugins section of containerd's config.toml.
	// +optional
	Plugins []PluginConfig `json:"plugins,omitempty"`
}

// RegistryConfig configures the hosts of one upstream registry.
type RegistryConfig struct {
	// Upstream is the upstream name of the registry, e.g. "docker.io".
	Upstream string `json:"upstream"`
	// Server is the URL of the upstream's registry server (the server field of hosts.toml).
	// +optional
	Server *string `json:"server,omitempty"`
	// Hosts are the registry hosts (the host entries of hosts.toml).
	// +optional
	Hosts []RegistryHost `json:"hosts,omitempty"`
	// ReadinessProbe asks to probe the hosts before they are added to containerd's configuration.
	// +optional
	ReadinessProbe *bool `json:"readinessProbe,omitempty"`
}

// RegistryCapability is an operation a registry host can do.
type RegistryCapability string

// Registry capabilities.
const (
	// PullCapability: the host can pull.
	PullCapability RegistryCapability = "pull"
	// ResolveCapability: the host can resolve names to digests.
	ResolveCapability RegistryCapability = "resolve"
	// PushCapability: the host can push.
	PushCapability RegistryCapability = "push"
)

// RegistryHost is a registry host (mirror).
type RegistryHost struct {
	// URL is the endpoint of the host.
	URL string `json:"url"`
	// Capabilities are what the host can do; containerd defaults to pull and resolve.
	// +optional
	Capabilities []RegistryCapability `json:"capabilities,omitempty"`
	// CACerts are paths of CA certificates for TLS to the host.
	// +optional
	CACerts []string `json:"caCerts,omitempty"`
	// OverridePath sets override_path, so the URL holds the full API path.
	// +optional
	OverridePath *bool `json:"overridePath,omitempty"`
}

// PluginPathOperation is what to do at a plugin path.
type PluginPathOperation string

// Plugin path operations.
const (
	// AddPluginPathOperation adds (or merges) the values at the path; the default.
	AddPluginPathOperation PluginPathOperation = "add"
	// RemovePluginPathOperation removes the path.
	RemovePluginPathOperation PluginPathOperation = "remove"
)

// PluginConfig sets values in the plugins section of containerd's config.toml.
type PluginConfig struct {
	// Op is add (default) or remove.
	// +optional
	Op *PluginPathOperation `json:"op,omitempty"`
	// Path is the path of the table in the plugins section.
	Path []string `json:"path"`
	// Values is a JSON object put at Path; unset creates only the table.
	// +optional
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// OperatingSystemConfigStatus is the status of an OperatingSystemConfig.
type OperatingSystemConfigStatus struct {
	DefaultStatus `json:",inline"`
	// ExtensionUnits are units the extension adds.
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	ExtensionUnits []Unit `json:"extensionUnits,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	// ExtensionFiles are files the extension adds.
	// +patchMergeKey=path
	// +patchStrategy=merge
	// +optional
	ExtensionFiles []File `json:"extensionFiles,omitempty" patchStrategy:"merge" patchMergeKey:"path"`
	// CloudConfig points at the generated configuration (set for purpose provision).
	// +optional
	CloudConfig *CloudConfig `json:"cloudConfig,omitempty"`
	// InPlaceUpdates holds what the extension says about in-place updates.
	// +optional
	InPlaceUpdates *InPlaceUpdatesStatus `json:"inPlaceUpdates,omitempty"`
}

// CloudConfig points at the secret holding the generated configuration, which may be confidential.
type CloudConfig struct {
	// SecretRef points at the secret; the configuration is under OperatingSystemConfigSecretDataKey.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// InPlaceUpdatesStatus holds what the extension says about in-place updates.
type InPlaceUpdatesStatus struct {
	// OSUpdate is how to update the operating system in place.
	// +optional
	OSUpdate *OSUpdate `json:"osUpdate,omitempty"`
}

// OSUpdate is the command that updates the operating system of a machine in place.
type OSUpdate struct {
	// Command is the command to run.
	Command string `json:"command"`
	// Args are its arguments.
	// +optional
	Args []string `json:"args,omitempty"`
}
