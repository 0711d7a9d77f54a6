package kjson

import (
	"errors"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/google/go-cmp/cmp"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// kitchenFrom builds the expected Kitchen by decoding JSON with protojson-independent means: setting fields.
func kitchenGet(t *testing.T, m proto.Message, field string) protoreflect.Value {
	t.Helper()
	fd := kitchenDesc.Fields().ByName(protoreflect.Name(field))
	if !m.ProtoReflect().Has(fd) {
		t.Fatalf("field %s not set", field)
	}
	return m.ProtoReflect().Get(fd)
}

func TestUnmarshal(t *testing.T) {
	ts := func(s int64, n int32) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: s, Nanos: n} }
	const may16 = 1778936656 // 2026-05-16T13:04:16Z
	tests := []struct {
		name string
		in   string
		want proto.Message
	}{
		{"object meta", `{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"42","generation":3,
			"creationTimestamp":"2026-05-16T13:04:16Z","labels":{"a":"1","b":"2"},"annotations":{"x/y":""},
			"ownerReferences":[{"apiVersion":"v1","kind":"Secret","name":"s","controller":true}],"finalizers":["f1","f2"]}`,
			&metav1.ObjectMeta{Name: "a", Namespace: "ns", Uid: "u-1", ResourceVersion: "42", Generation: 3,
				CreationTimestamp: ts(may16, 0), Labels: map[string]string{"a": "1", "b": "2"},
				Annotations: map[string]string{"x/y": ""}, Finalizers: []string{"f1", "f2"},
				OwnerReferences: []*metav1.OwnerReference{{ApiVersion: "v1", Kind: "Secret", Name: "s", Controller: proto.Bool(true)}}}},
		{"whitespace", " \n\t{ \"name\" :\r\n \"a\" } \n", &metav1.ObjectMeta{Name: "a"}},
		{"int64 number", `{"generation":9223372036854775807}`, &metav1.ObjectMeta{Generation: math.MaxInt64}},
		{"int64 min", `{"limit":-9223372036854775808}`, &metav1.ListRequest{Limit: math.MinInt64}},
		{"int64 quoted", `{"generation":"12"}`, &metav1.ObjectMeta{Generation: 12}},
		{"int64 quoted negative", `{"generation":"-12"}`, &metav1.ObjectMeta{Generation: -12}},
		{"integral float for int", `{"code":404.0}`, &metav1.Status{Code: 404}},
		{"exponent for int", `{"code":4.04e2}`, &metav1.Status{Code: 404}},
		{"big exponent zero", `{"code":0e999999999999}`, &metav1.Status{}},
		{"int64 exponent", `{"generation":1E18}`, &metav1.ObjectMeta{Generation: 1e18}},
		{"int32 min", `{"code":-2147483648}`, &metav1.Status{Code: math.MinInt32}},
		{"optional zero kept", `{"deletionGracePeriodSeconds":0}`, &metav1.ObjectMeta{DeletionGracePeriodSeconds: proto.Int64(0)}},
		{"optional false kept", `{"controller":false}`, &metav1.OwnerReference{Controller: proto.Bool(false)}},
		{"optional empty string kept", `{"taskID":""}`, &metav1.LastError{TaskId: proto.String("")}},
		{"null field unset", `{"name":null,"generation":null,"creationTimestamp":null,"labels":null,"finalizers":null,"ownerReferences":null}`,
			&metav1.ObjectMeta{}},
		{"null optional unset", `{"deletionGracePeriodSeconds":null}`, &metav1.ObjectMeta{}},
		{"null message unset", `{"metadata":null}`, &metav1.Status{}},
		{"null top level", `null`, &metav1.ObjectMeta{}},
		{"null list element is zero", `{"finalizers":["a",null],"ownerReferences":[null]}`,
			&metav1.ObjectMeta{Finalizers: []string{"a", ""}, OwnerReferences: []*metav1.OwnerReference{{}}}},
		{"null map value is zero", `{"labels":{"a":null}}`, &metav1.ObjectMeta{Labels: map[string]string{"a": ""}}},
		{"empty message", `{"metadata":{}}`, &metav1.Status{Metadata: &metav1.ListMeta{}}},
		{"escaped strings", `{"name":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, &metav1.ObjectMeta{Name: "a\"\\/\b\f\n\r\té😀"}},
		{"escaped field name", `{"n\u0061me":"x"}`, &metav1.ObjectMeta{Name: "x"}},
		{"raw extension object compacted", `{"patch": { "a" : 1152921504606846976 , "b":[ 1 , "x y" ,null ] } }`,
			&metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`{"a":1152921504606846976,"b":[1,"x y",null]}`)}}},
		{"raw extension string with escapes", `{"patch":"a \" b\\"}`, &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`"a \" b\\"`)}}},
		{"raw extension array", `{"patch":[ ]}`, &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`[]`)}}},
		{"raw extension number kept exactly", `{"patch":123456789012345678901234567890}`,
			&metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`123456789012345678901234567890`)}}},
		{"raw extension bool", `{"patch":false}`, &metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`false`)}}},
		{"raw extension null unset", `{"patch":null}`, &metav1.PatchRequest{}},
		{"top-level raw extension", ` {"a": 1} `, &metav1.RawExtension{Raw: []byte(`{"a":1}`)}},
		{"top-level int or string", `"25%"`, &metav1.IntOrString{Value: &metav1.IntOrString_StrVal{StrVal: "25%"}}},
		{"top-level int or string int", `3`, &metav1.IntOrString{Value: &metav1.IntOrString_IntVal{IntVal: 3}}},
		{"timestamp UTC", `{"lastUpdateTime":"2026-05-16T13:04:16Z"}`, &metav1.Condition{LastUpdateTime: ts(may16, 0)}},
		{"timestamp offset", `{"lastUpdateTime":"2026-05-16T15:34:16+02:30"}`, &metav1.Condition{LastUpdateTime: ts(may16, 0)}},
		{"timestamp negative offset", `{"lastUpdateTime":"2026-05-16T06:04:16-07:00"}`, &metav1.Condition{LastUpdateTime: ts(may16, 0)}},
		{"timestamp fraction", `{"lastUpdateTime":"2026-05-16T13:04:16.5Z"}`, &metav1.Condition{LastUpdateTime: ts(may16, 5e8)}},
		{"timestamp micro", `{"lastUpdateTime":"2026-05-16T13:04:16.000001Z"}`, &metav1.Condition{LastUpdateTime: ts(may16, 1000)}},
		{"timestamp nanos", `{"lastUpdateTime":"2026-05-16T13:04:16.123456789+00:00"}`, &metav1.Condition{LastUpdateTime: ts(may16, 123456789)}},
		{"timestamp beyond nanos truncated", `{"lastUpdateTime":"2026-05-16T13:04:16.1234567899Z"}`, &metav1.Condition{LastUpdateTime: ts(may16, 123456789)}},
		{"timestamp leap day", `{"lastUpdateTime":"2024-02-29T00:00:00Z"}`, &metav1.Condition{LastUpdateTime: ts(1709164800, 0)}},
		{"timestamp epoch", `{"lastUpdateTime":"1970-01-01T00:00:00Z"}`, &metav1.Condition{LastUpdateTime: ts(0, 0)}},
		{"timestamp min", `{"lastUpdateTime":"0001-01-01T00:00:00Z"}`, &metav1.Condition{LastUpdateTime: ts(minTimestamp, 0)}},
		{"timestamp max", `{"lastUpdateTime":"9999-12-31T23:59:59.999999999Z"}`, &metav1.Condition{LastUpdateTime: ts(maxTimestamp, 999999999)}},
		{"timestamp null unset", `{"lastUpdateTime":null}`, &metav1.Condition{}},
		{"top-level struct", `{"a":[1,"x",null,true,{"b":{}}],"c":-0.5}`,
			mustStruct(t, map[string]any{"a": []any{1.0, "x", nil, true, map[string]any{"b": map[string]any{}}}, "c": -0.5})},
		{"top-level value null", `null`, structpb.NewNullValue()},
		{"top-level list value", `[1,[]]`, &structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1), structpb.NewListValue(&structpb.ListValue{})}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.want.ProtoReflect().New().Interface()
			if err := Unmarshal([]byte(tt.in), got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Unmarshal (-want +got):\n%s", diff)
			}
			// Presence must match too (proto.Equal sees optional zero vs unset).
			if !proto.Equal(tt.want, got) {
				t.Errorf("not proto.Equal: got %v", got)
			}
		})
	}
}

func TestUnmarshalKitchen(t *testing.T) {
	t.Run("all kinds", func(t *testing.T) {
		m := newKitchen()
		in := `{"s":"x","i32":-5,"i64":"-6","u32":4294967295,"u64":"18446744073709551615","si32":-7,"si64":-8,"fx32":9,"fx64":10,
			"sfx32":-11,"sfx64":-12,"fl":1.5,"db":-2.25e-10,"b":true,"by":"+/8","color":"RED","optI32":0,"optS":"","optB":false,
			"intMap":{"-1":"a","2":"b"},"boolMap":{"true":1,"false":0},"u64Map":{"18446744073709551615":"max"},
			"ios":"25%","colors":["GREEN",1,0],"oneS":"o"}`
		if err := Unmarshal([]byte(in), m); err != nil {
			t.Fatal(err)
		}
		checks := map[string]any{
			"s": "x", "i32": int32(-5), "i64": int64(-6), "u32": uint32(math.MaxUint32), "u64": uint64(math.MaxUint64),
			"si32": int32(-7), "si64": int64(-8), "fx32": uint32(9), "fx64": uint64(10), "sfx32": int32(-11), "sfx64": int64(-12),
			"fl": 1.5, "db": -2.25e-10, "b": true, "color": protoreflect.EnumNumber(1), "opt_i32": int32(0), "opt_s": "", "opt_b": false,
			"one_s": "o",
		}
		for name, want := range checks {
			got := kitchenGet(t, m, name).Interface()
			if f, ok := got.(float32); ok {
				got = float64(f)
			}
			if got != want {
				t.Errorf("%s = %v (%T), want %v (%T)", name, got, got, want, want)
			}
		}
		if got := kitchenGet(t, m, "by").Bytes(); !slices.Equal(got, []byte{0xfb, 0xff}) {
			t.Errorf("by = %x", got)
		}
		if got := kitchenGet(t, m, "int_map").Map(); got.Len() != 2 || got.Get(protoreflect.ValueOfInt32(-1).MapKey()).String() != "a" {
			t.Errorf("int_map wrong")
		}
		if got := kitchenGet(t, m, "bool_map").Map(); got.Len() != 2 || got.Get(protoreflect.ValueOfBool(true).MapKey()).Int() != 1 {
			t.Errorf("bool_map wrong")
		}
		ios := kitchenGet(t, m, "ios").Message()
		if ios.Get(ios.Descriptor().Fields().ByName("str_val")).String() != "25%" {
			t.Errorf("ios wrong")
		}
		if l := kitchenGet(t, m, "colors").List(); l.Len() != 3 || l.Get(0).Enum() != 2 || l.Get(1).Enum() != 1 {
			t.Errorf("colors wrong")
		}
	})
	t.Run("int or string number", func(t *testing.T) {
		m := newKitchen()
		if err := Unmarshal([]byte(`{"ios":0}`), m); err != nil {
			t.Fatal(err)
		}
		ios := kitchenGet(t, m, "ios").Message()
		if fd := ios.Descriptor().Fields().ByName("int_val"); !ios.Has(fd) || ios.Get(fd).Int() != 0 {
			t.Errorf("ios int_val not set")
		}
	})
	t.Run("padded base64", func(t *testing.T) {
		m := newKitchen()
		if err := Unmarshal([]byte(`{"by":"+/8=","bys":["","AA==","AA"]}`), m); err != nil {
			t.Fatal(err)
		}
		if got := kitchenGet(t, m, "by").Bytes(); !slices.Equal(got, []byte{0xfb, 0xff}) {
			t.Errorf("by = %x", got)
		}
		if l := kitchenGet(t, m, "bys").List(); l.Len() != 3 || len(l.Get(0).Bytes()) != 0 || !slices.Equal(l.Get(2).Bytes(), []byte{0}) {
			t.Errorf("bys wrong")
		}
	})
	t.Run("resets the message", func(t *testing.T) {
		m := &metav1.ObjectMeta{Name: "old", Labels: map[string]string{"old": "1"}}
		if err := Unmarshal([]byte(`{"namespace":"ns"}`), m); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, &metav1.ObjectMeta{Namespace: "ns"}) {
			t.Errorf("got %v", m)
		}
	})
}

func TestUnmarshalErrors(t *testing.T) {
	meta := func() proto.Message { return &metav1.ObjectMeta{} }
	kitchen := func() proto.Message { return newKitchen() }
	tests := []struct {
		name string
		in   string
		msg  func() proto.Message
		want string // the error text
		path string // the FieldError path; "" for top-level errors
	}{
		{"unknown field", `{"name":"a","nmae":"b"}`, meta, `nmae: unknown field "nmae"`, "nmae"},
		{"unknown nested field", `{"child":{"children":[{},{"kids":{"x":{"workerz":[]}}}]}}`, kitchen,
			`child.children[1].kids[x].workerz: unknown field "workerz"`, "child.children[1].kids[x].workerz"},
		{"proto name not accepted", `{"generate_name":"x"}`, meta, `generate_name: unknown field "generate_name"`, "generate_name"},
		{"lowerCamel not accepted when json_name differs", `{"kubeApiServer":"x"}`, kitchen, `kubeApiServer: unknown field "kubeApiServer"`, "kubeApiServer"},
		{"proto name of json_name field", `{"meta":{}}`, kitchen, `meta: unknown field "meta"`, "meta"},
		{"unknown inside metadata", `{"metadata":{"labels":{"a":"b"},"lables":{}}}`, kitchen, `metadata.lables: unknown field "lables"`, "metadata.lables"},
		{"type mismatch nested", `{"children":[{"i32":1},{"i32":"1"}]}`, kitchen, `children[1].i32: expected a number, got string`, "children[1].i32"},
		{"int32 quoted", `{"code":"404"}`, func() proto.Message { return &metav1.Status{} }, `code: expected a number, got string`, "code"},
		{"string for number", `{"name":5}`, meta, `name: expected a string, got number`, "name"},
		{"bool for string", `{"name":true}`, meta, `name: expected a string, got boolean`, "name"},
		{"string for bool", `{"controller":"true"}`, func() proto.Message { return &metav1.OwnerReference{} }, `controller: expected a boolean, got string`, "controller"},
		{"object for list", `{"finalizers":{}}`, meta, `finalizers: expected an array, got object`, "finalizers"},
		{"array for map", `{"labels":[]}`, meta, `labels: expected an object, got array`, "labels"},
		{"map value type", `{"labels":{"a":"1","b":2}}`, meta, `labels[b]: expected a string, got number`, "labels[b]"},
		{"nested map value in metadata", `{"metadata":{"annotations":{"k":{}}}}`, kitchen, `metadata.annotations[k]: expected a string, got object`, "metadata.annotations[k]"},
		{"list element type", `{"finalizers":["a",1]}`, meta, `finalizers[1]: expected a string, got number`, "finalizers[1]"},
		{"string for message", `{"ownerReferences":["x"]}`, meta, `ownerReferences[0]: expected an object, got string`, "ownerReferences[0]"},
		{"non-integral", `{"generation":1.5}`, meta, `generation: expected an integer, got 1.5`, "generation"},
		{"non-integral exponent", `{"generation":15e-1}`, meta, `generation: expected an integer, got 15e-1`, "generation"},
		{"int32 overflow", `{"code":2147483648}`, func() proto.Message { return &metav1.Status{} }, `code: 2147483648 is out of range for int32`, "code"},
		{"int64 overflow", `{"generation":9223372036854775808}`, meta, `generation: 9223372036854775808 is out of range for int64`, "generation"},
		{"int64 huge exponent", `{"generation":1e400}`, meta, `generation: 1e400 is out of range for int64`, "generation"},
		{"uint negative", `{"u32":-1}`, kitchen, `u32: -1 is out of range for uint32`, "u32"},
		{"uint64 overflow", `{"u64":18446744073709551616}`, kitchen, `u64: 18446744073709551616 is out of range for uint64`, "u64"},
		{"quoted int64 not an integer", `{"generation":"1.0"}`, meta, `generation: expected an integer, got string "1.0"`, "generation"},
		{"quoted int64 junk", `{"generation":"12a"}`, meta, `generation: expected an integer, got string "12a"`, "generation"},
		{"float overflow", `{"fl":1e39}`, kitchen, `fl: 1e39 is out of range for float`, "fl"},
		{"double overflow", `{"db":1e309}`, kitchen, `db: 1e309 is out of range for double`, "db"},
		{"double as string", `{"db":"NaN"}`, kitchen, `db: expected a number, got string`, "db"},
		{"bad base64", `{"by":"***"}`, kitchen, `by: invalid base64`, "by"},
		{"url base64 rejected", `{"by":"-_8="}`, kitchen, `by: invalid base64`, "by"},
		{"bad enum", `{"color":"PURPLE"}`, kitchen, `color: invalid value "PURPLE" for enum kjsontest.Color`, "color"},
		{"oneof twice", `{"oneS":"a","oneI":1}`, kitchen, `oneI: "oneS" and "oneI" are alternatives (oneof choice); only one may be set`, "oneI"},
		{"map key not integer", `{"intMap":{"x":"a"}}`, kitchen, `intMap[x]: invalid map key "x": expected an integer`, "intMap[x]"},
		{"map key out of range", `{"intMap":{"2147483648":"a"}}`, kitchen, `intMap[2147483648]: map key 2147483648 is out of range for int32`, "intMap[2147483648]"},
		{"map key duplicate as number", `{"intMap":{"0":"a","-0":"b"}}`, kitchen, `intMap[-0]: duplicate key "-0"`, "intMap[-0]"},
		{"bool map key", `{"boolMap":{"yes":1}}`, kitchen, `boolMap[yes]: invalid map key "yes": expected true or false`, "boolMap[yes]"},
		{"int or string bool", `{"ios":true}`, kitchen, `ios: expected a number or a string, got boolean`, "ios"},
		{"int or string fraction", `{"ios":1.5}`, kitchen, `ios: expected an integer, got 1.5`, "ios"},
		{"int or string in map", `{"ioss":{"a":1,"b":[]}}`, kitchen, `ioss[b]: expected a number or a string, got array`, "ioss[b]"},
		{"timestamp number", `{"ts":0}`, kitchen, `ts: expected an RFC 3339 timestamp string, got number`, "ts"},
		{"timestamp space", `{"ts":"2026-05-16 13:04:16Z"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-05-16 13:04:16Z"`, "ts"},
		{"timestamp no zone", `{"ts":"2026-05-16T13:04:16"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-05-16T13:04:16"`, "ts"},
		{"timestamp bad day", `{"ts":"2026-02-29T00:00:00Z"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-02-29T00:00:00Z"`, "ts"},
		{"timestamp bad hour", `{"ts":"2026-05-16T24:00:00Z"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-05-16T24:00:00Z"`, "ts"},
		{"timestamp empty fraction", `{"ts":"2026-05-16T13:04:16.Z"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-05-16T13:04:16.Z"`, "ts"},
		{"timestamp lowercase z", `{"ts":"2026-05-16T13:04:16z"}`, kitchen, `ts: invalid RFC 3339 timestamp "2026-05-16T13:04:16z"`, "ts"},
		{"timestamp year 0", `{"ts":"0000-12-31T23:59:59Z"}`, kitchen, `ts: timestamp out of range (years 0001 to 9999)`, "ts"},
		{"timestamp before year 1 by offset", `{"ts":"0001-01-01T00:00:00+01:00"}`, kitchen, `ts: timestamp out of range (years 0001 to 9999)`, "ts"},
		{"timestamp list", `{"tss":["2026-05-16T13:04:16Z","yesterday"]}`, kitchen, `tss[1]: invalid RFC 3339 timestamp "yesterday"`, "tss[1]"},
		{"unsupported well-known type", `{"dur":"1s"}`, kitchen,
			`dur: unsupported message type google.protobuf.Duration (kjson maps Timestamp, Struct, Value and ListValue of the well-known types)`, "dur"},
		{"duplicate field", `{"name":"a","name":"b"}`, meta, `name: duplicate field "name"`, "name"},
		{"duplicate nested field", `{"metadata":{"name":"a","uid":"u","name":"b"}}`, kitchen, `metadata.name: duplicate field "name"`, "metadata.name"},
		{"duplicate map key", `{"metadata":{"labels":{"a":"1","a":"2"}}}`, kitchen, `metadata.labels[a]: duplicate key "a"`, "metadata.labels[a]"},
		{"duplicate key in raw extension", `{"raw":{"x":{"a":1,"a":2}}}`, kitchen, `raw: duplicate key "a" at /x/a`, "raw"},
		{"duplicate null field", `{"name":null,"name":"a"}`, meta, `name: duplicate field "name"`, "name"},
		{"duplicate message field", `{"ts":null,"s":"","ts":"2026-05-16T13:04:16Z"}`, kitchen, `ts: duplicate field "ts"`, "ts"},
		{"duplicate map key (dynamic message)", `{"labels":{"a":"1","b":"2","a":"3"}}`, kitchen, `labels[a]: duplicate key "a"`, "labels[a]"},
		{"duplicate map key escaped", `{"labels":{"a":"1","\u0061":"3"}}`, meta, `labels[a]: duplicate key "a"`, "labels[a]"},
		{"duplicate message-valued key", `{"kids":{"a":{},"a":{}}}`, kitchen, `kids[a]: duplicate key "a"`, "kids[a]"},
		{"duplicate in raw list", `{"raws":[{},[{"b":1,"b":1}]]}`, kitchen, `raws[1]: duplicate key "b" at /0/b`, "raws[1]"},
		{"duplicate key in struct", `{"st":{"a":1,"a":2}}`, kitchen, `st[a]: duplicate key "a"`, "st[a]"},
		{"path after list and map", `{"finalizers":["a"],"labels":{"a":"b"},"name":5}`, meta, `name: expected a string, got number`, "name"},
		{"path after nested list and map", `{"metadata":{"finalizers":["a"],"labels":{"a":"b"},"ownerReferences":[{}]},"children":[{"strs":[],"kids":{"k":{}}},{"s":1}]}`,
			kitchen, `children[1].s: expected a string, got number`, "children[1].s"},
		{"not an object", `[]`, meta, `expected an object, got array`, ""},
		{"string top level", `"x"`, meta, `expected an object, got string`, ""},
		{"empty input", ``, meta, `unexpected end of JSON input`, ""},
		{"only whitespace", "  \n", meta, `unexpected end of JSON input`, ""},
		{"truncated", `{"name":`, meta, `name: unexpected end of JSON input`, "name"},
		{"truncated object", `{"name":"a"`, meta, `unexpected end of JSON input`, ""},
		{"truncated nested", `{"ownerReferences":[{"name":"a"}`, meta, `ownerReferences: unexpected end of JSON input`, "ownerReferences"},
		{"truncated in element", `{"ownerReferences":[{"name":"a"`, meta, `ownerReferences[0]: unexpected end of JSON input`, "ownerReferences[0]"},
		{"trailing garbage", `{"name":"a"} x`, meta,
			`unexpected data after the top-level JSON value: jsontext: invalid character 'x' at start of value after offset 13`, ""},
		{"second value", `{}{}`, meta, `unexpected data after the top-level JSON value`, ""},
		{"trailing bracket", `{}]`, meta,
			`unexpected data after the top-level JSON value: jsontext: invalid character ']' at start of value after offset 2`, ""},
		{"invalid UTF-8", "{\"name\":\"a\xffb\"}", meta, "name: jsontext: invalid UTF-8 within \"/name\" after offset 10", "name"},
		{"syntax error", `{"name":"a",}`, meta, `jsontext: invalid character ',' at start of value after offset 11`, ""},
		{"nested syntax error", `{"metadata":{"name":"a",}}`, kitchen, `metadata: jsontext: invalid character ',' at start of value within "/metadata" after offset 23`, "metadata"},
		{"single quotes", `{'name':'a'}`, meta, `jsontext: invalid character '\'' at start of value after offset 1`, ""},
		{"number syntax", `{"generation":01}`, meta, `jsontext: invalid character '1' after object value (expecting ',' or '}') after offset 15`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Unmarshal([]byte(tt.in), tt.msg())
			if err == nil {
				t.Fatalf("Unmarshal succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
			var fe *FieldError
			if errors.As(err, &fe) != (tt.path != "") || fe != nil && fe.Path != tt.path {
				t.Errorf("FieldError = %#v, want path %q", fe, tt.path)
			}
		})
	}
}

func TestUnknownFieldOptions(t *testing.T) {
	in := `{"name":"a","x":1,"metadata":{"labels":{"k":"v"},"y":{"deep":[1,{"z":2}]}},"children":[{"w":null}],"s":"kept"}`
	err := Unmarshal([]byte(in), newKitchen())
	if !errors.Is(err, ErrUnknownField) {
		t.Fatalf("strict: err = %v, want ErrUnknownField", err)
	}
	var paths []string
	m := newKitchen()
	opts := UnmarshalOptions{DiscardUnknown: true, OnUnknown: func(p string) { paths = append(paths, p) }}
	if err := opts.Unmarshal([]byte(in), m); err != nil {
		t.Fatalf("discard: %v", err)
	}
	if want := []string{"name", "x", "metadata.y", "children[0].w"}; !slices.Equal(paths, want) {
		t.Errorf("OnUnknown paths = %q, want %q", paths, want)
	}
	if got := kitchenGet(t, m, "s").String(); got != "kept" {
		t.Errorf("s = %q", got)
	}
	meta := kitchenGet(t, m, "meta").Message()
	if got := meta.Get(meta.Descriptor().Fields().ByName("labels")).Map().Get(protoreflect.ValueOfString("k").MapKey()).String(); got != "v" {
		t.Errorf("labels not decoded after an unknown field")
	}
	// DiscardUnknown without a callback.
	if err := (UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(in), newKitchen()); err != nil {
		t.Fatal(err)
	}
	// Duplicates are errors among skipped fields and inside skipped values too.
	for in, want := range map[string]string{
		`{"x":1,"s":"","x":2}`:        `x: duplicate field "x"`,
		`{"x":{"a":[{"b":1,"b":2}]}}`: `x: duplicate key "b" at /a/0/b`,
	} {
		err := (UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(in), newKitchen())
		if err == nil || err.Error() != want {
			t.Errorf("DiscardUnknown %s: err = %v, want %s", in, err, want)
		}
	}
	// Skipping still checks the syntax of the skipped value.
	if err := (UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(`{"x":[1,}`), newKitchen()); err == nil {
		t.Error("invalid JSON in a skipped value was accepted")
	}
}

func TestUnmarshalNil(t *testing.T) {
	if err := Unmarshal([]byte(`{}`), nil); err == nil {
		t.Error("Unmarshal into nil succeeded")
	}
	if err := Unmarshal([]byte(`{}`), (*metav1.ObjectMeta)(nil)); err == nil {
		t.Error("Unmarshal into typed nil succeeded")
	}
}

func TestYAMLToJSON(t *testing.T) {
	y := []byte(`
apiVersion: v1
kind: Status
metadata:
  resourceVersion: "12"
code: 404
status: Failure
`)
	j, err := YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var s metav1.Status
	if err := Unmarshal(j, &s); err != nil {
		t.Fatalf("Unmarshal(%s): %v", j, err)
	}
	want := &metav1.Status{ApiVersion: "v1", Kind: "Status", Metadata: &metav1.ListMeta{ResourceVersion: "12"}, Code: 404, Status: "Failure"}
	if !proto.Equal(&s, want) {
		t.Errorf("got %v", &s)
	}
	if _, err := YAMLToJSON([]byte("a: [")); err == nil {
		t.Error("invalid YAML accepted")
	}
}

// TestUnmarshalDuplicates: with OnDuplicate, repeated members are accepted as kube-apiserver's decoder accepts them
// (Go's encoding/json: objects merge, arrays and values are replaced, null clears, a map key's last value wins, a
// repeated unknown field is skipped) and each is reported with kube-apiserver's path. A RawExtension, kept as sent,
// still may not repeat a key: the encoder could not write it back.
func TestUnmarshalDuplicates(t *testing.T) {
	meta := func() proto.Message { return &metav1.ObjectMeta{} }
	kitchen := func() proto.Message { return newKitchen() }
	for _, c := range []struct {
		name, in string
		msg      func() proto.Message
		want     string   // Marshal of the result
		paths    []string // reported, in order
		unknown  []string // OnUnknown's paths
	}{
		{"value", `{"name":"a","name":"b"}`, meta, `{"name":"b"}`, []string{"name"}, nil},
		{"map key", `{"labels":{"a":"1","b":"2","a":"3"}}`, meta, `{"labels":{"a":"3","b":"2"}}`, []string{"labels.a"}, nil},
		{"maps merge", `{"labels":{"a":"1"},"labels":{"b":"2"}}`, meta, `{"labels":{"a":"1","b":"2"}}`, []string{"labels"}, nil},
		{"array replaced", `{"finalizers":["x"],"finalizers":["y","z"]}`, meta, `{"finalizers":["y","z"]}`, []string{"finalizers"}, nil},
		{"null clears", `{"finalizers":["x"],"generation":2,"finalizers":null,"generation":null}`, meta, `{}`, []string{"finalizers", "generation"}, nil},
		{"objects merge", `{"metadata":{"name":"a","labels":{"x":"1"}},"metadata":{"uid":"u","labels":{"y":"2"}}}`, kitchen,
			`{"metadata":{"name":"a","uid":"u","labels":{"x":"1","y":"2"}}}`, []string{"metadata"}, nil},
		{"nested", `{"metadata":{"name":"a","name":"b","labels":{"k":"1","k":"2"}}}`, kitchen, `{"metadata":{"name":"b","labels":{"k":"2"}}}`,
			[]string{"metadata.name", "metadata.labels.k"}, nil},
		{"list element", `{"metadata":{"ownerReferences":[{"kind":"A","kind":"B"}]}}`, kitchen, `{"metadata":{"ownerReferences":[{"kind":"B"}]}}`,
			[]string{"metadata.ownerReferences[0].kind"}, nil},
		{"time replaced", `{"ts":"2026-05-16T13:04:16Z","ts":null}`, kitchen, `{}`, []string{"ts"}, nil},
		{"oneof member", `{"oneS":"a","oneS":"b"}`, kitchen, `{"oneS":"b"}`, []string{"oneS"}, nil},
		{"unknown once", `{"zz":1,"name":"a","zz":{"a":1,"a":2}}`, meta, `{"name":"a"}`, nil, []string{"zz"}},
	} {
		var paths, unknown []string
		m := c.msg()
		err := UnmarshalOptions{
			DiscardUnknown: true,
			OnUnknown:      func(p string) { unknown = append(unknown, p) },
			OnDuplicate:    func(p string) { paths = append(paths, p) },
		}.Unmarshal([]byte(c.in), m)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if out, err := Marshal(m); err != nil || string(out) != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, out, err, c.want)
		}
		if !slices.Equal(paths, c.paths) || !slices.Equal(unknown, c.unknown) {
			t.Errorf("%s: reported duplicates %q and unknown %q, want %q and %q", c.name, paths, unknown, c.paths, c.unknown)
		}
		if err := Unmarshal([]byte(c.in), c.msg()); len(c.paths) > 0 && err == nil {
			t.Errorf("%s: accepted without OnDuplicate", c.name)
		}
	}
	err := UnmarshalOptions{OnDuplicate: func(string) {}}.Unmarshal([]byte(`{"raw":{"x":{"a":1,"a":2}}}`), newKitchen())
	if err == nil || err.Error() != `raw: duplicate key "a" at /x/a` {
		t.Errorf("a RawExtension repeating a key: %v", err)
	}
}
