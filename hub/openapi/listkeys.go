package openapi

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// listMapKeys are the keys that identify the elements of lists of a message, by the message's full name: Gardener's
// patchMergeKey markers (conditions and constraints by type, tolerations by key, advertised addresses by name) and
// the keys its lists are merged by in practice (workers by name, extensions by type, named resource references by
// name), with Kubernetes' own (owner references by uid). Such a list is written with x-kubernetes-list-type: map and
// x-kubernetes-list-map-keys, which server-side apply (structured-merge-diff, through managedfields' type converter)
// and strategic merge patches read, as kube-apiserver reads them from a CRD's schema; other lists are atomic.
var listMapKeys = map[protoreflect.FullName][]string{
	"trellis.core.v1beta1.Worker":                 {"name"},
	"trellis.core.v1beta1.Extension":              {"type"},
	"trellis.core.v1beta1.NamedResourceReference": {"name"},
	"trellis.core.v1beta1.ShootAdvertisedAddress": {"name"},
	"trellis.meta.v1.Condition":                   {"type"},
	"trellis.meta.v1.Toleration":                  {"key"},
	"trellis.meta.v1.OwnerReference":              {"uid"},
}

// setLists are the lists of scalars that are sets, by field: Kubernetes' ObjectMeta.finalizers
// (+listType=set), so that server-side apply lets managers own single finalizers.
var setLists = map[protoreflect.FullName]bool{
	"trellis.meta.v1.ObjectMeta.finalizers": true,
}

// setListType marks the schema of a list field whose elements have map keys, or that is a set.
func setListType(out *spec.Schema, fd protoreflect.FieldDescriptor) {
	if setLists[fd.FullName()] {
		if out.Extensions == nil {
			out.Extensions = spec.Extensions{}
		}
		out.Extensions["x-kubernetes-list-type"] = "set"
		return
	}
	if fd.Kind() != protoreflect.MessageKind {
		return
	}
	keys, ok := listMapKeys[fd.Message().FullName()]
	if !ok {
		return
	}
	if out.Extensions == nil {
		out.Extensions = spec.Extensions{}
	}
	out.Extensions["x-kubernetes-list-type"] = "map"
	out.Extensions["x-kubernetes-list-map-keys"] = keys
	out.Extensions["x-kubernetes-patch-merge-key"] = keys[0]
	out.Extensions["x-kubernetes-patch-strategy"] = "merge"
}
