package gateway

import (
	"encoding/json"
	"testing"
)

// FuzzYAMLBody: a YAML body converts (yamlToJSON) to valid JSON or fails; strictly (fieldValidation Strict) only
// without repeated keys, and then leniently too, without a warning. (Not always to the same bytes: keys that differ
// in YAML but not in JSON, 0 and .0, collide in an order sigs.k8s.io/yaml leaves to Go's map iteration.)
func FuzzYAMLBody(f *testing.F) {
	for _, s := range []string{
		"a: 1\n", "a: 1\na: 2\n", "b:\n  c: 1\nb:\n  d: 2\n", "l:\n- x: 1\n  x: 2\n", "{a: 1, a: 2}", "- 1\n- 2\n",
		"a: &x {b: 1}\nc: *x\n", "a: [", ": :", "", "null", "a: !!binary QQ==\n", "1: x\n1: y\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, serr := yamlToJSON(data, false, nil)
		var warnings []string
		lenient, lerr := yamlToJSON(data, true, func(w string) { warnings = append(warnings, w) })
		if serr == nil {
			if lerr != nil || len(warnings) > 0 || !json.Valid(strict) {
				t.Fatalf("%q: strict %s, lenient %s %v with warnings %q", data, strict, lenient, lerr, warnings)
			}
		}
		if lerr == nil && !json.Valid(lenient) {
			t.Fatalf("%q: invalid JSON %q", data, lenient)
		}
		if serr != nil && lerr == nil && len(warnings) == 0 {
			t.Fatalf("%q: refused strictly (%v), accepted leniently without a warning", data, serr)
		}
	})
}

func TestYAMLBodyRepeatedKeys(t *testing.T) {
	in := []byte("metadata:\n  labels:\n    x: a\n    x: b\ndata:\n  a: \"1\"\ndata:\n  b: \"2\"\n")
	if _, err := yamlToJSON(in, false, nil); err == nil {
		t.Error("strict conversion accepted repeated keys")
	}
	var warnings []string
	j, err := yamlToJSON(in, true, func(w string) { warnings = append(warnings, w) })
	want := []string{`line 4: key "x" already set in map`, `line 8: key "data" already set in map`}
	if err != nil || string(j) != `{"data":{"b":"2"},"metadata":{"labels":{"x":"b"}}}` || len(warnings) != 2 || warnings[0] != want[0] || warnings[1] != want[1] {
		t.Errorf("lenient: %s %v, warnings %q", j, err, warnings)
	}
}
