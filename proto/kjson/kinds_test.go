package kjson

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// TestGardenerExamples decodes Gardener's example manifests into the Trellis kinds and checks that kjson writes them
// back as the same JSON: every field of the manifest that the proto models comes back with the same name, type and
// value. Fields the protos do not model yet are logged, not failed: they are the protos' business.
func TestGardenerExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(gardenerexamples.Dir(t), "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no Gardener examples")
	}
	decoded := 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			y, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// Gardener's examples write Secret data as base64(...) placeholders; encode them as a user would.
			y = base64Placeholder.ReplaceAllFunc(y, func(m []byte) []byte {
				return []byte(base64.StdEncoding.EncodeToString(base64Placeholder.FindSubmatch(m)[1]))
			})
			j, err := YAMLToJSON(y)
			if err != nil {
				t.Fatalf("YAMLToJSON: %v", err)
			}
			var tm struct{ APIVersion, Kind string }
			if err := json.Unmarshal(j, &tm); err != nil {
				t.Fatal(err)
			}
			m := gardenerexamples.KindMessage(tm.APIVersion, tm.Kind)
			if m == nil {
				t.Skipf("%s %s is not a Trellis kind", tm.APIVersion, tm.Kind)
			}
			decoded++
			var unknown []string
			opts := UnmarshalOptions{DiscardUnknown: true, OnUnknown: func(p string) { unknown = append(unknown, p) }}
			if err := opts.Unmarshal(j, m); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			for _, p := range unknown {
				t.Logf("not modelled by %s: %s", m.ProtoReflect().Descriptor().FullName(), p)
			}
			if len(unknown) == 0 {
				if err := Unmarshal(j, m.ProtoReflect().New().Interface()); err != nil {
					t.Errorf("strict Unmarshal: %v", err)
				}
			}
			out, err := Marshal(m)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			back := m.ProtoReflect().New().Interface()
			if err := Unmarshal(out, back); err != nil {
				t.Fatalf("Unmarshal(Marshal(x)): %v", err)
			}
			if !proto.Equal(m, back) {
				t.Fatalf("Unmarshal(Marshal(x)) != x")
			}

			// The written JSON is the manifest without the unmodelled fields.
			var in, got any
			if err := json.Unmarshal(j, &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			for _, p := range unknown {
				in = dropPath(in, p)
			}
			if diffs := jsonDiff("", in, got); len(diffs) > 0 {
				for _, d := range diffs {
					t.Errorf("written JSON differs at %s", d)
				}
				t.Logf("got  %s\nwant %s", out, mustJSON(in))
			}
		})
	}
	if decoded == 0 {
		t.Log("no example is a Trellis kind")
	}
}

// dropPath removes the member at a kjson field path (a.b[0].c, a.labels[key]) from a decoded JSON value.
func dropPath(v any, path string) any {
	var steps []string
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		steps = append(steps, name)
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			steps = append(steps, "["+idx)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	var drop func(v any, steps []string) any
	drop = func(v any, steps []string) any {
		switch x := v.(type) {
		case map[string]any:
			key := strings.TrimPrefix(steps[0], "[")
			if len(steps) == 1 {
				delete(x, key)
			} else if child, ok := x[key]; ok {
				x[key] = drop(child, steps[1:])
			}
		case []any:
			i, err := strconv.Atoi(strings.TrimPrefix(steps[0], "["))
			if err == nil && i < len(x) && len(steps) > 1 {
				x[i] = drop(x[i], steps[1:])
			}
		}
		return v
	}
	return drop(v, steps)
}

// jsonDiff lists the paths where two decoded JSON values differ.
func jsonDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k, av := range am {
			if bv, ok := bm[k]; ok {
				out = append(out, jsonDiff(path+"."+k, av, bv)...)
			} else if !isEmptyJSON(av) { // null, [] and {} are left out, as Kubernetes' omitempty leaves them out
				out = append(out, path+"."+k+": missing from the output (was "+string(mustJSON(av))+")")
			}
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, path+"."+k+": added in the output ("+string(mustJSON(bv))+")")
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, jsonDiff(path+"["+strconv.Itoa(i)+"]", al[i], bl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{path + ": " + string(mustJSON(a)) + " became " + string(mustJSON(b))}
	}
	return nil
}

// base64Placeholder matches Gardener's base64(...) placeholders for Secret data.
var base64Placeholder = regexp.MustCompile(`base64\(([^)\n]*)\)`)

func isEmptyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
