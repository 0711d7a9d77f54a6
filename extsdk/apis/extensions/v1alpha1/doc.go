// Package v1alpha1 holds the Go types of Gardener's extensions.gardener.cloud/v1alpha1 API: Infrastructure,
// ControlPlane, Worker, DNSRecord, Network, OperatingSystemConfig, ContainerRuntime, Extension, BackupBucket,
// BackupEntry, Bastion and Cluster, with the common DefaultSpec and DefaultStatus every kind but Cluster embeds.
//
// The JSON field names and types are Gardener's, so Gardener's own extensions run against a Trellis seed and Trellis
// extensions run against a Gardener seed. The CRD manifests in deploy/crds are generated from these types by
// controller-gen (`make generate`, markers below and on each type); deep-copy functions are generated into
// zz_generated.deepcopy.go. Constants (annotations, operation types and states, error codes) are in constants.go,
// enum values of a kind (DNS record types, OperatingSystemConfig purposes, ...) beside its type. ObjectKinds lists a
// zero object of every kind but Cluster, for code that handles all kinds alike.
//
// Every kind implements Object with its own GetExtensionSpec/GetExtensionStatus (returning &obj.Spec.DefaultSpec
// and &obj.Status.DefaultStatus): Go promotes methods only from fields embedded in the kind itself, not from the
// DefaultSpec embedded in its Spec.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.gardener.cloud
package v1alpha1
