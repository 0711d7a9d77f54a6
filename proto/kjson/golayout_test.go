package kjson

import (
	"math"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestFastPathUsed checks that generated messages get direct field access where it applies.
func TestFastPathUsed(t *testing.T) {
	mi := getMessageInfo((&metav1.ObjectMeta{}).ProtoReflect().Descriptor())
	gl, base := mi.layout((&metav1.ObjectMeta{}).ProtoReflect())
	if gl == nil || base == nil {
		t.Fatal("ObjectMeta has no fast layout")
	}
	want := map[string]fastKind{"name": fastString, "labels": fastStringMap, "finalizers": fastStringList, "generation": fastNone,
		"ownerReferences": fastNone, "deletionGracePeriodSeconds": fastNone}
	for name, kind := range want {
		fi := mi.byName[name]
		if fi.fast != kind || (gl.field(base, fi) != nil) != (kind != fastNone) {
			t.Errorf("%s: fast = %v, field found = %v; want %v", name, fi.fast, gl.field(base, fi) != nil, kind)
		}
	}
	if gl, _ := mi.layout(dynamicpb.NewMessage(mi.desc)); gl != nil {
		t.Error("dynamic message got a fast layout")
	}
}

// TestSecretData covers map<string, bytes> (the fast path for Secret data).
func TestSecretData(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"immutable":false,` +
		`"data":{"a":"","b":"AAE=","c":"aGVsbG8="},"stringData":{"x":"y"},"type":"Opaque"}`
	var s kcorev1.Secret
	if err := Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	want := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Metadata: &metav1.ObjectMeta{Name: "s"}, Immutable: proto.Bool(false),
		Data: map[string][]byte{"a": {}, "b": {0, 1}, "c": []byte("hello")}, StringData: map[string]string{"x": "y"}, Type: "Opaque"}
	if !proto.Equal(&s, want) {
		t.Fatalf("got %v", &s)
	}
	out, err := Marshal(&s)
	if err != nil || string(out) != in {
		t.Errorf("Marshal = %s, %v\nwant %s", out, err, in)
	}
	// Unpadded base64 and null values.
	if err := Unmarshal([]byte(`{"data":{"b":"AAE","n":null}}`), &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["b"]) != "\x00\x01" || len(s.Data["n"]) != 0 || len(s.Data) != 2 {
		t.Errorf("data = %q", s.Data)
	}
	for in, want := range map[string]string{
		`{"data":{"a":"!"}}`:              `data[a]: invalid base64`,
		`{"data":{"a":1}}`:                `data[a]: expected a base64 string, got number`,
		`{"data":{"a":"","a":""}}`:        `data[a]: duplicate key "a"`,
		`{"data":[]}`:                     `data: expected an object, got array`,
		`{"stringData":{"a":true}}`:       `stringData[a]: expected a string, got boolean`,
		`{"metadata":{"finalizers":[1]}}`: `metadata.finalizers[0]: expected a string, got number`,
		`{"type":{}}`:                     `type: expected a string, got object`,
	} {
		if err := Unmarshal([]byte(in), &kcorev1.Secret{}); err == nil || err.Error() != want {
			t.Errorf("Unmarshal(%s) = %v, want %s", in, err, want)
		}
	}
	if _, err := Marshal(&kcorev1.Secret{StringData: map[string]string{"k": "\xff"}}); err == nil || err.Error() != `stringData[k]: string is not valid UTF-8` {
		t.Errorf("invalid UTF-8 in a fast map: %v", err)
	}
}

// TestFastAndGenericAgree decodes the same documents into a generated message (fast paths) and into a dynamic
// message of the same descriptor (protoreflect paths), and compares results, errors and output.
func TestFastAndGenericAgree(t *testing.T) {
	docs := []string{
		canonicalObjectMeta,
		`{"name":null,"labels":{"a":null},"finalizers":[null,"x"],"annotations":{}}`,
		`{"finalizers":[]}`, `{"labels":{"a":1}}`, `{"finalizers":"x"}`, `{"name":1}`, `{"labels":{"a":"1","a":"2"}}`,
		`{"name":"\u00e9\n"}`, `{"finalizers":["a",{}]}`, `{"labels":{"x":"y"},"labels":{}}`,
	}
	for _, doc := range docs {
		gen := &metav1.ObjectMeta{}
		dyn := dynamicpb.NewMessage(gen.ProtoReflect().Descriptor())
		errGen, errDyn := Unmarshal([]byte(doc), gen), Unmarshal([]byte(doc), dyn)
		if (errGen == nil) != (errDyn == nil) || errGen != nil && errGen.Error() != errDyn.Error() {
			t.Errorf("%s: generated error %v, dynamic error %v", doc, errGen, errDyn)
			continue
		}
		if errGen != nil {
			continue
		}
		outGen, _ := Marshal(gen)
		outDyn, _ := Marshal(dyn)
		if string(outGen) != string(outDyn) {
			t.Errorf("%s: generated writes %s, dynamic writes %s", doc, outGen, outDyn)
		}
	}
	// A whole Shoot, through both paths.
	shoot := benchShoot(t).(*corev1beta1.Shoot)
	dyn := dynamicpb.NewMessage(shoot.ProtoReflect().Descriptor())
	j, _ := Marshal(shoot)
	if err := Unmarshal(j, dyn); err != nil {
		t.Fatal(err)
	}
	if out, _ := Marshal(dyn); string(out) != string(j) {
		t.Errorf("dynamic Shoot writes\n%s\ngenerated writes\n%s", out, j)
	}
}

// TestProbesAgreeWithHas checks the Go-struct presence probes against protoreflect's Has on every field of every
// message reachable from some generated messages.
func TestProbesAgreeWithHas(t *testing.T) {
	negZero := math.Copysign(0, -1)
	msgs := []proto.Message{
		benchShoot(t),
		&metav1.ObjectMeta{Finalizers: []string{}, Labels: map[string]string{}, Generation: 0, DeletionGracePeriodSeconds: proto.Int64(0)},
		&kcorev1.Secret{Data: map[string][]byte{}, Immutable: proto.Bool(false)},
		&kcorev1.Secret{Data: map[string][]byte{"a": nil}},
		&metav1.IntOrString{Value: &metav1.IntOrString_IntVal{}},
		&metav1.RawExtension{Raw: []byte{}},
		&metav1.Status{Code: -1, Details: &metav1.StatusDetails{RetryAfterSeconds: 1}},
		&structpb.Value{Kind: &structpb.Value_NumberValue{NumberValue: negZero}},
		&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(negZero)}},
	}
	checked := 0
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		mi := getMessageInfo(m.Descriptor())
		gl, base := mi.layout(m)
		for _, fi := range mi.fields {
			if has, known := gl.has(base, fi); known {
				checked++
				if has != m.Has(fi.fd) {
					t.Errorf("%s: probe says %v, Has says %v", fi.fd.FullName(), has, m.Has(fi.fd))
				}
			}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool { walk(v.Message()); return true })
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	for _, m := range msgs {
		walk(m.ProtoReflect())
	}
	if checked < 100 {
		t.Errorf("only %d fields probed", checked)
	}
}

// TestConcurrent runs the codec from many goroutines over generated and dynamic messages that share descriptors
// (so the cached Go layout flips between types); run with -race.
func TestConcurrent(t *testing.T) {
	shoot := benchShoot(t)
	j, err := Marshal(shoot)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 50 {
				var m proto.Message = &corev1beta1.Shoot{}
				if g%2 == 1 {
					m = dynamicpb.NewMessage(shoot.ProtoReflect().Descriptor())
				}
				if err := Unmarshal(j, m); err != nil {
					t.Error(err)
					return
				}
				out, err := Marshal(m)
				if err != nil || string(out) != string(j) {
					t.Errorf("goroutine %d: Marshal = %v, output differs: %v", g, err, string(out) != string(j))
					return
				}
			}
		})
	}
	wg.Wait()
}
