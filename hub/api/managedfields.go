package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

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
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/store"
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
		fm, err := managedfields.NewDefaultFieldManager(fieldsTypeConverter{tc}, conv, conv, conv, gvk, gvk.GroupVersion(), sub, nil)
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

// fieldsObject is an object as the field managers see it: its JSON as an unstructured object, and its
// metadata.managedFields as typed entries that the field managers read and write through the metav1.Object accessor
// (GetManagedFields, SetManagedFields) without converting them to and from the unstructured map by reflection, what
// unstructured.Unstructured does. The map keeps the managedFields of the JSON (the live object's, which the
// comparison of the live and the new object sees as kube-apiserver's does) until SetManagedFields replaces them.
type fieldsObject struct {
	unstructured.Unstructured
	managed []kmetav1.ManagedFieldsEntry
	// live is, on the new object of a write, the live object it replaces (fieldsTypeConverter types the new object
	// against it); nil otherwise.
	live *fieldsObject
	// members are the JSON bytes of the members of the object's top level that the byte scanner read (nil when it
	// did not read the document), but apiVersion, kind and metadata, which the field manager may change in the map.
	members map[string][]byte
	// known, on a live object, are the members of its top level known to fit the schema (fittingMembers); fits,
	// on a new object, says that it was typed and fitted.
	known *knownMembers
	fits  bool
	// typed memoizes a live object's typing with typed.AllowDuplicates (what an update's field manager asks for): the
	// new object's typing types its live object first, and the field manager's own request for it then gets the same.
	// A live object is not changed by the field manager; the new object is (its managedFields), and is not memoized.
	typed *typedResult
}

// GetManagedFields returns the typed managed fields.
func (o *fieldsObject) GetManagedFields() []kmetav1.ManagedFieldsEntry { return o.managed }

// SetManagedFields sets the typed managed fields; nil also removes them from the map, as Unstructured does.
func (o *fieldsObject) SetManagedFields(m []kmetav1.ManagedFieldsEntry) {
	o.managed = m
	if m == nil {
		o.Unstructured.SetManagedFields(nil)
	}
}

