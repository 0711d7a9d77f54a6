package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// toKubeMeta converts metadata to apimachinery's type, so its validation can be used as is.
func toKubeMeta(m *metav1.ObjectMeta) *kmetav1.ObjectMeta {
	out := &kmetav1.ObjectMeta{
		Name: m.GetName(), GenerateName: m.GetGenerateName(), Namespace: m.GetNamespace(), UID: types.UID(m.GetUid()),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(), Labels: m.GetLabels(),
		Annotations: m.GetAnnotations(), Finalizers: m.GetFinalizers(), DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		ManagedFields: toKubeManagedFields(m.GetManagedFields()),
	}
	if t := m.GetCreationTimestamp(); t != nil {
		out.CreationTimestamp = kmetav1.NewTime(t.AsTime())
	}
	if t := m.GetDeletionTimestamp(); t != nil {
		dt := kmetav1.NewTime(t.AsTime())
		out.DeletionTimestamp = &dt
	}
	for _, o := range m.GetOwnerReferences() {
		out.OwnerReferences = append(out.OwnerReferences, kmetav1.OwnerReference{
			APIVersion: o.GetApiVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: types.UID(o.GetUid()),
			Controller: o.Controller, BlockOwnerDeletion: o.BlockOwnerDeletion,
		})
	}
	return out
}

// validateObjectMeta applies Kubernetes' metadata validation (names, labels, annotations, finalizers, owner
// references) and, on update, its immutability rules.
func validateObjectMeta(m, old *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	path := field.NewPath("metadata")
	km := toKubeMeta(m)
	if old == nil {
		if km.Name == "" && km.GenerateName != "" {
			// The store generates the name when it writes (Kubernetes' registry does before it validates); the
			// prefix is validated as a name prefix.
			errs := apivalidation.ValidateObjectMeta(km, namespaced, apivalidation.NameIsDNSSubdomain, path)
			return slices.DeleteFunc(errs, func(e *field.Error) bool { return e.Type == field.ErrorTypeRequired && e.Field == "metadata.name" })
		}
		return apivalidation.ValidateObjectMeta(km, namespaced, apivalidation.NameIsDNSSubdomain, path)
	}
	ko := toKubeMeta(old)
	// Server-owned fields come from the stored object; only what the client may change is compared.
	km.UID, km.CreationTimestamp, km.Generation = ko.UID, ko.CreationTimestamp, ko.Generation
	km.DeletionTimestamp, km.DeletionGracePeriodSeconds = ko.DeletionTimestamp, ko.DeletionGracePeriodSeconds
	if km.Namespace == "" {
		km.Namespace = ko.Namespace
	}
	errs := apivalidation.ValidateObjectMetaUpdate(km, ko, path)
	// Labels and annotations that did not change were validated when they were written: the regular expressions
	// are most of the cost of validating an update.
	if maps.Equal(km.Labels, ko.Labels) {
		km.Labels = nil
	}
	if maps.Equal(km.Annotations, ko.Annotations) {
		km.Annotations = nil
	}
	return append(errs, apivalidation.ValidateObjectMeta(km, namespaced, apivalidation.NameIsDNSSubdomain, path)...)
}

// fieldGetters builds field-selector getters for JSON paths such as "spec.seedName" of the message of obj.
// Only string-valued leaves are selectable, as in Kubernetes.
func fieldGetters(obj store.Object, paths []string) (map[string]func(store.Object) string, error) {
	out := map[string]func(store.Object) string{}
	for _, p := range paths {
		var fds []protoreflect.FieldDescriptor
		md := obj.ProtoReflect().Descriptor()
		for i, seg := range strings.Split(p, ".") {
			fd := md.Fields().ByJSONName(seg)
			if fd == nil {
				return nil, fmt.Errorf("field selector %q: %s has no field %q", p, md.FullName(), seg)
			}
			fds = append(fds, fd)
			if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
				md = fd.Message()
				continue
			}
			if fd.Kind() != protoreflect.StringKind || fd.IsList() || fd.IsMap() || i != len(strings.Split(p, "."))-1 {
				return nil, fmt.Errorf("field selector %q: only string fields can be selected", p)
			}
		}
		out[p] = func(o store.Object) string {
			m := o.ProtoReflect()
			for _, fd := range fds[:len(fds)-1] {
				if !m.Has(fd) {
					return ""
				}
				m = m.Get(fd).Message()
			}
			return m.Get(fds[len(fds)-1]).String()
		}
	}
	return out, nil
}

// indexesFor returns the secondary indexes of a kind: "seed" for everything that belongs to a seed, so the agent
// stream and the authorizer can find "everything of seed X" without scanning, IndexOwnerUID, and the extra ones given
// to NewRegistry.
func indexesFor(k Kind, extra map[string]func(store.Object) []string) map[string]func(store.Object) []string {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]func(store.Object) []string{}
	}
	if seed := seedIndex(k); seed != nil {
		out["seed"] = seed
	}
	out[IndexOwnerUID] = ownerUIDs
	return out
}

// IndexOwnerUID is the index of every kind by the uids of its owner references: the garbage collector finds an
// object's dependents through it.
const IndexOwnerUID = "ownerUID"

func ownerUIDs(obj store.Object) []string {
	refs := obj.GetMetadata().GetOwnerReferences()
	if len(refs) == 0 {
		return nil
	}
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.GetUid())
	}
	return out
}

// seedIndex returns the index function of "seed": the seeds named by the kind's seed fields; nil when it has none.
func seedIndex(k Kind) func(store.Object) []string {
	var paths []string
	for _, f := range k.Fields {
		if f == "spec.seedName" || f == "status.seedName" || f == "spec.seedRef.name" {
			paths = append(paths, f)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	return func(o store.Object) []string {
		var seeds []string
		for _, p := range paths {
			if v := getString(o, p); v != "" && (len(seeds) == 0 || seeds[0] != v) {
				seeds = append(seeds, v)
			}
		}
		return seeds
	}
}

// getString reads a string field at a JSON path; "" when any part is unset.
func getString(o proto.Message, path string) string {
	m := o.ProtoReflect()
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		fd := m.Descriptor().Fields().ByJSONName(seg)
		if fd == nil || !m.Has(fd) {
			return ""
		}
		if i == len(segs)-1 {
			if fd.Kind() != protoreflect.StringKind {
				return ""
			}
			return m.Get(fd).String()
		}
		if fd.Kind() != protoreflect.MessageKind {
			return ""
		}
		m = m.Get(fd).Message()
	}
	return ""
}
