package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// recordWriteUnstructured is recordWrite as apimachinery's field manager does it on unstructured objects (JSON read
// by apimachinery's decoder, managedFields converted through the unstructured map): the reference recordWrite must
// match.
func recordWriteUnstructured(t testing.TB, fm *managedfields.FieldManager, gvk schema.GroupVersionKind, live, obj store.Object, manager string, reset bool) []*metav1.ManagedFieldsEntry {
	t.Helper()
	toU := func(o store.Object) *unstructured.Unstructured {
		b, err := kjson.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if err := utiljson.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetGroupVersionKind(gvk)
		return u
	}
	liveU := &unstructured.Unstructured{Object: map[string]any{}}
	liveU.SetGroupVersionKind(gvk)
	if live != nil {
		liveU = toU(live)
	}
	newU := toU(obj)
	if reset {
		newU.SetManagedFields([]kmetav1.ManagedFieldsEntry{})
	}
	out := fm.UpdateNoErrors(liveU, newU, manager).(*unstructured.Unstructured)
	var mf []*metav1.ManagedFieldsEntry
	for _, e := range out.GetManagedFields() {
		pe := &metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: string(e.Operation), ApiVersion: e.APIVersion, FieldsType: e.FieldsType, Subresource: e.Subresource}
		if e.Time != nil {
			pe.Time = timestamppb.New(e.Time.Time)
		}
		if e.FieldsV1 != nil {
			pe.FieldsV1 = &metav1.RawExtension{Raw: e.FieldsV1.GetRawBytes()}
		}
		mf = append(mf, pe)
	}
	return mf
}

func exampleShoot(t testing.TB) *corev1beta1.Shoot {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(t), "90-shoot.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(data), "\n---")
	j, err := kjson.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(gardenerexamples.Fill(m))
	if err != nil {
		t.Fatal(err)
	}
	shoot := &corev1beta1.Shoot{}
	if err := kjson.Unmarshal(b, shoot); err != nil {
		t.Fatal(err)
	}
	return shoot
}

