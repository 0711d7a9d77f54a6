package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kvalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/gateway"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// PatchTypeApply is server-side apply: the patch is the applier's whole intent (YAML or JSON), merged into the
// object by structured-merge-diff over the kind's OpenAPI schema, with the fields it sets owned by its field manager.
const PatchTypeApply = gateway.PatchTypeApply

// fieldManagers are a kind's server-side apply field managers, apimachinery's (managedfields), by subresource (""
// for the object itself): they record each write in metadata.managedFields as kube-apiserver's do, and merge
// applies. Nil when the registry has no type converter (Config.TypeConverter).
type fieldManagers map[string]*managedfields.FieldManager

func newFieldManagers(tc managedfields.TypeConverter, k Kind) (fieldManagers, error) {
	if tc == nil {
		return nil, nil
	}
	gvk := k.GroupVersionKind()
	out := fieldManagers{}
	subs := []string{""}
	if k.Status {
		subs = append(subs, SubresourceStatus)
	}
	if k.Binding {
		subs = append(subs, SubresourceBinding)
	}
	conv := unstructuredConverter{gvk: gvk}
	for _, sub := range subs {
		fm, err := managedfields.NewDefaultFieldManager(tc, conv, conv, conv, gvk, gvk.GroupVersion(), sub, nil)
		if err != nil {
			return nil, fmt.Errorf("kind %s: %w", k.id(), err)
		}
		out[sub] = fm
	}
	return out, nil
}

// unstructuredConverter is the field managers' object converter, defaulter and creater for a kind served in one
// version: objects are unstructured and already in that version. Managed fields recorded in another version of the
// kind (a ControllerDeployment's v1 and v1beta1) are not converted: structured-merge-diff drops such entries when it
// has to compare them (as kube-apiserver does for a version it no longer serves).
type unstructuredConverter struct{ gvk schema.GroupVersionKind }

func (c unstructuredConverter) Convert(in, out, _ any) error {
	return fmt.Errorf("conversion of %T to %T is not supported", in, out)
}

func (c unstructuredConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{c.gvk}); ok && gvk == c.gvk {
		return in, nil
	}
	return nil, runtime.NewNotRegisteredGVKErrForTarget("trellis", c.gvk, target)
}

func (c unstructuredConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// Default does nothing: the kinds' defaulting runs on the merged object afterwards, as on every write.
func (c unstructuredConverter) Default(runtime.Object) {}

func (c unstructuredConverter) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// managerName is a write's field manager: its fieldManager option (gateway.MetadataFieldManager), or else the
// first part of the client's user agent, as kube-apiserver names it.
func managerName(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(gateway.MetadataFieldManager); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	ua := ""
	if v := md.Get("x-forwarded-user-agent"); len(v) > 0 {
		ua = v[0]
	} else if v := md.Get("user-agent"); len(v) > 0 {
		ua = v[0]
	}
	ua, _, _ = strings.Cut(ua, "/")
	if len(ua) > 128 {
		ua = ua[:128]
	}
	return ua
}

func metadataTrue(ctx context.Context, key string) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(key)
	return len(v) > 0 && v[0] == "true"
}

// toUnstructured is obj's JSON as an unstructured object of the kind.
func (s *Server[T, L, E, PE]) toUnstructured(obj T) (*unstructured.Unstructured, error) {
	b, err := kjson.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return jsonToUnstructured(b, s.gvk())
}

// jsonToUnstructured reads the JSON of an object of kind gvk.
func jsonToUnstructured(doc []byte, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if err := utiljson.Unmarshal(doc, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// recordUpdate records a write other than an apply (create: live is nil; update, non-apply patch, subresource
// writes) in obj's managedFields, as kube-apiserver's field manager does for an Update operation: the manager owns
// the fields it changed. reset is an update whose body had an empty managedFields list. Failures leave obj without
// managedFields, as kube-apiserver's UpdateNoErrors does.
func (s *Server[T, L, E, PE]) recordUpdate(ctx context.Context, sub string, live, obj T, reset bool) error {
	fm := s.fields[sub]
	if fm == nil {
		return nil
	}
	var liveU runtime.Object
	if any(live) != nil && live.ProtoReflect().IsValid() {
		u, err := s.toUnstructured(live)
		if err != nil {
			return err
		}
		liveU = u
	} else {
		liveU, _ = unstructuredConverter{}.New(s.gvk())
	}
	newU, err := s.toUnstructured(obj)
	if err != nil {
		return err
	}
	if reset {
		newU.SetManagedFields([]kmetav1.ManagedFieldsEntry{})
	}
	out := fm.UpdateNoErrors(liveU, newU, managerName(ctx))
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("field manager returned %T", out))
	}
	s.meta(obj).ManagedFields = fromKubeManagedFields(u.GetManagedFields())
	return nil
}

func (s *Server[T, L, E, PE]) gvk() schema.GroupVersionKind { return s.kind.GroupVersionKind() }

