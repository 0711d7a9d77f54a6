package api

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind describes one kind the hub serves, as listed in proto/kindgen/kinds.go.
type Kind struct {
	Group      string
	Version    string
	Kind       string
	Message    protoreflect.FullName // the kind's proto message; its trellis.cli.v1.resource option names the kind in discovery
	Resource   string
	Namespaced bool
	Status     bool     // has the status subresource
	Binding    bool     // has the binding subresource: spec.seedName alone, as Gardener's shoots/binding
	Encrypted  bool     // stored encrypted at rest
	StoredAs   string   // group/version whose shape is stored, when this version is served by conversion
	Fields     []string // field-selector paths beyond metadata.name and metadata.namespace
}

// APIVersion is group/version, or the version alone for Kubernetes' core group.
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// GroupResource identifies the kind's storage, shared by all versions of it.
func (k Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.Group, Resource: k.Resource}
}

// GroupKind is the kind's group and kind, as used in errors.
func (k Kind) GroupKind() schema.GroupKind { return schema.GroupKind{Group: k.Group, Kind: k.Kind} }

// GroupVersionKind is the kind's group, version and kind.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func (k Kind) id() string { return k.Group + "/" + k.Version + "/" + k.Kind }

// KindFor returns the kind served under apiVersion and kind, if any.
func KindFor(apiVersion, kind string) (Kind, bool) {
	for _, k := range Kinds {
		if k.APIVersion() == apiVersion && k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// UnconditionalUpdate reports whether an update of the kind may leave out metadata.resourceVersion and then applies
// to the current object, as the kind's registry strategy allows in kube-apiserver or gardener-apiserver
// (AllowUnconditionalUpdate, kubernetes' pkg/registry and Gardener's pkg/apiserver/registry). Other kinds refuse such
// an update, of the object or of a subresource, as gardener-apiserver does for Shoots:
// "metadata.resourceVersion: Invalid value: 0: must be specified for an update".
func (k Kind) UnconditionalUpdate() bool { return unconditionalUpdates[k.GroupKind()] }

var unconditionalUpdates = map[schema.GroupKind]bool{
	{Kind: "ConfigMap"}: true, {Kind: "Event"}: true, {Kind: "Namespace"}: true, {Kind: "Secret"}: true,
	{Kind: "ServiceAccount"}: true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:         true,
	{Group: "core.gardener.cloud", Kind: "CloudProfile"}:              true,
	{Group: "core.gardener.cloud", Kind: "InternalSecret"}:            true,
	{Group: "core.gardener.cloud", Kind: "NamespacedCloudProfile"}:    true,
	{Group: "core.gardener.cloud", Kind: "Project"}:                   true,
	{Group: "core.gardener.cloud", Kind: "Quota"}:                     true,
	{Group: "core.gardener.cloud", Kind: "SecretBinding"}:             true,
	{Group: "core.gardener.cloud", Kind: "Seed"}:                      true,
}