// TestRecordWriteMatchesUnstructured runs a sequence of writes of Gardener's example Shoot by several managers
// (create, label and spec changes, a body with its own managedFields, a status write, a reset) through recordWrite
// (each write remembering what it typed for the next, as in the hub) and through the field manager on unstructured
// objects: the managedFields must be the same, with times in whole seconds and fieldsV1 keys sorted.
func TestRecordWriteMatchesUnstructured(t *testing.T) {
	tc := typeConverter(t)
	k, ok := KindFor("core.gardener.cloud/v1beta1", "Shoot")
	if !ok {
		t.Fatal("no Shoot kind")
	}
	fms, err := newFieldManagers(tc, k)
	if err != nil {
		t.Fatal(err)
	}
	gvk := k.GroupVersionKind()
	base := exampleShoot(t)
	base.Metadata.Uid = "u1"
	// As in the hub, each write remembers what it typed for the next (fittingMembers).
	fitting := newFittingMembers()

	var live store.Object
	step := func(name, sub, manager string, reset bool, change func(s *corev1beta1.Shoot)) {
		t.Helper()
		obj := proto.Clone(base).(*corev1beta1.Shoot)
		if live != nil {
			obj = proto.Clone(live).(*corev1beta1.Shoot)
		}
		change(obj)
		liveBefore := proto.Clone(obj)
		if live != nil {
			liveBefore = proto.Clone(live)
		}
		want := recordWriteUnstructured(t, fms[sub], gvk, live, proto.Clone(obj).(store.Object), manager, reset)
		var liveJSON []byte
		if live != nil && name != "labels" {
			// The JSON a patch has of the live object (every step but one).
			if liveJSON, err = kjson.Marshal(live); err != nil {
				t.Fatal(err)
			}
		}
		liveJSONBefore := bytes.Clone(liveJSON)
		got, err := recordWrite(fms[sub], gvk, live, liveJSON, obj, manager, reset, fitting)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(liveJSON, liveJSONBefore) {
			t.Fatalf("%s: recordWrite changed the live object's JSON (shared with the watch cache)", name)
		}
		if live != nil && !proto.Equal(live, liveBefore) {
			t.Fatalf("%s: recordWrite changed the live object", name)
		}
		if len(got) == 0 && !reset {
			t.Fatalf("%s: no managedFields", name)
		}
		for i := range got {
			if ts := got[i].GetTime(); ts != nil && ts.GetNanos() != 0 {
				t.Errorf("%s: entry %d has a time with fractional seconds: %v", name, i, ts.AsTime())
			}
		}
		// Both ran time.Now(): compare without the times, which may lie on either side of a second.
		strip := func(mf []*metav1.ManagedFieldsEntry) []*metav1.ManagedFieldsEntry {
			var out []*metav1.ManagedFieldsEntry
			for _, e := range mf {
				e = proto.Clone(e).(*metav1.ManagedFieldsEntry)
				e.Time = nil
				out = append(out, e)
			}
			return out
		}
		if g, w := strip(got), strip(want); len(g) != len(w) || !equalEntries(g, w) {
			t.Fatalf("%s: managedFields differ:\n got %v\nwant %v", name, g, w)
		}
		obj.Metadata.ManagedFields = got
		obj.Metadata.ResourceVersion = ""
		live = obj
	}
	step("create", "", "creator", false, func(*corev1beta1.Shoot) {})
	step("labels", "", "labeler", false, func(s *corev1beta1.Shoot) {
		s.Metadata.Labels = map[string]string{"a": "1", "b": "2"}
	})
	step("spec", "", "creator", false, func(s *corev1beta1.Shoot) {
		s.Spec.Region = "europe-west-1"
		s.Spec.Provider.Workers = s.Spec.Provider.Workers[:1]
	})
	step("own managedFields", "", "editor", false, func(s *corev1beta1.Shoot) {
		s.Metadata.ManagedFields = []*metav1.ManagedFieldsEntry{{
			Manager: "claimed", Operation: "Update", ApiVersion: "core.gardener.cloud/v1beta1", FieldsType: "FieldsV1",
			Time: timestamppb.New(time.Unix(1700000000, 5)), FieldsV1: &metav1.RawExtension{Raw: []byte(`{"f:spec":{"f:purpose":{}}}`)},
		}}
		s.Metadata.Annotations = map[string]string{"x": "y"}
	})
	step("status", SubresourceStatus, "gardenlet", false, func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--dev--x", Gardener: &corev1beta1.Gardener{Id: "g", Name: "g", Version: "1"}}
	})
	step("no change", "", "labeler", false, func(*corev1beta1.Shoot) {})
	// A reset empties managedFields, and an update of an object without them records none, as in Kubernetes.
	step("reset", "", "resetter", true, func(s *corev1beta1.Shoot) {
		s.Metadata.Labels["c"] = "3"
	})
}

