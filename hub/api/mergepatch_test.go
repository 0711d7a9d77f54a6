package api

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// sameAsLibrary applies patch to doc with mergePatch and with evanphx/json-patch's MergePatch and compares the
// results as decoded JSON; it reports whether mergePatch took the patch.
func sameAsLibrary(t *testing.T, doc, patch string) bool {
	t.Helper()
	parsed, ok := parseMergePatch([]byte(patch))
	if !ok {
		return false
	}
	got, ok := mergePatch([]byte(doc), parsed)
	if !ok {
		return false
	}
	want, err := jsonpatch.MergePatch([]byte(doc), []byte(patch))
	if err != nil {
		t.Fatalf("merging %s into %s: %s, but the library fails: %v", patch, doc, got, err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("merging %s into %s: invalid JSON %s: %v", patch, doc, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("merging %s into %s: %s, the library %s", patch, doc, got, want)
	}
	return true
}

// TestMergePatch: the merge patches mergePatch takes give the library's result; those it leaves to the library
// (arrays, duplicate names, a target that is no object) are named.
func TestMergePatch(t *testing.T) {
	const doc = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1","y":"2"},"annotations":{"n":null}},"data":{"k":"v"},"list":[1,{"a":null}],"num":1.50}`
	for _, patch := range []string{
		`{}`,
		`{"metadata":{"labels":{"x":"9","z":"3"},"annotations":{"new":"v"}}}`,
		`{"metadata":{"labels":{"x":null,"absent":null}}}`,
		`{"metadata":{"labels":null}}`,
		`{"data":{"k":{"deep":{"gone":null,"kept":1}}},"new":{"a":{"b":null},"c":true}}`,
		`{"metadata":{"annotations":{"n":{"x":null}}}}`,
		`{"list":{"replaced":true,"dropped":null},"num":2e3,"kind":"Other"}`,
		`{"data":"scalar","metadata":{"name":"b"}}`,
		` { "metadata" : { "labels" : { "x" : "\u003c" } } } `,
	} {
		if !sameAsLibrary(t, doc, patch) {
			t.Errorf("%s: not taken", patch)
		}
	}
	for _, patch := range []string{
		`{"list":[1,{"a":null}]}`,           // arrays: the library's
		`{"metadata":{"finalizers":["a"]}}`, // arrays at any depth
		`{"a":1,"a":2}`,                     // duplicate names
		`[1]`, `"x"`, `null`, `{"a":1} {}`, `{"a":`, `{"a":1} x`, `{"a":1}}`,
	} {
		if sameAsLibrary(t, doc, patch) {
			t.Errorf("%s: taken, want it left to the library", patch)
		}
	}
	for _, target := range []string{`[]`, `{"a":1,"a":2}`, `{"a":`, `{} {}`, `{"a":1} x`, `{"a":1}}`} {
		if sameAsLibrary(t, target, `{"b":1}`) {
			t.Errorf("patch of %s taken, want it left to the library", target)
		}
	}
}

// FuzzMergePatch compares mergePatch with evanphx/json-patch's MergePatch wherever mergePatch takes the patch.
func FuzzMergePatch(f *testing.F) {
	f.Add(`{"metadata":{"labels":{"a":"1"}},"spec":{"x":[1,2]}}`, `{"metadata":{"labels":{"a":null,"b":"2"}}}`)
	f.Add(`{"a":null,"b":{"c":1}}`, `{"a":{"x":null,"y":{}},"b":{"c":{"d":null}},"e":"f"}`)
	f.Add(`{"a":"\u00e9"}`, `{"\u00e9":1,"a":null}`)
	f.Add(`{"a":1}`, `{"b":2} x`)
	f.Fuzz(func(t *testing.T, doc, patch string) { sameAsLibrary(t, doc, patch) })
}