// applyFunc returns what applies a server-side apply patch to the JSON of the current object (an empty object of
// the kind when the apply creates it): the merged object's JSON with its managedFields, or 409 Conflict naming the
// fields other managers own (unless forced), as kube-apiserver answers.
func (s *Server[T, L, E, PE]) applyFunc(ctx context.Context, sub string, patch []byte) (func([]byte) ([]byte, error), error) {
	fm := s.fields[sub]
	md, _ := metadata.FromIncomingContext(ctx)
	opts := kmetav1.PatchOptions{Force: ptr.To(metadataTrue(ctx, gateway.MetadataForce))}
	if v := md.Get(gateway.MetadataFieldManager); len(v) > 0 {
		opts.FieldManager = v[0]
	}
	// The REST gateway validated them already; gRPC's metadata is validated here.
	if errs := kvalidation.ValidatePatchOptions(&opts, types.ApplyYAMLPatchType); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: optionsPatch}, "", errs)
	}
	manager, force := opts.FieldManager, *opts.Force
	applied, err := parseApplyPatch(patch)
	if err != nil {
		return nil, err
	}
	gvk := s.gvk()
	return func(doc []byte) ([]byte, error) { return applyPatch(fm, gvk, doc, applied, manager, force) }, nil
}

// parseApplyPatch reads a server-side apply patch (YAML or JSON), as kube-apiserver reads it.
func parseApplyPatch(patch []byte) (*unstructured.Unstructured, error) {
	applied := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(patch, &applied.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if applied.Object == nil {
		return nil, apierrors.NewBadRequest("error decoding YAML: the apply patch is empty")
	}
	return applied, nil
}

// applyPatch merges applied into doc, the JSON of the live object of kind gvk (an empty one to create it), with fm
// for manager: the merged object's JSON with its managedFields. Conflicts are 409 with kube-apiserver's message and
// causes; an applied object that does not fit the kind's schema is 400.
func applyPatch(fm *managedfields.FieldManager, gvk schema.GroupVersionKind, doc []byte, applied *unstructured.Unstructured, manager string, force bool) ([]byte, error) {
	live, err := jsonToUnstructured(doc, gvk)
	if err != nil {
		return nil, err
	}
	out, err := fm.Apply(live, applied.DeepCopy(), manager, force)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return runtime.Encode(unstructured.UnstructuredJSONScheme, out)
}

// fromKubeManagedFields converts managed fields to the proto's.
func fromKubeManagedFields(in []kmetav1.ManagedFieldsEntry) []*metav1.ManagedFieldsEntry {
	if len(in) == 0 {
		return nil
	}
	out := make([]*metav1.ManagedFieldsEntry, 0, len(in))
	for _, e := range in {
		pe := &metav1.ManagedFieldsEntry{
			Manager: e.Manager, Operation: string(e.Operation), ApiVersion: e.APIVersion, FieldsType: e.FieldsType,
			Subresource: e.Subresource,
		}
		if e.Time != nil {
			pe.Time = timestamppb.New(e.Time.Time)
		}
		if e.FieldsV1 != nil {
			pe.FieldsV1 = &metav1.RawExtension{Raw: e.FieldsV1.GetRawBytes()}
		}
		out = append(out, pe)
	}
	return out
}

// toKubeManagedFields converts the proto's managed fields to apimachinery's (validated with the metadata).
func toKubeManagedFields(in []*metav1.ManagedFieldsEntry) []kmetav1.ManagedFieldsEntry {
	if len(in) == 0 {
		return nil
	}
	out := make([]kmetav1.ManagedFieldsEntry, 0, len(in))
	for _, e := range in {
		ke := kmetav1.ManagedFieldsEntry{
			Manager: e.GetManager(), Operation: kmetav1.ManagedFieldsOperationType(e.GetOperation()), APIVersion: e.GetApiVersion(),
			FieldsType: e.GetFieldsType(), Subresource: e.GetSubresource(),
		}
		if t := e.GetTime(); t != nil {
			kt := kmetav1.NewTime(t.AsTime())
			ke.Time = &kt
		}
		if f := e.GetFieldsV1(); f != nil {
			ke.FieldsV1 = kmetav1.NewFieldsV1(string(f.GetRaw()))
		}
		out = append(out, ke)
	}
	return out
}

// keepManagedFields gives next the managed fields of cur (a write that does not record its own).
func keepManagedFields(next, cur *metav1.ObjectMeta) {
	next.ManagedFields = nil
	for _, e := range cur.GetManagedFields() {
		next.ManagedFields = append(next.ManagedFields, proto.Clone(e).(*metav1.ManagedFieldsEntry))
	}
}

// recordSubresource records a write of a subresource (status, binding) in obj's managedFields: the subresource's
// field manager takes the managed fields of live, never the request's, as kube-apiserver's does. Without field
// managers obj keeps live's.
func (s *Server[T, L, E, PE]) recordSubresource(ctx context.Context, sub string, live, obj T) error {
	if s.fields[sub] == nil {
		keepManagedFields(s.meta(obj), live.GetMetadata())
		return nil
	}
	return s.recordUpdate(ctx, sub, live, obj, false)
}

// resetsManagedFields reports whether a patched object's JSON has an empty metadata.managedFields list, which
// resets them in Kubernetes.
func resetsManagedFields(doc []byte) bool {
	if !bytes.Contains(doc, []byte(`"managedFields"`)) {
		return false
	}
	var d struct {
		Metadata struct {
			ManagedFields *[]json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	return json.Unmarshal(doc, &d) == nil && d.Metadata.ManagedFields != nil && len(*d.Metadata.ManagedFields) == 0
}