// newFieldsObject is obj, a message of kind gvk, as the field managers see it; doc is obj's JSON when the caller has
// it (kjson.Marshal), else nil. like, when not nil, is another object read by newFieldsObject (the live object of
// the write): members of obj's top level with the same JSON as like's take like's values (sameMember), shared.
func newFieldsObject(obj store.Object, doc []byte, gvk schema.GroupVersionKind, like *fieldsObject) (*fieldsObject, error) {
	if doc == nil {
		var err error
		if doc, err = kjson.Marshal(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	o := &fieldsObject{managed: toKubeManagedFields(obj.GetMetadata().GetManagedFields())}
	if content, members, ok := decodeJSONMembers(doc, like); ok {
		o.Object, o.members = content, members
	} else {
		content, err := decodeJSONObject(doc)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		o.Object = content
	}
	o.SetGroupVersionKind(gvk)
	return o, nil
}

// jsonToUnstructured reads the JSON of an object of kind gvk.
func jsonToUnstructured(doc []byte, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := decodeJSONObject(doc)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// recordUpdate records a write other than an apply (create: live is nil; update, non-apply patch, subresource
// writes) in obj's managedFields, as kube-apiserver's field manager does for an Update operation: the manager owns
// the fields it changed. reset is an update whose body had an empty managedFields list. Failures leave obj without
// managedFields, as kube-apiserver's UpdateNoErrors does.
func (s *Server[T, L, E, PE]) recordUpdate(ctx context.Context, sub string, live, obj T, reset bool) error {
	return s.recordUpdateJSON(ctx, sub, live, nil, obj, reset)
}

// recordUpdateJSON is recordUpdate with liveJSON, the JSON of live (kjson.Marshal) when the caller has it.
func (s *Server[T, L, E, PE]) recordUpdateJSON(ctx context.Context, sub string, live T, liveJSON []byte, obj T, reset bool) error {
	fm := s.fields[sub]
	if fm == nil {
		return nil
	}
	var l store.Object
	if any(live) != nil && live.ProtoReflect().IsValid() {
		l = live
	}
	mf, err := recordWrite(fm, s.gvk(), l, liveJSON, obj, managerName(ctx), reset, s.fitting)
	if err != nil {
		return err
	}
	s.meta(obj).ManagedFields = mf
	return nil
}

// recordWrite is recordUpdate with fm for objects of kind gvk (live nil for a create; liveJSON its JSON or nil):
// obj's new managedFields. fitting, when not nil, remembers what the write typed of obj for the next write of the
// object, and gives what an earlier write typed of it.
func recordWrite(fm *managedfields.FieldManager, gvk schema.GroupVersionKind, live store.Object, liveJSON []byte, obj store.Object, manager string, reset bool, fitting *fittingMembers) ([]*metav1.ManagedFieldsEntry, error) {
	md := obj.GetMetadata()
	key := objectKey(md.GetNamespace(), md.GetName())
	liveO := &fieldsObject{Unstructured: unstructured.Unstructured{Object: map[string]any{}}}
	liveO.SetGroupVersionKind(gvk)
	if live != nil {
		var err error
		if liveO, err = newFieldsObject(live, liveJSON, gvk, nil); err != nil {
			return nil, err
		}
		liveO.known = fitting.get(key)
	}
	doc, err := kjson.Marshal(obj)
	if err != nil {
		return nil, unencodable(gvk, md.GetName(), err)
	}
	newO, err := newFieldsObject(obj, doc, gvk, liveO)
	if err != nil {
		return nil, err
	}
	newO.live = liveO
	if reset {
		newO.managed = []kmetav1.ManagedFieldsEntry{}
	}
	out := fm.UpdateNoErrors(liveO, newO, manager)
	o, ok := out.(*fieldsObject)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager returned %T", out))
	}
	if newO.fits {
		fitting.put(key, newO.members)
	}
	return fromKubeManagedFields(o.managed), nil
}

// unencodable is the error for a written object that has no JSON form, err from kjson.Marshal. JSON requests cannot
// carry one (the decoder checks what the encoder would refuse); a gRPC request can, e.g. a RawExtension whose bytes
// are not JSON or a Timestamp outside years 1 to 9999, which kube-apiserver's decoder would have refused as a bad
// request. It is refused as invalid at the field the encoder names, not stored, as no REST client could read it.
func unencodable(gvk schema.GroupVersionKind, name string, err error) error {
	var fe *kjson.FieldError
	if !errors.As(err, &fe) {
		return apierrors.NewInternalError(err)
	}
	return apierrors.NewInvalid(gvk.GroupKind(), name, field.ErrorList{
		field.Invalid(field.NewPath(fe.Path), field.OmitValueType{}, fe.Err.Error()),
	})
}

// objectKey names an object within its kind.
func objectKey(namespace, name string) string { return namespace + "/" + name }

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

// fromKubeManagedFields converts managed fields to the proto's, as the JSON of an unstructured object carries them
// (what kube-apiserver stores for a custom resource): times in whole seconds, fieldsV1 with its keys sorted.
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
			pe.Time = timestamppb.New(e.Time.Truncate(time.Second))
		}
		if e.FieldsV1 != nil {
			pe.FieldsV1 = &metav1.RawExtension{Raw: sortedJSON(e.FieldsV1.GetRawBytes())}
		}
		out = append(out, pe)
	}
	return out
}

// sortedJSON returns a JSON object with the keys of every object sorted, as encoding/json writes a map (doc as it
// is when it does not decode). A document of printable ASCII without characters encoding/json escapes (<, >, &) and
// without escapes other than \" is sorted in place (RFC 8785's canonical form, the same bytes for such documents),
// what every fieldsV1 but those naming unusual keys is.
func sortedJSON(doc []byte) []byte {
	if plainJSON(doc) {
		if sortedFields(doc) {
			return bytes.Clone(doc) // what structured-merge-diff writes, but for lists' keys and indexes
		}
		v := jsontext.Value(bytes.Clone(doc))
		if v.Canonicalize() == nil {
			return v
		}
	}
	m, err := decodeJSONObject(doc)
	if err != nil {
		return doc
	}
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}

