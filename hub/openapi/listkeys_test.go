package openapi_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/openapi"
)

// TestListMapKeysMergeLists: the hub's OpenAPI definitions, read by managedfields' type converter as kube-apiserver
// reads a CRD's, make structured-merge-diff merge a shoot's workers by name and extensions by type, and keep an
// unmarked list (the zones of a worker) atomic.
func TestListMapKeysMergeLists(t *testing.T) {
	docs, err := openapi.Build(protoregistry.GlobalFiles, api.Kinds)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*spec.Schema{}
	for name, s := range docs.V2.Definitions {
		defs[name] = &s
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		t.Fatal(err)
	}
	shoot := func(workers []any, extensions []any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
			"metadata": map[string]any{"name": "s", "namespace": "garden-dev"},
			"spec":     map[string]any{"provider": map[string]any{"type": "local", "workers": workers}, "extensions": extensions},
		}}
	}
	worker := func(name, machine string, zones ...any) any {
		return map[string]any{"name": name, "machine": map[string]any{"type": machine}, "zones": zones}
	}
	live, err := tc.ObjectToTyped(shoot([]any{worker("a", "m1", "z1", "z2"), worker("b", "m1")}, []any{map[string]any{"type": "x"}}))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := tc.ObjectToTyped(shoot([]any{worker("b", "m2", "z3")}, []any{map[string]any{"type": "y"}}))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := live.Merge(patch)
	if err != nil {
		t.Fatal(err)
	}
	got := merged.AsValue().Unstructured().(map[string]any)["spec"].(map[string]any)
	workers := got["provider"].(map[string]any)["workers"].([]any)
	if len(workers) != 2 || workers[0].(map[string]any)["name"] != "a" ||
		workers[1].(map[string]any)["machine"].(map[string]any)["type"] != "m2" {
		t.Errorf("workers not merged by name: %v", workers)
	}
	if zones := workers[1].(map[string]any)["zones"].([]any); len(zones) != 1 || zones[0] != "z3" {
		t.Errorf("zones of worker b: %v, want the applied list alone (atomic)", zones)
	}
	if ext := got["extensions"].([]any); len(ext) != 2 {
		t.Errorf("extensions not merged by type: %v", ext)
	}
	// The field set of the patch names worker b by its key, as managedFields record it.
	set, err := patch.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	want := fieldpath.MakePathOrDie("spec", "provider", "workers", fieldpath.KeyByFields("name", "b"), "machine", "type")
	if !set.Has(want) {
		t.Errorf("field set lacks %s:\n%s", want, set)
	}
}

// FuzzStrategicMergePatch: any patch document applied to a shoot with the hub's patch meta is refused with an error
// or gives a JSON object, never a panic.
func FuzzStrategicMergePatch(f *testing.F) {
	docs, err := openapi.Build(protoregistry.GlobalFiles, api.Kinds)
	if err != nil {
		f.Fatal(err)
	}
	lookup, err := openapi.PatchMeta(docs)
	if err != nil {
		f.Fatal(err)
	}
	meta, ok := lookup("trellis.core.v1beta1.Shoot")
	if !ok {
		f.Fatal("no patch meta for trellis.core.v1beta1.Shoot")
	}
	const shoot = `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"s","ownerReferences":[{"uid":"u"}]},
"spec":{"provider":{"type":"local","workers":[{"name":"a","zones":["z"]}]},"extensions":[{"type":"x"}]},"status":{"conditions":[{"type":"A"}]}}`
	for _, p := range []string{`{}`, `{"spec":{"provider":{"workers":[{"name":"b"}]}}}`, `{"spec":{"provider":{"workers":[{"name":"a","$patch":"delete"}]}}}`,
		`{"spec":{"extensions":[{"$patch":"replace"}]}}`, `{"spec":{"provider":{"$setElementOrder/workers":[{"name":"a"}]}}}`,
		`{"status":{"conditions":null}}`, `{"spec":{"provider":{"workers":[{"zones":1}]}}}`, `[]`, `null`} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, patch string) {
		out, err := strategicpatch.StrategicMergePatchUsingLookupPatchMeta([]byte(shoot), []byte(patch), meta)
		if err != nil {
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("patch %q gave no JSON object: %v: %s", patch, err, out)
		}
	})
}
