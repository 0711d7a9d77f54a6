package kjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestMarshal(t *testing.T) {
	ts := func(s int64, n int32) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: s, Nanos: n} }
	const may16 = 1778936656 // 2026-05-16T13:04:16Z
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"empty", &metav1.ObjectMeta{}, `{}`},
		{"zero scalars omitted", &metav1.ObjectMeta{Name: "", Generation: 0}, `{}`},
		{"int64 as number", &metav1.ObjectMeta{Name: "a", Generation: 5}, `{"name":"a","generation":5}`},
		{"int64 beyond 2^53 exact", &metav1.ObjectMeta{Generation: 1<<62 + 1}, `{"generation":4611686018427387905}`},
		{"negative int64", &metav1.ListRequest{Limit: math.MinInt64}, `{"limit":-9223372036854775808}`},
		{"int32", &metav1.Status{Code: 404}, `{"code":404}`},
		{"optional int64 zero kept", &metav1.ObjectMeta{DeletionGracePeriodSeconds: proto.Int64(0)}, `{"deletionGracePeriodSeconds":0}`},
		{"optional bool false kept", &metav1.OwnerReference{Controller: proto.Bool(false)}, `{"controller":false}`},
		{"optional string empty kept", &metav1.LastError{TaskId: proto.String("")}, `{"taskID":""}`},
		{"optional int32 zero kept", &metav1.LastOperation{Progress: proto.Int32(0)}, `{"progress":0}`},
		{"bool true, zero bool omitted", &metav1.WatchRequest{AllowWatchBookmarks: true}, `{"allowWatchBookmarks":true}`},
		{"json_name", &metav1.OwnerReference{ApiVersion: "v1", Kind: "Secret", BlockOwnerDeletion: proto.Bool(true)},
			`{"apiVersion":"v1","kind":"Secret","blockOwnerDeletion":true}`},
		{"lowerCamel names", &metav1.ObjectMeta{GenerateName: "x-", ResourceVersion: "7"}, `{"generateName":"x-","resourceVersion":"7"}`},
		{"declaration order", &metav1.ObjectMeta{Finalizers: []string{"f"}, Uid: "u", Name: "n"}, `{"name":"n","uid":"u","finalizers":["f"]}`},
		{"map keys sorted", &metav1.ObjectMeta{Labels: map[string]string{"b": "2", "a": "1", "a.b/c": "3", "B": "0"}},
			`{"labels":{"B":"0","a":"1","a.b/c":"3","b":"2"}}`},
		{"empty map and list omitted", &metav1.ObjectMeta{Labels: map[string]string{}, Finalizers: []string{}, OwnerReferences: []*metav1.OwnerReference{}}, `{}`},
		{"set empty message printed", &metav1.Status{Metadata: &metav1.ListMeta{}}, `{"metadata":{}}`},
		{"list of messages", &metav1.ObjectMeta{OwnerReferences: []*metav1.OwnerReference{{Name: "a"}, {}}}, `{"ownerReferences":[{"name":"a"},{}]}`},
		{"list of strings", &metav1.LastError{Codes: []string{"ERR_A", "", "ERR_B"}}, `{"codes":["ERR_A","","ERR_B"]}`},
		{"timestamp", &metav1.ObjectMeta{CreationTimestamp: ts(may16, 0)}, `{"creationTimestamp":"2026-05-16T13:04:16Z"}`},
		{"timestamp millis", &metav1.Condition{LastUpdateTime: ts(may16, 500_000_000)}, `{"lastUpdateTime":"2026-05-16T13:04:16.5Z"}`},
		{"timestamp micros", &metav1.Condition{LastUpdateTime: ts(may16, 1000)}, `{"lastUpdateTime":"2026-05-16T13:04:16.000001Z"}`},
		{"timestamp nanos", &metav1.Condition{LastUpdateTime: ts(may16, 123456789)}, `{"lastUpdateTime":"2026-05-16T13:04:16.123456789Z"}`},
		{"timestamp epoch (set zero message)", &metav1.Condition{LastUpdateTime: ts(0, 0)}, `{"lastUpdateTime":"1970-01-01T00:00:00Z"}`},
		{"timestamp min", &metav1.Condition{LastUpdateTime: ts(minTimestamp, 0)}, `{"lastUpdateTime":"0001-01-01T00:00:00Z"}`},
		{"timestamp max", &metav1.Condition{LastUpdateTime: ts(maxTimestamp, 999999999)}, `{"lastUpdateTime":"9999-12-31T23:59:59.999999999Z"}`},
		{"raw extension embedded", &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`{"a":1152921504606846976,"b":[1,"x",null,true]}`)}},
			`{"patch":{"a":1152921504606846976,"b":[1,"x",null,true]}}`},
		{"raw extension scalar", &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`"s"`)}}, `{"patch":"s"}`},
		{"raw extension empty omitted", &metav1.PatchRequest{Name: "n", Patch: &metav1.RawExtension{}}, `{"name":"n"}`},
		{"top-level raw extension", &metav1.RawExtension{Raw: []byte(`[1,2]`)}, `[1,2]`},
		{"top-level empty raw extension", &metav1.RawExtension{}, `null`},
		{"top-level int or string", &metav1.IntOrString{Value: &metav1.IntOrString_StrVal{StrVal: "25%"}}, `"25%"`},
		{"top-level int or string int", &metav1.IntOrString{Value: &metav1.IntOrString_IntVal{IntVal: 0}}, `0`},
		{"top-level timestamp", ts(may16, 0), `"2026-05-16T13:04:16Z"`},
		{"typed nil", (*metav1.ObjectMeta)(nil), `null`},
		{"struct", mustStruct(t, map[string]any{"b": []any{1.5, "x", nil, true, map[string]any{}}, "a": 2.0}),
			`{"a":2,"b":[1.5,"x",null,true,{}]}`},
		{"empty struct", &structpb.Struct{}, `{}`},
		{"value", structpb.NewStringValue("s"), `"s"`},
		{"list value", &structpb.ListValue{}, `[]`},
		{"escaping", &metav1.ObjectMeta{Name: "a\"b\\c\n\t\r\b\f\x01\x7f<>&\u2028\u2029é☃😀"},
			`{"name":"a\"b\\c\n\t\r\b\f\u0001` + "\x7f" + `<>&\u2028\u2029é☃😀"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON %s", got)
			}
			// AppendMarshal appends.
			app, err := AppendMarshal([]byte("x"), tt.msg)
			if err != nil || string(app) != "x"+tt.want {
				t.Errorf("AppendMarshal = %s, %v", app, err)
			}
		})
	}
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// setKitchen sets fields of a Kitchen by name.
func setKitchen(kv ...any) protoreflect.ProtoMessage {
	m := newKitchen()
	for i := 0; i < len(kv); i += 2 {
		fd := kitchenDesc.Fields().ByName(protoreflect.Name(kv[i].(string)))
		m.Set(fd, protoreflect.ValueOf(kv[i+1]))
	}
	return m
}

func TestMarshalKinds(t *testing.T) {
	color := protoreflect.EnumNumber(2)
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"uint64 max", setKitchen("u64", uint64(math.MaxUint64)), `{"u64":18446744073709551615}`},
		{"all integer kinds", setKitchen("i32", int32(-1), "u32", uint32(math.MaxUint32), "si32", int32(-7), "si64", int64(-8),
			"fx32", uint32(9), "fx64", uint64(10), "sfx32", int32(-11), "sfx64", int64(-12)),
			`{"i32":-1,"u32":4294967295,"si32":-7,"si64":-8,"fx32":9,"fx64":10,"sfx32":-11,"sfx64":-12}`},
		{"double", setKitchen("db", 1.5), `{"db":1.5}`},
		{"double large uses exponent", setKitchen("db", 1e21), `{"db":1e+21}`},
		{"double small uses exponent", setKitchen("db", 1e-7), `{"db":1e-7}`},
		{"double integral", setKitchen("db", 100.0), `{"db":100}`},
		{"float32 shortest", setKitchen("fl", float32(3.14)), `{"fl":3.14}`},
		{"bytes standard base64 padded", setKitchen("by", []byte{0xfb, 0xff}), `{"by":"+/8="}`},
		{"enum by name", setKitchen("color", color), `{"color":"GREEN"}`},
		{"unknown enum number", setKitchen("color", protoreflect.EnumNumber(7)), `{"color":7}`},
		{"optional zero double kept", setKitchen("opt_db", 0.0), `{"optDb":0}`},
		{"oneof zero kept", setKitchen("one_i", int64(0)), `{"oneI":0}`},
		{"json_name", setKitchen("kube_api_server", "x"), `{"kubeAPIServer":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMarshalErrors(t *testing.T) {
	bad := newKitchen()
	child := bad.Mutable(kitchenDesc.Fields().ByName("children")).List()
	e := child.NewElement()
	e.Message().Set(kitchenDesc.Fields().ByName("fl"), protoreflect.ValueOfFloat32(float32(math.Inf(1))))
	child.Append(child.NewElement())
	child.Append(e)

	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"invalid UTF-8", &metav1.ObjectMeta{Name: "a\xffb"}, `name: string is not valid UTF-8`},
		{"invalid UTF-8 map key", &metav1.ObjectMeta{Labels: map[string]string{"k\xff": "v"}}, "labels[k\uFFFD]: string is not valid UTF-8"},
		{"invalid UTF-8 map value", &metav1.ObjectMeta{Labels: map[string]string{"k": "\xff"}}, `labels[k]: string is not valid UTF-8`},
		{"NaN", setKitchen("db", math.NaN()), `db: NaN and infinities are not valid JSON numbers`},
		{"Inf nested", bad, `children[1].fl: NaN and infinities are not valid JSON numbers`},
		{"invalid raw", &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`{"a":`)}}, `patch: RawExtension does not hold a valid JSON value`},
		{"timestamp out of range", &metav1.Condition{LastUpdateTime: &timestamppb.Timestamp{Seconds: maxTimestamp + 1}},
			`lastUpdateTime: timestamp out of range (years 0001 to 9999)`},
		{"timestamp nanos out of range", &metav1.Condition{LastUpdateTime: &timestamppb.Timestamp{Nanos: -1}},
			`lastUpdateTime: timestamp nanos out of range`},
		{"unsupported well-known type", setKitchen("dur", durationpb.New(1).ProtoReflect()),
			`dur: unsupported message type google.protobuf.Duration (kjson maps Timestamp, Struct, Value and ListValue of the well-known types)`},
		{"value without kind", &structpb.ListValue{Values: []*structpb.Value{{}}}, `[0]: google.protobuf.Value has no kind set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.msg)
			if err == nil {
				t.Fatalf("Marshal = %s, want error %q", got, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %v\nwant %v", err, tt.want)
			}
			b, err := AppendMarshal([]byte("keep"), tt.msg)
			if err == nil || string(b) != "keep" {
				t.Errorf("AppendMarshal on error = %q, %v; want the input back", b, err)
			}
		})
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}

// TestStringEscapingMatchesEncodingJSON checks the escaper against encoding/json with HTML escaping off.
func TestStringEscapingMatchesEncodingJSON(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x300; r++ {
		all.WriteRune(r)
	}
	inputs := []string{"", "plain", all.String(), "\u2028\u2029\u202a", "😀 tail", "<script>&amp;</script>", "\x00\x1f\x7f",
		strings.Repeat("long ascii string without escapes ", 20)}
	for _, s := range inputs {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got, err := appendString(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("appendString(%q)\n got %s\nwant %s", s, got, want.String())
		}
	}
}

// TestStringEscapingRandom compares the escaper with encoding/json on random strings made of the bytes that matter.
func TestStringEscapingRandom(t *testing.T) {
	alphabet := []string{"a", "Z", " ", "~", "\"", "\\", "\x00", "\x1f", "\n", "\x7f", "é", "\u2028", "😀", "<", "/"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := sb.String()
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		got, err := appendString(nil, s)
		if err != nil || string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("appendString(%q) = %s, %v; want %s", s, got, err, want.String())
		}
	}
	for _, s := range []string{"12345678\xff", "1234567\xff8", "\xff2345678", "abcdefgh\xc3"} {
		if _, err := appendString(nil, s); err == nil {
			t.Errorf("appendString(%q) accepted invalid UTF-8", s)
		}
	}
}

// TestSpecial8 checks the 8-byte scan against a byte-by-byte one.
func TestSpecial8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7f, 0x80, 0xff, 'a'}
	for range 200000 {
		var x uint64
		first := -1
		for j := range 8 {
			var c byte
			if rng.IntN(2) == 0 {
				c = interesting[rng.IntN(len(interesting))]
			} else {
				c = byte(rng.IntN(256))
			}
			x |= uint64(c) << (8 * j)
			if first < 0 && (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) {
				first = j
			}
		}
		got := special8(x)
		if (got == 0) != (first < 0) || first >= 0 && bits.TrailingZeros64(got)/8 != first {
			t.Fatalf("special8(%#016x) = %#016x, first special byte %d", x, got, first)
		}
	}
}

// TestFloatFormatMatchesEncodingJSON checks float formatting against encoding/json.
func TestFloatFormatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 1e-6, 1e-7, 9.999e-7, 1e20, 1e21, 123456789.125, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 5e-324, -2.5e-10, 1 << 60} {
		want, _ := json.Marshal(f)
		got, err := appendFloat(nil, f, 64)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendFloat(%v, 64) = %s, %v; want %s", f, got, err, want)
		}
		f32 := float32(f)
		if math.IsInf(float64(f32), 0) {
			continue
		}
		want, _ = json.Marshal(f32)
		got, err = appendFloat(nil, float64(f32), 32)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendFloat(%v, 32) = %s, %v; want %s", f32, got, err, want)
		}
	}
}

// TestMarshalRawExtensionAsHeld: a RawExtension is written as it is held once it is valid JSON, duplicate member
// names included (as encoding/json writes Kubernetes' RawExtension; only the decoder refuses them), and refused when
// it is not valid JSON or not UTF-8.
func TestMarshalRawExtensionAsHeld(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1,"a":{"b":[{"c":2,"c":3}]}}`: `{"patch":{"a":1,"a":{"b":[{"c":2,"c":3}]}}}`,
		`[1,"x",null]`:                      `{"patch":[1,"x",null]}`,
	} {
		got, err := Marshal(&metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(raw)}})
		if err != nil || string(got) != want {
			t.Errorf("%s: Marshal = %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{`{"a":1,}`, "\"\xff\"", `{"a":1}{}`} {
		if got, err := Marshal(&metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(raw)}}); err == nil {
			t.Errorf("%q: Marshal = %s, want an error", raw, got)
		}
	}
}