// sortedFields reports whether doc, plain JSON (plainJSON), is a fieldsV1 document in canonical form as it is: objects
// whose values are objects, without whitespace, every object's names in increasing order. structured-merge-diff
// writes a set's fields in that order; the names of list items (k:, v:, i:) it orders by their values, which need not
// be their JSON's order.
func sortedFields(doc []byte) bool {
	// open holds, for each object still open, the last name read in it.
	var stack [32][]byte
	open := stack[:0]
	for i := 0; i < len(doc); {
		switch doc[i] {
		case '{':
			if len(open) == cap(open) {
				return false
			}
			open = append(open, nil)
			if i++; i < len(doc) && doc[i] == '}' {
				continue
			}
			var ok bool
			if i, ok = sortedName(doc, i, &open[len(open)-1]); !ok {
				return false
			}
		case '}':
			if len(open) == 0 {
				return false
			}
			open = open[:len(open)-1]
			i++
			switch {
			case len(open) == 0:
				return i == len(doc)
			case i < len(doc) && doc[i] == '}':
			case i < len(doc) && doc[i] == ',':
				var ok bool
				if i, ok = sortedName(doc, i+1, &open[len(open)-1]); !ok {
					return false
				}
			default:
				return false
			}
		default:
			return false
		}
	}
	return false
}

// sortedName reads the name at doc[i:] and the colon after it, and reports whether it comes after *prev (then the
// new *prev); i is then at the name's value.
func sortedName(doc []byte, i int, prev *[]byte) (int, bool) {
	if i >= len(doc) || doc[i] != '"' {
		return i, false
	}
	start := i + 1
	for i = start; i < len(doc) && doc[i] != '"'; i++ {
		if doc[i] == '\\' {
			i++ // plainJSON: \" only
		}
	}
	if i+1 >= len(doc) || doc[i+1] != ':' {
		return i, false
	}
	name := doc[start:i]
	if *prev != nil && compareNames(*prev, name) >= 0 {
		return i, false
	}
	*prev = name
	return i + 2, true
}

// compareNames compares two JSON strings' contents, plain JSON's (\" the only escape), by their decoded bytes.
func compareNames(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if ca == '\\' {
			i++
			ca = a[i]
		}
		if cb == '\\' {
			j++
			cb = b[j]
		}
		if ca != cb {
			return int(ca) - int(cb)
		}
		i++
		j++
	}
	return (len(a) - i) - (len(b) - j)
}

// plainJSON reports whether doc is printable ASCII without <, >, & and without escapes other than \".
func plainJSON(doc []byte) bool {
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case c < 0x20 || c > 0x7e || c == '<' || c == '>' || c == '&':
			return false
		case c == '\\':
			if i+1 >= len(doc) || doc[i+1] != '"' {
				return false
			}
			i++
		}
	}
	return true
}

