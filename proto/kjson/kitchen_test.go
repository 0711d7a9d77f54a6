package kjson

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"

	_ "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// kitchenDesc is kjsontest.Kitchen, a dynamic test message with a field of every kind the codec maps (the generated
// Trellis messages use only a few of them).
var kitchenDesc = buildKitchen()

// newKitchen returns an empty kjsontest.Kitchen.
func newKitchen() *dynamicpb.Message { return dynamicpb.NewMessage(kitchenDesc) }

type T = descriptorpb.FieldDescriptorProto_Type

const (
	tString   = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tInt32    = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tInt64    = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tUint32   = descriptorpb.FieldDescriptorProto_TYPE_UINT32
	tUint64   = descriptorpb.FieldDescriptorProto_TYPE_UINT64
	tSint32   = descriptorpb.FieldDescriptorProto_TYPE_SINT32
	tSint64   = descriptorpb.FieldDescriptorProto_TYPE_SINT64
	tFixed32  = descriptorpb.FieldDescriptorProto_TYPE_FIXED32
	tFixed64  = descriptorpb.FieldDescriptorProto_TYPE_FIXED64
	tSfixed32 = descriptorpb.FieldDescriptorProto_TYPE_SFIXED32
	tSfixed64 = descriptorpb.FieldDescriptorProto_TYPE_SFIXED64
	tFloat    = descriptorpb.FieldDescriptorProto_TYPE_FLOAT
	tDouble   = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tBool     = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tBytes    = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tEnum     = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	tMessage  = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
)

type kitchenBuilder struct {
	msg *descriptorpb.DescriptorProto
	num int32
}

func (kb *kitchenBuilder) add(name string, typ T, typeName string, repeated bool) *descriptorpb.FieldDescriptorProto {
	kb.num++
	label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	if repeated {
		label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	}
	f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(kb.num), Type: typ.Enum(), Label: label.Enum()}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	kb.msg.Field = append(kb.msg.Field, f)
	return f
}

func (kb *kitchenBuilder) optional(name string, typ T) {
	f := kb.add(name, typ, "", false)
	f.Proto3Optional = proto.Bool(true)
	f.OneofIndex = proto.Int32(int32(len(kb.msg.OneofDecl)))
	kb.msg.OneofDecl = append(kb.msg.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_" + name)})
}

func (kb *kitchenBuilder) mapField(name string, key, val T, valType string) {
	entry := ""
	for _, part := range strings.Split(name, "_") {
		entry += strings.ToUpper(part[:1]) + part[1:]
	}
	entry += "Entry"
	kb.msg.NestedType = append(kb.msg.NestedType, &descriptorpb.DescriptorProto{
		Name: proto.String(entry),
		Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("key"), Number: proto.Int32(1), Type: key.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			{Name: proto.String("value"), Number: proto.Int32(2), Type: val.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), TypeName: nilIfEmpty(valType)},
		},
		Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
	})
	kb.add(name, tMessage, ".kjsontest.Kitchen."+entry, true)
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func buildKitchen() protoreflect.MessageDescriptor {
	kb := &kitchenBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("Kitchen")}}
	kb.msg.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("choice")}}
	kb.add("s", tString, "", false)
	kb.add("i32", tInt32, "", false)
	kb.add("i64", tInt64, "", false)
	kb.add("u32", tUint32, "", false)
	kb.add("u64", tUint64, "", false)
	kb.add("si32", tSint32, "", false)
	kb.add("si64", tSint64, "", false)
	kb.add("fx32", tFixed32, "", false)
	kb.add("fx64", tFixed64, "", false)
	kb.add("sfx32", tSfixed32, "", false)
	kb.add("sfx64", tSfixed64, "", false)
	kb.add("fl", tFloat, "", false)
	kb.add("db", tDouble, "", false)
	kb.add("b", tBool, "", false)
	kb.add("by", tBytes, "", false)
	kb.add("color", tEnum, ".kjsontest.Color", false)
	kb.optional("opt_i32", tInt32)
	kb.optional("opt_s", tString)
	kb.optional("opt_b", tBool)
	kb.optional("opt_i64", tInt64)
	kb.optional("opt_db", tDouble)
	kb.add("child", tMessage, ".kjsontest.Kitchen", false)
	kb.add("children", tMessage, ".kjsontest.Kitchen", true)
	kb.add("strs", tString, "", true)
	kb.add("ints", tInt64, "", true)
	kb.mapField("labels", tString, tString, "")
	kb.mapField("int_map", tInt32, tString, "")
	kb.mapField("bool_map", tBool, tInt64, "")
	kb.mapField("kids", tString, tMessage, ".kjsontest.Kitchen")
	kb.mapField("blobs", tString, tBytes, "")
	kb.add("ts", tMessage, ".google.protobuf.Timestamp", false)
	kb.add("raw", tMessage, ".trellis.meta.v1.RawExtension", false)
	kb.add("ios", tMessage, ".trellis.meta.v1.IntOrString", false)
	kb.add("st", tMessage, ".google.protobuf.Struct", false)
	kb.add("val", tMessage, ".google.protobuf.Value", false)
	kb.add("lv", tMessage, ".google.protobuf.ListValue", false)
	kb.add("meta", tMessage, ".trellis.meta.v1.ObjectMeta", false).JsonName = proto.String("metadata")
	kb.add("kube_api_server", tString, "", false).JsonName = proto.String("kubeAPIServer")
	kb.add("dur", tMessage, ".google.protobuf.Duration", false)
	kb.add("one_s", tString, "", false).OneofIndex = proto.Int32(0)
	kb.add("one_i", tInt64, "", false).OneofIndex = proto.Int32(0)
	kb.add("tss", tMessage, ".google.protobuf.Timestamp", true)
	kb.add("raws", tMessage, ".trellis.meta.v1.RawExtension", true)
	kb.mapField("ioss", tString, tMessage, ".trellis.meta.v1.IntOrString")
	kb.add("vals", tMessage, ".google.protobuf.Value", true)
	kb.add("colors", tEnum, ".kjsontest.Color", true)
	kb.mapField("u64_map", tUint64, tString, "")
	kb.add("fls", tFloat, "", true)
	kb.add("dbs", tDouble, "", true)
	kb.add("bys", tBytes, "", true)
	kb.add("bools", tBool, "", true)
	kb.add("u32s", tUint32, "", true)

	// Synthetic oneofs must follow the real ones: "choice" is first, the "_opt_*" ones were appended.
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("kjsontest/kitchen.proto"),
		Package: proto.String("kjsontest"),
		Syntax:  proto.String("proto3"),
		Dependency: []string{
			"google/protobuf/timestamp.proto", "google/protobuf/struct.proto", "google/protobuf/duration.proto",
			"trellis/meta/v1/meta.proto",
		},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Color"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("COLOR_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("RED"), Number: proto.Int32(1)},
				{Name: proto.String("GREEN"), Number: proto.Int32(2)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{kb.msg},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	return fd.Messages().ByName("Kitchen")
}

func TestKitchenDescriptor(t *testing.T) {
	fds := kitchenDesc.Fields()
	if got := fds.ByName("opt_i32"); !got.HasPresence() || got.ContainingOneof() == nil || !got.ContainingOneof().IsSynthetic() {
		t.Fatalf("opt_i32 is not proto3 optional")
	}
	if got := fds.ByName("kube_api_server").JSONName(); got != "kubeAPIServer" {
		t.Fatalf("json_name not honoured: %s", got)
	}
	if !fds.ByName("labels").IsMap() {
		t.Fatalf("labels is not a map")
	}
}
