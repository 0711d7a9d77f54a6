package api

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// TestFittingMembers: what a write typed of an object (fittingMembers) spares the next write validating the members
// of its live object with the same JSON, and nothing else: a live object whose spec differs from what was
// remembered for its key (another version, here one that does not fit the schema) is validated, and its recording
// fails as on unstructured objects; a new object that did not fit is not remembered.
func TestFittingMembers(t *testing.T) {
	tc := typeConverter(t)
	fitting := newFittingMembers()
	valid, fms, gvk := createdShoot(t, fitting)
	key := objectKey(valid.Metadata.Namespace, valid.Metadata.Name)
	known := fitting.get(key)
	if known == nil || len(known.d) == 0 {
		t.Fatal("the create's object is not remembered")
	}
	if _, ok := known.d["metadata"]; ok {
		t.Error("metadata is remembered: the field manager changes it in the map")
	}

	// The live object as that write stored it: typed against what the write remembered, the same typed value.
	doc, err := kjson.Marshal(valid)
	if err != nil {
		t.Fatal(err)
	}
	live, err := newFieldsObject(valid, doc, gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	live.known = known
	got := fieldsTypeConverter{tc}.typeLive(live)
	want := fieldsTypeConverter{tc}.whole(live)
	if got.err != nil || want.err != nil || !value.Equals(got.tv.AsValue(), want.tv.AsValue()) {
		t.Fatalf("typed against the remembered members: %v; whole: %v (or the values differ)", got.err, want.err)
	}

	// Another version of the object, which does not fit: its spec is not the remembered one.
	unnamed := proto.Clone(valid).(*corev1beta1.Shoot)
	unnamed.Spec.Provider.Workers[0].Name = ""
	next := proto.Clone(unnamed).(*corev1beta1.Shoot)
	next.Metadata.Labels = map[string]string{"a": "b"}
	wantMF := recordWriteUnstructured(t, fms[""], gvk, unnamed, proto.Clone(next).(store.Object), "labeler", false)
	gotMF, err := recordWrite(fms[""], gvk, unnamed, nil, proto.Clone(next).(store.Object), "labeler", false, fitting)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantMF) != 0 || len(gotMF) != 0 {
		t.Fatalf("live object that does not fit: %d entries, the reference %d; want none", len(gotMF), len(wantMF))
	}
	if r := (fieldsTypeConverter{tc}).typeLive(func() *fieldsObject {
		o, err := newFieldsObject(unnamed, nil, gvk, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.known = known
		return o
	}()); r.err == nil {
		t.Fatal("a live object whose spec is not the remembered one was not validated")
	}

	// A new object that does not fit is not remembered: what was remembered stays.
	other := proto.Clone(unnamed).(*corev1beta1.Shoot)
	other.Metadata.Name = "other"
	if _, err := recordWrite(fms[""], gvk, nil, nil, other, "creator", false, fitting); err != nil {
		t.Fatal(err)
	}
	if fitting.get(objectKey(other.Metadata.Namespace, other.Metadata.Name)) != nil {
		t.Error("a create that does not fit was remembered")
	}
	if fitting.get(key) == nil {
		t.Error("the valid object was forgotten")
	}
}

// TestFittingMembersBounded: fittingMembers keeps at most fittingMembersMax objects.
func TestFittingMembersBounded(t *testing.T) {
	f := newFittingMembers()
	members := map[string][]byte{"spec": []byte(`{}`)}
	for i := range fittingMembersMax + 10 {
		f.put(fmt.Sprintf("ns/o%d", i), members)
	}
	if n := len(f.m); n > fittingMembersMax || n < fittingMembersMax*7/8 {
		t.Fatalf("%d objects remembered, want at most %d (and not much fewer)", n, fittingMembersMax)
	}
	if f.get(fmt.Sprintf("ns/o%d", fittingMembersMax+9)) == nil {
		t.Error("the last object put is not remembered")
	}
	var nilF *fittingMembers
	nilF.put("ns/x", members)
	if nilF.get("ns/x") != nil {
		t.Error("a nil fittingMembers remembers")
	}
}
