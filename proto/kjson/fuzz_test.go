package kjson

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// FuzzUnmarshal decodes arbitrary input into generated messages (ObjectMeta, Shoot), the all-kinds test message, the
// quantities test message and a Struct. It must never panic, and whatever decodes must encode, and decode back to an
// equal message whose JSON is the same again.
func FuzzUnmarshal(f *testing.F) {
	seeds := []string{
		canonicalObjectMeta,
		canonicalKitchen,
		`{}`, `null`, ``, `[]`, `"x"`, `0`, `{"name":"a"}`,
		`{"generation":"12"}`, `{"generation":1.0}`, `{"generation":1e3}`, `{"generation":1.5}`,
		`{"deletionGracePeriodSeconds":0}`, `{"labels":{"a":null,"b":"c"}}`, `{"finalizers":[null,"x"]}`,
		`{"creationTimestamp":"2026-05-16T15:04:16.123+02:00"}`, `{"creationTimestamp":"0000-01-01T00:00:00Z"}`,
		`{"raw":{"a" : [1, 2.5, "x"], "b":1152921504606846976}}`, `{"raws":[null,{},"s"]}`,
		`{"ios":1}`, `{"ios":"25%"}`, `{"ioss":{"a":null}}`, `{"intMap":{"-0":"a"}}`, `{"boolMap":{"true":1}}`,
		`{"val":null}`, `{"vals":[null,{"a":[]}]}`, `{"st":{"a":{"b":[1,{}]}}}`, `{"by":"AA"}`, `{"by":"AA=="}`,
		`{"fl":1e-46}`, `{"fl":-0}`, `{"color":7}`, `{"oneS":null,"oneI":2}`, `{"child":{"child":{"child":{}}}}`,
		`{"name":"a","name":"b"}`, `{"labels":{"a":"1","a":null},"finalizers":["x"],"finalizers":null,"zz":1,"zz":{}}`,
		`{"metadata":{"name":"a"},"metadata":{"uid":"u"},"oneS":"a","oneS":"b","ts":null,"ts":"2026-05-16T13:04:16Z"}`, `{"name":"a"} x`, `{"unknown":1}`, `{"name":"\ud83d\ude00\u0000"}`,
		`{"kids":{"k":null}}`, `{"tss":[null]}`, `{"metadata":{"ownerReferences":[{"controller":false}]}}`,
		// Quantities (fields marked (trellis.meta.v1.quantity)): numbers, strings, nulls in maps and lists, invalid text.
		`{"spec":{"kubernetes":{"kubelet":{"containerLogMaxSize":100,"kubeReserved":{"cpu":2,"memory":"1Gi","ephemeralStorage":1e9,"pid":1000},` +
			`"evictionMinimumReclaim":{"memoryAvailable":0}},"verticalPodAutoscaler":{"maxAllowed":{"cpu":8,"memory":"32Gi","x":null}},` +
			`"kubeAPIServer":{"autoscaling":{"minAllowed":{"cpu":1.5}}}},` +
			`"provider":{"workers":[{"name":"w","kubernetes":{"kubelet":{"kubeReserved":{"cpu":"100m","pid":-0}}},"volume":{"size":"20Gi"}}]}}}`,
		`{"q":2,"optQ":0,"qs":[1,null,"3Gi",-1.5e-3],"qMap":{"a":1E3,"b":null},"plain":"x","qUnknown":" 5 "}`,
		`{"q":"two"}`, `{"qs":[1e99999999999999999999]}`, `{"qMap":{"a":"\u0031"}}`, `{"q":""}`, `{"plain":2}`,
		`{"q":1e-2147483648}`, `{"qs":["0.00000000000000000000000000000000000001Ki"]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join(gardenerexamples.Dir(f), "*.yaml"))
	for _, file := range files {
		if y, err := os.ReadFile(file); err == nil {
			if j, err := YAMLToJSON(base64Placeholder.ReplaceAll(y, []byte("QQ=="))); err == nil {
				f.Add(j)
			}
		}
	}
	newMsgs := []func() proto.Message{
		func() proto.Message { return &metav1.ObjectMeta{} },
		func() proto.Message { return newKitchen() },
		func() proto.Message { return newQuantities() },
		func() proto.Message { return &structpb.Struct{} },
		func() proto.Message { return &corev1beta1.Shoot{} },
	}
	// Lenient decoding (?fieldValidation=Ignore|Warn) accepts whatever strict decoding does, with the same result,
	// and what it alone accepts encodes and decodes back strictly.
	lenient := UnmarshalOptions{DiscardUnknown: true, OnDuplicate: func(string) {}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range newMsgs {
			ml := newMsg()
			lerr := lenient.Unmarshal(data, ml)
			m := newMsg()
			if err := Unmarshal(data, m); err != nil {
				if lerr == nil {
					out, err := Marshal(ml)
					if err != nil {
						t.Fatalf("lenient Unmarshal(%q) succeeded but Marshal failed: %v", data, err)
					}
					if m2 := newMsg(); Unmarshal(out, m2) != nil || !proto.Equal(ml, m2) {
						t.Fatalf("lenient Unmarshal(%q) gave %q, which does not decode back to it", data, out)
					}
				}
				continue
			}
			if lerr != nil || !proto.Equal(m, ml) {
				t.Fatalf("lenient Unmarshal(%q) differs from strict: %v", data, lerr)
			}
			out, err := Marshal(m)
			if err != nil {
				t.Fatalf("Unmarshal(%q) succeeded but Marshal failed: %v", data, err)
			}
			if !json.Valid(out) {
				t.Fatalf("Marshal wrote invalid JSON %q", out)
			}
			m2 := newMsg()
			if err := Unmarshal(out, m2); err != nil {
				t.Fatalf("Unmarshal(Marshal(x)) failed: %v\ninput %q\noutput %q", err, data, out)
			}
			if !proto.Equal(m, m2) {
				t.Fatalf("Unmarshal(Marshal(x)) != x\ninput %q\noutput %q", data, out)
			}
			out2, err := Marshal(m2)
			if err != nil || !bytes.Equal(out, out2) {
				t.Fatalf("Marshal not stable: %q vs %q (%v)", out, out2, err)
			}
		}
	})
}
