package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// TestReviseJSON: a deletion's answer revised from the deleted state's JSON is the JSON of the state at the
// deletion's resourceVersion, as encoding it anew makes it; documents without such a member are refused.
func TestReviseJSON(t *testing.T) {
	shoot := exampleShoot(t)
	shoot.Metadata.ResourceVersion = "41"
	shoot.Metadata.Labels = map[string]string{"resourceVersion": "label"}
	doc, err := kjson.Marshal(shoot)
	if err != nil {
		t.Fatal(err)
	}
	deleted := proto.Clone(shoot).(*corev1beta1.Shoot)
	deleted.Metadata.ResourceVersion = "1234567"
	want, err := kjson.Marshal(deleted)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := reviseJSON(doc, "1234567")
	if !ok || string(got) != string(want) {
		t.Fatalf("revised:\n%s\nwant:\n%s", got, want)
	}

	for doc, rv := range map[string]string{
		`{"metadata":{"name":"a"}}`:                               "5",
		`{"metadata":{"resourceVersion":5}}`:                      "5",
		`{"spec":{"metadata":{"resourceVersion":"1"}}}`:           "5",
		`{"metadata":{"labels":{"resourceVersion":"1"}}}`:         "5",
		`[{"metadata":{"resourceVersion":"1"}}]`:                  "5",
		`{"metadata":{"resourceVersion":"1"}}`:                    "",
		`{"metadata":{"resourceVersion":"1"}} `:                   "5x",
		`{"metadata":{"resourceVersion":"1"`:                      "-5",
		`{"kind":"X","metadata":{"uid":"u","resourceVersion":"1"`: "5\"",
	} {
		if got, ok := reviseJSON([]byte(doc), rv); ok {
			t.Errorf("%s revised to %q: %s, want a refusal", doc, rv, got)
		}
	}
	got, ok = reviseJSON([]byte(`{"spec":{"metadata":{"resourceVersion":"1"}},"metadata":{"labels":{"resourceVersion":"x"},"resourceVersion":"12"},"b":1}`), "7")
	if want := `{"spec":{"metadata":{"resourceVersion":"1"}},"metadata":{"labels":{"resourceVersion":"x"},"resourceVersion":"7"},"b":1}`; !ok || string(got) != want {
		t.Fatalf("revised to %s, %v; want %s", got, ok, want)
	}
}

// FuzzReviseJSON compares reviseJSON with decoding the whole document and setting its resourceVersion, on valid
// JSON without duplicate names (what kjson writes).
func FuzzReviseJSON(f *testing.F) {
	for _, seed := range []string{`{"metadata":{"resourceVersion":"1"}}`, `{"a":[1,{"b":null}],"metadata":{"name":"x","resourceVersion":"22","labels":{}}}`,
		`{"metadata":{"resourceVersion":"1"},"metadata2":{}}`, `{"metadata":{"resourceVersion":"\u0031"}}`} {
		f.Add([]byte(seed), uint64(9))
	}
	f.Fuzz(func(t *testing.T, doc []byte, rev uint64) {
		if !jsontext.Value(doc).IsValid() {
			return
		}
		rv := strconv.FormatUint(rev, 10)
		got, ok := reviseJSON(doc, rv)
		var m map[string]any
		if json.Unmarshal(doc, &m) != nil {
			if ok {
				t.Fatalf("%q revised, but it is no object", doc)
			}
			return
		}
		md, _ := m["metadata"].(map[string]any)
		_, isString := md["resourceVersion"].(string)
		if ok != isString {
			t.Fatalf("%q: revised %v, has a resourceVersion string %v", doc, ok, isString)
		}
		if !ok {
			return
		}
		md["resourceVersion"] = rv
		var out map[string]any
		if err := json.Unmarshal(got, &out); err != nil || !reflect.DeepEqual(out, m) {
			t.Fatalf("%q revised to %q (%v), want %v", doc, got, err, m)
		}
	})
}