func equalEntries(a, b []*metav1.ManagedFieldsEntry) bool {
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestDecodeJSONObject compares decodeJSONObject with apimachinery's JSON decoder on documents of every JSON type.
func TestDecodeJSONObject(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		`{"a":null,"b":true,"c":false,"d":"s\u00e9\n","e":[],"f":{},"g":[1,-2,3.5,1e3,1.0,9223372036854775807,9223372036854775808,-0]}`,
		`{"a":{"b":{"c":[{"d":1},[2,[3]]]}},"a":"last wins"}`,
		` {"x" : [ "y" , { } ] } `,
		`{"q":"a\"b\\c\/d\n","neg":-0.5e-3,"exp":2E+2,"zero":0,"big":-9223372036854775809,"e":[ ],"t":[true,false,null]}`,
	} {
		compareJSONObject(t, []byte(doc))
	}
	for _, bad := range []string{``, `[]`, `"s"`, `{"a":}`, `{"a":1} x`, `{"a":1`, `{"a":[1,]}`, `{1:2}`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":.5}`, `{"a":1e}`, "{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":tru}`, `{"a" 1}`, `{"a":1,}`, `{"a":[1 2]}`} {
		if _, err := decodeJSONObject([]byte(bad)); err == nil {
			t.Errorf("decodeJSONObject(%q) succeeded", bad)
		}
	}
}

func compareJSONObject(t *testing.T, doc []byte) {
	t.Helper()
	var want map[string]any
	werr := utiljson.Unmarshal(doc, &want)
	got, gerr := decodeJSONObject(doc)
	if werr == nil && want != nil && utf8.Valid(doc) && !strings.Contains(string(doc), `\u`) {
		if gerr != nil {
			t.Fatalf("decodeJSONObject(%q): %v; apimachinery reads %v", doc, gerr, want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeJSONObject(%q) = %#v, apimachinery reads %#v", doc, got, want)
		}
	}
	if gerr == nil && werr != nil {
		t.Fatalf("decodeJSONObject(%q) accepted what apimachinery refuses: %v", doc, werr)
	}
}

// FuzzDecodeJSONObject compares decodeJSONObject with apimachinery's JSON decoder.
func FuzzDecodeJSONObject(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x",null,true,{"b":{}}]}`))
	f.Add([]byte(`{"a":1e400}`))
	f.Fuzz(func(t *testing.T, doc []byte) { compareJSONObject(t, doc) })
}

// TestSortedJSON compares sortedJSON's in-place sorting with encoding/json's sorting of the decoded document.
func TestSortedJSON(t *testing.T) {
	for _, doc := range []string{
		`{"f:spec":{"f:b":{},"f:a":{},".":{}},"f:metadata":{"f:labels":{"f:x":{}}}}`,
		`{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{},"k:{\"port\":443,\"protocol\":\"TCP\"}":{"f:name":{}}}}`,
		`{"f:list":{"v:\"b\"":{},"v:\"a\"":{},"i:10":{},"i:9":{}}}`,
		`{"f:a&b":{},"f:<":{},"f:\u00e9":{},"f:é":{},"f:\n":{},"f:\\":{}}`,
		` { "f:z" : { } , "f:y" : { } } `,
		// Canonical as they are (sortedFields), and near misses.
		`{".":{},"f:a":{"f:b":{}},"f:c":{"k:{\"name\":\"a\"}":{},"k:{\"name\":\"b\"}":{".":{}}}}`,
		`{"f:c":{"k:{\"name\":\"b\"}":{},"k:{\"name\":\"a\"}":{}}}`,
		`{"f:a\"":{},"f:a#":{}}`, `{"f:a#":{},"f:a\"":{}}`, `{"f:a":{},"f:ab":{}}`, `{"f:ab":{},"f:a":{}}`,
		`{}`, `{"a":{}}`, `{"a":{},"a":{}}`, `{"a":{"b":{"c":{}}},"b":{}}`, `{"a":{} }`,
		strings.Repeat(`{"a":`, 40) + `{}` + strings.Repeat(`}`, 40),
	} {
		m, err := decodeJSONObject([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := sortedJSON([]byte(doc)); string(got) != string(want) {
			t.Errorf("sortedJSON(%s) = %s, want %s", doc, got, want)
		}
	}
}

// TestSortedFields: documents already in canonical form are taken as they are, the others are not.
func TestSortedFields(t *testing.T) {
	for doc, want := range map[string]bool{
		`{}`:                true,
		`{".":{},"f:a":{}}`: true,
		`{"f:a":{},"f:ab":{"f:x":{},"f:y":{}},"f:b":{}}`:            true,
		`{"f:c":{"k:{\"name\":\"a\"}":{},"k:{\"name\":\"b\"}":{}}}`: true,
		`{"f:a\"":{},"f:a#":{}}`:                                    true,
		`{"f:a#":{},"f:a\"":{}}`:                                    false,
		`{"f:b":{},"f:a":{}}`:                                       false,
		`{"f:a":{},"f:a":{}}`:                                       false,
		`{"f:a":{"f:y":{},"f:x":{}}}`:                               false,
		`{"i:10":{},"i:9":{}}`:                                      true,
		`{"i:9":{},"i:10":{}}`:                                      false,
		`{"f:a": {}}`:                                               false,
		`{"f:a":1}`:                                                 false,
		`{"f:a":{}}{}`:                                              false,
		`{"f:a":{}}}`:                                               false,
		`{"f:a":{}`:                                                 false,
		`{"f:a"}`:                                                   false,
		`[]`:                                                        false,
	} {
		if got := sortedFields([]byte(doc)); got != want {
			t.Errorf("sortedFields(%s) = %v, want %v", doc, got, want)
		}
	}
}

// FuzzSortedJSON compares sortedJSON with encoding/json's sorting of the decoded document, on valid fieldsV1-shaped
// documents (objects of objects) without duplicate names, what structured-merge-diff writes; and sortedFields'
// verdict with the document being its own sorted form.
func FuzzSortedJSON(f *testing.F) {
	for _, seed := range []string{`{".":{},"f:a":{"f:b":{}},"f:c":{"k:{\"name\":\"a\"}":{}}}`, `{"f:b":{},"f:a":{}}`,
		`{"i:10":{},"i:9":{}}`, `{"f:a\"":{},"f:a#":{}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !jsontext.Value(doc).IsValid() {
			return
		}
		m, err := decodeJSONObject(doc)
		if err != nil || !objectsOnly(m) {
			return
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := sortedJSON(doc); string(got) != string(want) {
			t.Fatalf("sortedJSON(%q) = %q, want %q", doc, got, want)
		}
		if plainJSON(doc) && sortedFields(doc) && string(doc) != string(want) {
			t.Fatalf("%q taken as sorted; sorted, it is %q", doc, want)
		}
	})
}

func objectsOnly(m map[string]any) bool {
	for _, v := range m {
		if c, ok := v.(map[string]any); !ok || !objectsOnly(c) {
			return false
		}
	}
	return true
}

// createdShoot is Gardener's example Shoot (uid u1) with the managedFields of its create by "creator", recorded by
// the Shoot's field managers (and remembered in fitting when not nil); with those field managers and the kind.
func createdShoot(t testing.TB, fitting *fittingMembers) (*corev1beta1.Shoot, fieldManagers, schema.GroupVersionKind) {
	t.Helper()
	k, _ := KindFor("core.gardener.cloud/v1beta1", "Shoot")
	fms, err := newFieldManagers(typeConverter(t), k)
	if err != nil {
		t.Fatal(err)
	}
	gvk := k.GroupVersionKind()
	s := exampleShoot(t)
	s.Metadata.Uid = "u1"
	if s.Metadata.ManagedFields, err = recordWrite(fms[""], gvk, nil, nil, s, "creator", false, fitting); err != nil || len(s.Metadata.ManagedFields) == 0 {
		t.Fatalf("create: %v, %d entries", err, len(s.Metadata.ManagedFields))
	}
	return s, fms, gvk
}

// BenchmarkRecordWrite records a label change of Gardener's example Shoot by a second manager (an update's
// managedFields work, after the create's), as the hub does it and on unstructured objects (the reference).
func BenchmarkRecordWrite(b *testing.B) {
	// The hub remembers what the create typed for the update (fittingMembers).
	fitting := newFittingMembers()
	live, fms, gvk := createdShoot(b, fitting)
	next := proto.Clone(live).(*corev1beta1.Shoot)
	next.Metadata.Labels = map[string]string{"a": "b"}
	b.Run("hub", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := recordWrite(fms[""], gvk, live, nil, proto.Clone(next).(store.Object), "labeler", false, fitting); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			recordWriteUnstructured(b, fms[""], gvk, live, proto.Clone(next).(store.Object), "labeler", false)
		}
	})
}

// TestPatchFuncsLeaveDocument: a patch is applied to the JSON the watch cache memoized of the current object
// (Server.memoizedJSON), shared with every reader: no patch type (a strategic merge patch without the kinds' patch
// metadata is a merge patch here) and no server-side apply may write into it.
func TestPatchFuncsLeaveDocument(t *testing.T) {
	k, _ := KindFor("core.gardener.cloud/v1beta1", "Shoot")
	fms, err := newFieldManagers(typeConverter(t), k)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server[*corev1beta1.Shoot, *corev1beta1.ShootList, corev1beta1.ShootWatchEvent, *corev1beta1.ShootWatchEvent]{kind: k, reg: &Registry{}, fields: fms}
	shoot := exampleShoot(t)
	doc, err := kjson.Marshal(shoot)
	if err != nil {
		t.Fatal(err)
	}
	shared := bytes.Clone(doc)
	for _, p := range []struct{ typ, patch string }{
		{PatchTypeMerge, `{"metadata":{"labels":{"a":"b"}},"spec":{"region":null}}`},
		{PatchTypeStrategic, `{"metadata":{"annotations":{"x":"y"}}}`},
		{PatchTypeJSON, `[{"op":"add","path":"/metadata/labels","value":{"c":"d"}},{"op":"remove","path":"/spec/purpose"}]`},
	} {
		apply, err := s.patchFunc(p.typ, []byte(p.patch))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := apply(shared); err != nil {
			t.Fatalf("%s: %v", p.typ, err)
		}
		if !bytes.Equal(shared, doc) {
			t.Fatalf("%s patch changed the document it was applied to", p.typ)
		}
	}
	applied, err := parseApplyPatch([]byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"crazy-botany","labels":{"e":"f"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyPatch(fms[""], k.GroupVersionKind(), shared, applied, "applier", false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shared, doc) {
		t.Fatal("server-side apply changed the document it was applied to")
	}
}

// TestDecodeJSONMembers: a document read with another object's members (an update's new object read with its live
// object) reads as without them; a member whose JSON is the other's takes the other's value (shared), and no other:
// not one whose JSON only starts with the other's, and never apiVersion, kind or metadata (the field manager changes
// those in the map: sharing them would change the live object).
func TestDecodeJSONMembers(t *testing.T) {
	docs := []string{
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"a","managedFields":[{"manager":"m"}]},"spec":{"a":[1,{"b":"c"}]},"n":12,"s":"x","t":true,"status":{}}`,
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"a","managedFields":[{"manager":"m"}]},"spec":{"a":[1,{"b":"c"}]},"n":123,"s":"xy","t":true,"status":{}}`,
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"a"},"spec":{"a":[1,{"b":"c"}],"d":1},"n":12.5,"s":"x","t":truex}`,
		`{"spec":{"a":[1,{"b":"c"}]},"n":12e1,"spec":{"a":[1,{"b":"c"}]},"s":"x\"","t":true}`,
		`{"spec":{"a":[1,{"b":"c"}]}}`,
		`{}`,
	}
	for _, ld := range docs {
		content, members, ok := decodeJSONMembers([]byte(ld), nil)
		if !ok {
			continue
		}
		like := &fieldsObject{Unstructured: unstructured.Unstructured{Object: content}, members: members}
		for _, d := range docs {
			want, werr := decodeJSONObject([]byte(d))
			got, gotMembers, ok := decodeJSONMembers([]byte(d), like)
			if !ok {
				if werr == nil {
					t.Errorf("%s with %s: not read; decodeJSONObject reads it", d, ld)
				}
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s with %s: read %#v, want %#v", d, ld, got, want)
			}
			for k, v := range got {
				shared := sameReference(v, content[k])
				if wantShared := gotMembers[k] != nil && bytes.Equal(gotMembers[k], members[k]) && isContainer(v); shared != wantShared {
					t.Errorf("%s with %s: member %s shared %v, want %v", d, ld, k, shared, wantShared)
				}
				if _, ok := gotMembers[k]; ok == (k == "apiVersion" || k == "kind" || k == "metadata") {
					t.Errorf("%s with %s: member %s recorded %v", d, ld, k, ok)
				}
			}
		}
	}
}

// sameReference reports whether a and b are the same map or slice (not equal ones).
func sameReference(a, b any) bool {
	if !isContainer(a) || !isContainer(b) {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == vb.Kind() && va.Len() > 0 && va.UnsafePointer() == vb.UnsafePointer()
}

func isContainer(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) > 0
	case []any:
		return len(v) > 0
	}
	return false
}

// TestRecordWriteTypedAgainstLive: an update's new object is typed against its live object, validating only what
// differs from it; the recording must still fail (no managedFields, as kube-apiserver's UpdateNoErrors) whenever
// either object does not fit the schema, as on unstructured objects: a worker pool without a name (the key of the
// workers list) in the new object's changed spec, in the live object's spec that the new one keeps or changes.
func TestRecordWriteTypedAgainstLive(t *testing.T) {
	valid, fms, gvk := createdShoot(t, nil)
	unnamed := proto.Clone(valid).(*corev1beta1.Shoot)
	unnamed.Spec.Provider.Workers[0].Name = ""
	labeled := func(s *corev1beta1.Shoot) *corev1beta1.Shoot {
		s = proto.Clone(s).(*corev1beta1.Shoot)
		s.Metadata.Labels = map[string]string{"a": "b"}
		return s
	}
	for _, c := range []struct {
		name      string
		live, obj *corev1beta1.Shoot
		recorded  bool
	}{
		{"valid, label", valid, labeled(valid), true},
		{"create unnamed", nil, unnamed, false},
		{"valid, unnamed worker", valid, labeled(unnamed), false},
		{"unnamed worker kept, label", unnamed, labeled(unnamed), false},
		{"unnamed worker named", unnamed, labeled(valid), false},
	} {
		var live store.Object
		if c.live != nil {
			live = c.live
		}
		for _, withJSON := range []bool{false, true} {
			var liveJSON []byte
			if withJSON && live != nil {
				var err error
				if liveJSON, err = kjson.Marshal(live); err != nil {
					t.Fatal(err)
				}
			}
			want := recordWriteUnstructured(t, fms[""], gvk, live, proto.Clone(c.obj).(store.Object), "labeler", false)
			got, err := recordWrite(fms[""], gvk, live, liveJSON, proto.Clone(c.obj).(store.Object), "labeler", false, nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if (len(want) > 0) != c.recorded {
				t.Fatalf("%s: the reference recorded %d entries, want recorded %v", c.name, len(want), c.recorded)
			}
			if len(got) != len(want) {
				t.Errorf("%s (live JSON %v): %d entries, the reference %d", c.name, withJSON, len(got), len(want))
			}
		}
	}
}

// TestTypedAgainstLive: fieldsTypeConverter types an update's new object against its live object; it fails exactly
// when typing both objects on their own fails (what the field manager does), also for values the comparison of
// the two objects would not notice (a number where the schema has a string), and types a fitting object as typing
// it on its own does.
func TestTypedAgainstLive(t *testing.T) {
	tc := typeConverter(t)
	k, _ := KindFor("core.gardener.cloud/v1beta1", "Shoot")
	gvk := k.GroupVersionKind()
	doc, err := kjson.Marshal(exampleShoot(t))
	if err != nil {
		t.Fatal(err)
	}
	read := func(change func(map[string]any), like *fieldsObject) *fieldsObject {
		t.Helper()
		content, members, ok := decodeJSONMembers(doc, nil)
		if !ok {
			t.Fatal("example shoot not read")
		}
		if change != nil {
			change(content)
			members = nil // changed after reading: the JSON no longer says what the map holds
		} else if like != nil {
			content, members, _ = decodeJSONMembers(doc, like)
		}
		o := &fieldsObject{Unstructured: unstructured.Unstructured{Object: content}, members: members}
		o.SetGroupVersionKind(gvk)
		return o
	}
	spec := func(key string, v any) func(map[string]any) {
		return func(m map[string]any) { m["spec"].(map[string]any)[key] = v }
	}
	label := func(m map[string]any) {
		m["metadata"].(map[string]any)["labels"] = map[string]any{"a": "b"}
	}
	both := func(fs ...func(map[string]any)) func(map[string]any) {
		return func(m map[string]any) {
			for _, f := range fs {
				f(m)
			}
		}
	}
	for _, c := range []struct {
		name          string
		live, obj     func(map[string]any)
		fits, sameDoc bool
	}{
		{name: "same JSON", fits: true, sameDoc: true},
		{name: "label", obj: label, fits: true},
		{name: "region", obj: spec("region", "elsewhere"), fits: true},
		{name: "region a number", obj: spec("region", int64(5))},
		{name: "undeclared field", obj: spec("nonsense", "x")},
		{name: "live region a number, kept", live: spec("region", int64(5)), obj: both(spec("region", int64(5)), label)},
		{name: "live region a number, fixed", live: spec("region", int64(5)), obj: spec("region", "elsewhere")},
		{name: "undeclared top-level field", obj: func(m map[string]any) { m["nonsense"] = true }},
	} {
		live := read(c.live, nil)
		var obj *fieldsObject
		if c.sameDoc {
			obj = read(nil, live)
		} else {
			obj = read(c.obj, nil)
		}
		obj.live = live
		got, gerr := fieldsTypeConverter{tc}.ObjectToTyped(obj, typed.AllowDuplicates)
		want, werr := tc.ObjectToTyped(&obj.Unstructured, typed.AllowDuplicates)
		if _, lerr := tc.ObjectToTyped(&live.Unstructured, typed.AllowDuplicates); werr == nil {
			werr = lerr
		}
		if (gerr == nil) != c.fits || (werr == nil) != c.fits {
			t.Fatalf("%s: typed against the live object: %v; on their own: %v; want fitting %v", c.name, gerr, werr, c.fits)
		}
		if c.fits && !value.Equals(got.AsValue(), want.AsValue()) {
			t.Errorf("%s: typed value differs from typing the object on its own", c.name)
		}
		if lt, err := (fieldsTypeConverter{tc}).ObjectToTyped(live, typed.AllowDuplicates); (err == nil) != (c.live == nil) || live.typed == nil {
			t.Errorf("%s: the live object's typing: %v (memoized %v)", c.name, err, live.typed != nil)
		} else if err == nil && lt != live.typed.tv {
			t.Errorf("%s: the live object was typed again", c.name)
		}
	}
}

// FuzzDecodeJSONMembers: a document read with another's members (decodeJSONMembers with like) reads as
// decodeJSONObject reads it.
func FuzzDecodeJSONMembers(f *testing.F) {
	f.Add([]byte(`{"spec":{"a":[1,2]},"n":12,"metadata":{"x":1}}`), []byte(`{"spec":{"a":[1,2]},"n":123,"metadata":{"x":1}}`))
	f.Add([]byte(`{"s":"a\"","t":true}`), []byte(`{"s":"a\"","t":truex}`))
	f.Fuzz(func(t *testing.T, likeDoc, doc []byte) {
		content, members, ok := decodeJSONMembers(likeDoc, nil)
		if !ok {
			return
		}
		like := &fieldsObject{Unstructured: unstructured.Unstructured{Object: content}, members: members}
		got, _, ok := decodeJSONMembers(doc, like)
		if !ok {
			return
		}
		want, err := decodeJSONObject(doc)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s with %s: read %#v, decodeJSONObject reads %#v (%v)", doc, likeDoc, got, want, err)
		}
	})
}

// resetsManagedFieldsReference is resetsManagedFields read the slow way: the whole document into maps, names
// matched exactly.
func resetsManagedFieldsReference(doc []byte) bool {
	var m map[string]any
	if json.Unmarshal(doc, &m) != nil {
		return false
	}
	md, _ := m["metadata"].(map[string]any)
	mf, ok := md["managedFields"].([]any)
	return ok && len(mf) == 0
}

func TestResetsManagedFields(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"metadata":{"managedFields":[]}}`:                                                        true,
		`{"apiVersion":"v1","metadata":{"name":"a","managedFields":[ ]},"x":1}`:                    true,
		`{"spec":{"metadata":{"managedFields":[]}},"metadata":{"managedFields" : [` + "\n" + `]}}`: true,
		`{"metadata":{"managedFields":[{}]}}`:                                                      false,
		`{"metadata":{"managedFields":null}}`:                                                      false,
		`{"metadata":{}}`:                                                                          false,
		`{"spec":{"metadata":{"managedFields":[]}}}`:                                               false,
		`{"metadata":{"labels":{"managedFields":"[]"}}}`:                                           false,
		`{"Metadata":{"managedFields":[]}}`:                                                        false,
		`{"metadata":{"ManagedFields":[]}}`:                                                        false,
		`{"metadata":{"annotations":{"a":"\"managedFields\""}}}`:                                   false,
	} {
		if got := resetsManagedFields([]byte(doc)); got != want {
			t.Errorf("%s: %v, want %v", doc, got, want)
		}
		if ref := resetsManagedFieldsReference([]byte(doc)); ref != want {
			t.Errorf("%s: reference %v, want %v", doc, ref, want)
		}
	}
}

// FuzzResetsManagedFields compares resetsManagedFields with reading the whole document, on valid JSON without
// duplicate names (what the patch appliers make).
func FuzzResetsManagedFields(f *testing.F) {
	for _, seed := range []string{`{"metadata":{"managedFields":[]}}`, `{"a":[1,{"b":null}],"metadata":{"name":"x","managedFields":[{}]}}`,
		`{"metadata":{"managedFields":[ ]}}`, `{"metadata":{"managedFields":"[]"}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !jsontext.Value(doc).IsValid() {
			return
		}
		if got, want := resetsManagedFields(doc), resetsManagedFieldsReference(doc); got != want {
			t.Fatalf("%q: %v, reading the whole document %v", doc, got, want)
		}
	})
}