// decodeJSONObject reads a JSON object into the unstructured form, as apimachinery's JSON decoder reads it
// (k8s.io/apimachinery/pkg/util/json): objects as map[string]any (the last of duplicate names wins), arrays as []any,
// integers that fit as int64, other numbers as float64, invalid UTF-8 as U+FFFD.
func decodeJSONObject(doc []byte) (map[string]any, error) {
	// Compact, valid JSON (what kjson writes) is read by a byte scanner; anything else (invalid UTF-8, errors) by
	// jsontext's decoder.
	r := jsonReader{doc: doc}
	if v, ok := r.object(false); ok && r.end() {
		return v, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if dec.PeekKind() != '{' {
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return nil, errors.New("the JSON document is not an object")
	}
	v, err := decodeJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return v.(map[string]any), nil
}

// decodeJSONMembers is decodeJSONObject by the byte scanner alone (ok false when it does not read doc), with the JSON
// of the members of the top level (but apiVersion, kind and metadata); members with the same JSON as like's take
// like's values (shared: neither object's map may change them).
func decodeJSONMembers(doc []byte, like *fieldsObject) (content map[string]any, members map[string][]byte, ok bool) {
	r := jsonReader{doc: doc, members: map[string][]byte{}, like: like}
	if content, ok = r.object(true); !ok || !r.end() {
		return nil, nil, false
	}
	return content, r.members, true
}

// jsonReader reads valid JSON into the unstructured form; ok false when the document is not valid JSON or has a
// string with invalid UTF-8 (which the caller leaves to jsontext's decoder).
type jsonReader struct {
	doc []byte
	i   int
	// members, when not nil, receives the JSON of the members of the top-level object (a top object), but those
	// the field manager may change in the map (apiVersion, kind, metadata).
	members map[string][]byte
	// like is an object read before (with its members): a member of the top-level object with the same JSON as
	// one of like's members takes like's value instead of being read again.
	like *fieldsObject
}

func (r *jsonReader) space() {
	for r.i < len(r.doc) {
		switch r.doc[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *jsonReader) end() bool {
	r.space()
	return r.i == len(r.doc)
}

func (r *jsonReader) value() (any, bool) {
	r.space()
	if r.i >= len(r.doc) {
		return nil, false
	}
	switch c := r.doc[r.i]; {
	case c == '{':
		return r.object(false)
	case c == '[':
		r.i++
		a := []any{}
		r.space()
		if r.i < len(r.doc) && r.doc[r.i] == ']' {
			r.i++
			return a, true
		}
		for {
			v, ok := r.value()
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if done, ok := r.separator(']'); !ok || done {
				return a, ok
			}
		}
	case c == '"':
		return r.str()
	case c == 't':
		return true, r.literal("true")
	case c == 'f':
		return false, r.literal("false")
	case c == 'n':
		return nil, r.literal("null")
	default:
		return r.number()
	}
}

func (r *jsonReader) literal(lit string) bool {
	if !bytes.HasPrefix(r.doc[r.i:], []byte(lit)) {
		return false
	}
	r.i += len(lit)
	return true
}

// object reads an object at r.i; top is the document's top level, whose members r.members records and r.like
// may give.
func (r *jsonReader) object(top bool) (map[string]any, bool) {
	r.space()
	if r.i >= len(r.doc) || r.doc[r.i] != '{' {
		return nil, false
	}
	r.i++
	m := map[string]any{}
	r.space()
	if r.i < len(r.doc) && r.doc[r.i] == '}' {
		r.i++
		return m, true
	}
	for {
		r.space()
		if r.i >= len(r.doc) || r.doc[r.i] != '"' {
			return nil, false
		}
		k, ok := r.str()
		if !ok {
			return nil, false
		}
		r.space()
		if r.i >= len(r.doc) || r.doc[r.i] != ':' {
			return nil, false
		}
		r.i++
		var v any
		if top && r.members != nil && k != "apiVersion" && k != "kind" && k != "metadata" {
			r.space()
			start := r.i
			if v, ok = r.sameMember(k); !ok {
				if v, ok = r.value(); !ok {
					return nil, false
				}
			}
			r.members[k] = r.doc[start:r.i:r.i]
		} else if v, ok = r.value(); !ok {
			return nil, false
		}
		m[k] = v
		if done, ok := r.separator('}'); !ok || done {
			return m, ok
		}
	}
}

// sameMember returns r.like's value of member k when the document has the same JSON at r.i as r.like has for k,
// and moves past it: the same bytes read to the same value. A JSON value ends where its bytes say (objects, arrays
// and strings at their closing bracket or quote; numbers and literals where the next byte cannot continue them),
// so the bytes of like's member at r.i are the whole value at r.i when the byte after them ends a value.
func (r *jsonReader) sameMember(k string) (any, bool) {
	if r.like == nil {
		return nil, false
	}
	lb, ok := r.like.members[k]
	if !ok || !bytes.HasPrefix(r.doc[r.i:], lb) {
		return nil, false
	}
	if end := r.i + len(lb); end < len(r.doc) {
		switch r.doc[end] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return nil, false
		}
	}
	v, ok := r.like.Object[k]
	if !ok {
		return nil, false
	}
	r.i += len(lb)
	return v, true
}

// separator reads what follows a member of an object or array: a ',' (more follow) or end, its closing bracket.
func (r *jsonReader) separator(end byte) (done, ok bool) {
	r.space()
	if r.i >= len(r.doc) {
		return false, false
	}
	r.i++
	switch r.doc[r.i-1] {
	case ',':
		return false, true
	case end:
		return true, true
	}
	return false, false
}

// str reads a string at r.i (a '"'): in place when it has no escapes, else through jsontext.AppendUnquote.
func (r *jsonReader) str() (string, bool) {
	start := r.i
	r.i++
	plain, ascii := true, true
	for r.i < len(r.doc) {
		switch c := r.doc[r.i]; {
		case c == '"':
			r.i++
			if plain {
				body := r.doc[start+1 : r.i-1]
				if !ascii && !utf8.Valid(body) {
					return "", false
				}
				return string(body), true
			}
			out, err := jsontext.AppendUnquote(nil, r.doc[start:r.i])
			if err != nil {
				return "", false
			}
			return string(out), true
		case c == '\\':
			plain = false
			r.i += 2
		case c < 0x20:
			return "", false
		default:
			if c >= 0x80 {
				ascii = false
			}
			r.i++
		}
	}
	return "", false
}

// number reads a JSON number as apimachinery does: int64 when it has no '.' and fits, else float64.
func (r *jsonReader) number() (any, bool) {
	start := r.i
	digits := func() bool {
		n := r.i
		for r.i < len(r.doc) && r.doc[r.i] >= '0' && r.doc[r.i] <= '9' {
			r.i++
		}
		return r.i > n
	}
	if r.i < len(r.doc) && r.doc[r.i] == '-' {
		r.i++
	}
	intStart := r.i
	if !digits() || (r.doc[intStart] == '0' && r.i-intStart > 1) {
		return nil, false
	}
	isInt := true
	if r.i < len(r.doc) && r.doc[r.i] == '.' {
		r.i++
		isInt = false
		if !digits() {
			return nil, false
		}
	}
	if r.i < len(r.doc) && (r.doc[r.i] == 'e' || r.doc[r.i] == 'E') {
		r.i++
		if r.i < len(r.doc) && (r.doc[r.i] == '+' || r.doc[r.i] == '-') {
			r.i++
		}
		if !digits() {
			return nil, false
		}
	}
	lit := string(r.doc[start:r.i])
	if isInt {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	return f, err == nil
}

// decodeJSONValue reads a value as apimachinery's JSON decoder does: integers that fit as int64, other numbers as
// float64.
func decodeJSONValue(dec *jsontext.Decoder) (any, error) {
	return kjson.DecodeAny(dec, func(lit string) (any, error) {
		if !strings.Contains(lit, ".") {
			if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
				return i, nil
			}
		}
		return strconv.ParseFloat(lit, 64)
	})
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
// resets them in Kubernetes. It reads the document only up to the end of its metadata, skipping the other members
// (the object was decoded from doc already, so doc is valid JSON); names match exactly, as Kubernetes' decoders do.
func resetsManagedFields(doc []byte) bool {
	if !bytes.Contains(doc, []byte(`"managedFields"`)) {
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(doc), jsontext.AllowDuplicateNames(true))
	if !jsonMember(dec, "metadata") || !jsonMember(dec, "managedFields") {
		return false
	}
	v, err := dec.ReadValue()
	return err == nil && v.Kind() == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}

// jsonMember reads the start of an object from dec and finds name among its members (the first of that name),
// leaving dec before its value; false when the next value is no object or has no such member.
func jsonMember(dec *jsontext.Decoder, name string) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if dec.SkipValue() != nil {
			return false
		}
	}
	return false
}
