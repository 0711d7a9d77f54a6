package kjson

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// canonicalObjectMeta is ObjectMeta as kjson writes it: compact, declaration order, sorted keys.
const canonicalObjectMeta = `{"name":"shoot--dev--a","generateName":"a-","namespace":"garden-dev",` +
	`"uid":"8c7f6b2a-1111-4222-8333-944444444444","resourceVersion":"123456","generation":9007199254740993,` +
	`"creationTimestamp":"2026-05-16T13:04:16Z","deletionTimestamp":"2026-05-17T00:00:00.5Z","deletionGracePeriodSeconds":0,` +
	`"labels":{"a":"1","app.kubernetes.io/name":"x","z":""},` +
	`"annotations":{"gardener.cloud/operation":"reconcile","note":"line1\nline2 \"quoted\" <tag> & \u2028 é"},` +
	`"ownerReferences":[{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","name":"a","uid":"u","controller":true,"blockOwnerDeletion":false},{}],` +
	`"finalizers":["gardener","",""]}`

// canonicalKitchen sets every kind of field of kjsontest.Kitchen, in its canonical form.
var canonicalKitchen = strings.Join([]string{
	`{"s":"str","i32":-2147483648,"i64":-9223372036854775808,"u32":4294967295,"u64":18446744073709551615`,
	`"si32":2147483647,"si64":9223372036854775807,"fx32":1,"fx64":2,"sfx32":-3,"sfx64":-4`,
	`"fl":3.4028235e+38,"db":1.7976931348623157e+308,"b":true,"by":"AAEC/w==","color":"GREEN"`,
	`"optI32":0,"optS":"","optB":false,"optI64":0,"optDb":0`,
	`"child":{"child":{},"strs":["deep"]}`,
	`"children":[{},{"i32":1},{"children":[{"s":"x"}]}]`,
	`"strs":["a","","c"],"ints":[0,-1,1152921504606846976]`,
	`"labels":{"":"empty key","a":"1","b":""}`,
	`"intMap":{"-5":"m","0":"z","10":"t","2":"two"}`,
	`"boolMap":{"false":0,"true":-1}`,
	`"kids":{"a":{},"b":{"s":"kid"}}`,
	`"blobs":{"e":"","x":"eA=="}`,
	`"ts":"2026-05-16T13:04:16.123Z"`,
	`"raw":{"n":1152921504606846976,"big":123456789012345678901234567890,"f":2.5e300,"s":"a \"b\" c","nested":[{"k":null},[],{}],"t":true}`,
	`"ios":"25%"`,
	`"st":{"a":1,"b":[true,null,"x",{"c":-0.5}],"d":{}}`,
	`"val":null`,
	`"lv":[1,"two",[]]`,
	`"metadata":{"name":"n","labels":{"k":"v"}}`,
	`"kubeAPIServer":"https://api"`,
	`"oneI":0`,
	`"tss":["1970-01-01T00:00:00Z","0001-01-01T00:00:00Z","9999-12-31T23:59:59.999999999Z"]`,
	`"raws":[{"a":1},null,1152921504606846976,"s",[]]`,
	`"ioss":{"a":1,"b":"x","c":null,"d":0,"e":-2147483648}`,
	`"vals":[null,0,"s",false,{"a":[]},[]]`,
	`"colors":["COLOR_UNSPECIFIED","RED",7]`,
	`"u64Map":{"1":"one","18446744073709551615":"max"}`,
	`"fls":[1.5,-0,1e-7,16777216],"dbs":[1e-7,1e+21,0.1,-0,123456789.125]`,
	`"bys":["","AA==","AAE="],"bools":[false,true],"u32s":[0,1]}`,
}, ",")

func TestRoundTripCanonical(t *testing.T) {
	tests := []struct {
		name string
		json string
		msg  func() proto.Message
	}{
		{"object meta", canonicalObjectMeta, func() proto.Message { return &metav1.ObjectMeta{} }},
		{"kitchen", canonicalKitchen, func() proto.Message { return newKitchen() }},
		{"status", `{"apiVersion":"v1","kind":"Status","metadata":{},"status":"Failure","message":"m","reason":"Invalid",` +
			`"details":{"name":"a","kind":"shoots","causes":[{"reason":"FieldValueInvalid","field":"spec.x"}]},"code":422}`,
			func() proto.Message { return &metav1.Status{} }},
		{"raw top level", `{"a":[1,2,{"b":null}]}`, func() proto.Message { return &metav1.RawExtension{} }},
		{"struct top level", `{"a":[1,2,{"b":null}]}`, func() proto.Message { return &structpb.Struct{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.json)) {
				t.Fatalf("test input is not valid JSON")
			}
			m := tt.msg()
			if err := Unmarshal([]byte(tt.json), m); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			out, err := Marshal(m)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.json {
				t.Errorf("round trip not byte-identical\n got %s\nwant %s", out, tt.json)
			}
			m2 := tt.msg()
			if err := Unmarshal(out, m2); err != nil || !proto.Equal(m, m2) {
				t.Errorf("Unmarshal(Marshal(x)) != x (err %v)", err)
			}
			// Indented input reads the same.
			var indented bytes.Buffer
			if err := json.Indent(&indented, []byte(tt.json), "", "  "); err != nil {
				t.Fatal(err)
			}
			m3 := tt.msg()
			if err := Unmarshal(indented.Bytes(), m3); err != nil {
				t.Fatalf("Unmarshal(indented): %v", err)
			}
			if out3, err := Marshal(m3); err != nil || string(out3) != tt.json {
				t.Errorf("indented round trip\n got %s\nwant %s", out3, tt.json)
			}
		})
	}
}

// TestRoundTripMessages checks Unmarshal(Marshal(x)) == x for messages built in Go.
func TestRoundTripMessages(t *testing.T) {
	msgs := []proto.Message{
		&metav1.ObjectMeta{},
		benchObjectMeta(),
		&metav1.ObjectMeta{Generation: math.MaxInt64, DeletionGracePeriodSeconds: proto.Int64(math.MinInt64)},
		&metav1.Condition{LastTransitionTime: &timestamppb.Timestamp{}, LastUpdateTime: &timestamppb.Timestamp{Seconds: -1, Nanos: 1}},
		&metav1.LastOperation{Progress: proto.Int32(0)},
		&metav1.LastError{TaskId: proto.String("")},
		&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: []*metav1.LabelSelectorRequirement{{Key: "k", Operator: "In", Values: []string{"x"}}}},
		&metav1.Toleration{Key: "k", Value: proto.String("")},
		&metav1.Preconditions{Uid: proto.String(""), ResourceVersion: proto.String("1")},
		&metav1.DeleteRequest{Preconditions: &metav1.Preconditions{}},
		&metav1.PatchRequest{Patch: &metav1.RawExtension{Raw: []byte(`{"spec":{"a":1152921504606846976}}`)}},
		mustStruct(t, map[string]any{"a": map[string]any{"b": []any{1.0, nil}}}),
	}
	for _, m := range msgs {
		out, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", m, err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := Unmarshal(out, got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", out, err)
		}
		if !proto.Equal(m, got) {
			t.Errorf("round trip of %s changed the message:\n got %v\nwant %v", out, got, m)
		}
	}
}
