package kjson

import (
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// special says whether a message has its own JSON form instead of an object of its fields.
type special uint8

const (
	specialNone special = iota
	specialTimestamp
	specialRawExtension
	specialIntOrString
	specialStruct
	specialValue
	specialListValue
	specialUnsupported // a well-known type this codec does not map
)

// Full names of the messages with their own JSON form.
const (
	nameTimestamp    = "google.protobuf.Timestamp"
	nameRawExtension = "trellis.meta.v1.RawExtension"
	nameIntOrString  = "trellis.meta.v1.IntOrString"
	nameStruct       = "google.protobuf.Struct"
	nameValue        = "google.protobuf.Value"
	nameListValue    = "google.protobuf.ListValue"
)

// The field option (trellis.meta.v1.quantity) = true (proto/trellis/meta/v1/options.proto) marks a string field, or
// the values of a map or list of strings, as a Kubernetes resource.Quantity.
const (
	nameQuantityOption                    = "trellis.meta.v1.quantity"
	numberQuantityOption protowire.Number = 51001
)

// unsupportedWKT lists the well-known types that have a special protojson form this codec does not implement; they
// are rejected rather than silently written as plain objects.
var unsupportedWKT = map[protoreflect.FullName]bool{
	"google.protobuf.Any":         true,
	"google.protobuf.Duration":    true,
	"google.protobuf.FieldMask":   true,
	"google.protobuf.Empty":       true,
	"google.protobuf.BoolValue":   true,
	"google.protobuf.Int32Value":  true,
	"google.protobuf.Int64Value":  true,
	"google.protobuf.UInt32Value": true,
	"google.protobuf.UInt64Value": true,
	"google.protobuf.FloatValue":  true,
	"google.protobuf.DoubleValue": true,
	"google.protobuf.StringValue": true,
	"google.protobuf.BytesValue":  true,
}

// messageInfo is the cached JSON view of one message descriptor.
type messageInfo struct {
	desc    protoreflect.MessageDescriptor
	special special
	fields  []*fieldInfo          // declaration order, the order fields are written in
	byName  map[string]*fieldInfo // by JSON name, the only name accepted on input

	goLayout atomic.Pointer[goLayout] // the Go struct layout of the last Go type seen (golayout.go)

	// Fields of the special messages, looked up once.
	f1, f2, f3, f4, f5, f6 protoreflect.FieldDescriptor
	oneof                  protoreflect.OneofDescriptor
}

// fieldInfo is one field of a messageInfo.
type fieldInfo struct {
	fd    protoreflect.FieldDescriptor
	index int      // fd.Index()
	fast  fastKind // direct Go field access this field allows (golayout.go)
	name  string   // JSON name
	key   []byte   // `"name":`, written before the value

	// elem describes the single value: the field itself, a list element, or a map value.
	elem     protoreflect.FieldDescriptor
	elemKind protoreflect.Kind
	isList   bool
	isMap    bool
	mapKey   protoreflect.FieldDescriptor
	oneof    protoreflect.OneofDescriptor
	// quantity says that the string elem is a Kubernetes quantity (the field is marked (trellis.meta.v1.quantity)):
	// a JSON number is accepted as its text, and the text must parse as a quantity. Looked up once here, so that
	// unmarked fields pay nothing for it.
	quantity bool

	// elemSpecial is the special form of a message-typed elem (specialNone otherwise), known without resolving
	// elemInfo, which is resolved lazily so that recursive messages work.
	elemSpecial special
	elemMsg     protoreflect.MessageDescriptor
	elemInfo    atomic.Pointer[messageInfo]
}

// message returns the messageInfo of a message-typed element.
func (fi *fieldInfo) message() *messageInfo {
	if mi := fi.elemInfo.Load(); mi != nil {
		return mi
	}
	mi := getMessageInfo(fi.elemMsg)
	fi.elemInfo.Store(mi)
	return mi
}

// infoCache maps a message's full name to its *messageInfo.
var infoCache sync.Map

// getMessageInfo returns the cached messageInfo of md, building it on first use. A descriptor that shares its full
// name with a cached, different descriptor (e.g. a dynamic copy) gets a fresh, uncached table.
func getMessageInfo(md protoreflect.MessageDescriptor) *messageInfo {
	if v, ok := infoCache.Load(md.FullName()); ok {
		if mi := v.(*messageInfo); mi.desc == md {
			return mi
		}
		return newMessageInfo(md)
	}
	mi := newMessageInfo(md)
	if v, loaded := infoCache.LoadOrStore(md.FullName(), mi); loaded {
		if cached := v.(*messageInfo); cached.desc == md {
			return cached
		}
	}
	return mi
}

func specialOf(md protoreflect.MessageDescriptor) special {
	switch md.FullName() {
	case nameTimestamp:
		return specialTimestamp
	case nameRawExtension:
		return specialRawExtension
	case nameIntOrString:
		return specialIntOrString
	case nameStruct:
		return specialStruct
	case nameValue:
		return specialValue
	case nameListValue:
		return specialListValue
	}
	if unsupportedWKT[md.FullName()] {
		return specialUnsupported
	}
	return specialNone
}

func newMessageInfo(md protoreflect.MessageDescriptor) *messageInfo {
	mi := &messageInfo{desc: md, special: specialOf(md)}
	fds := md.Fields()
	switch mi.special {
	case specialTimestamp:
		mi.f1, mi.f2 = fds.ByName("seconds"), fds.ByName("nanos")
	case specialRawExtension:
		mi.f1 = fds.ByName("raw")
	case specialIntOrString:
		mi.f1, mi.f2 = fds.ByName("int_val"), fds.ByName("str_val")
		mi.oneof = md.Oneofs().ByName("value")
	case specialStruct:
		mi.f1 = fds.ByName("fields")
	case specialListValue:
		mi.f1 = fds.ByName("values")
	case specialValue:
		mi.f1, mi.f2, mi.f3 = fds.ByName("null_value"), fds.ByName("number_value"), fds.ByName("string_value")
		mi.f4, mi.f5, mi.f6 = fds.ByName("bool_value"), fds.ByName("struct_value"), fds.ByName("list_value")
		mi.oneof = md.Oneofs().ByName("kind")
	}
	if mi.special != specialNone && !mi.valid() {
		// A message that borrows a special name but not its shape: refuse it rather than guess.
		mi.special = specialUnsupported
	}
	mi.fields = make([]*fieldInfo, fds.Len())
	mi.byName = make(map[string]*fieldInfo, fds.Len())
	for i := range fds.Len() {
		fd := fds.Get(i)
		fi := &fieldInfo{
			fd: fd, index: i, fast: fastKindOf(fd), name: fd.JSONName(),
			elem: fd, isList: fd.IsList(), isMap: fd.IsMap(),
		}
		fi.key, _ = appendString(nil, fi.name)
		fi.key = append(fi.key, ':')
		if fi.isMap {
			fi.mapKey, fi.elem = fd.MapKey(), fd.MapValue()
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			fi.oneof = od
		}
		fi.elemKind = fi.elem.Kind()
		fi.quantity = fi.elemKind == protoreflect.StringKind && quantityOption(fd)
		if fi.elemKind == protoreflect.MessageKind || fi.elemKind == protoreflect.GroupKind {
			fi.elemMsg = fi.elem.Message()
			fi.elemSpecial = specialOf(fi.elemMsg)
		}
		mi.fields[i] = fi
		mi.byName[fi.name] = fi
	}
	return mi
}

// quantityOption reports whether fd is marked [(trellis.meta.v1.quantity) = true]. The option is found by name, so
// that dynamic descriptors work too; when the extension was not known where the descriptor was built, it is read
// from the options' unknown fields.
func quantityOption(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	if opts == nil {
		return false
	}
	m := opts.ProtoReflect()
	if !m.IsValid() {
		return false
	}
	set, found := false, false
	m.Range(func(xd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if xd.IsExtension() && xd.FullName() == nameQuantityOption && xd.Kind() == protoreflect.BoolKind && !xd.IsList() {
			set, found = v.Bool(), true
			return false
		}
		return true
	})
	if found {
		return set
	}
	for b := m.GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == numberQuantityOption && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			set = v != 0 // the last one wins, as in protobuf
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return set
}

// valid reports whether a special message has the fields its JSON form needs.
func (mi *messageInfo) valid() bool {
	switch mi.special {
	case specialTimestamp:
		return mi.f1 != nil && mi.f1.Kind() == protoreflect.Int64Kind &&
			mi.f2 != nil && mi.f2.Kind() == protoreflect.Int32Kind
	case specialRawExtension:
		return mi.f1 != nil && mi.f1.Kind() == protoreflect.BytesKind && !mi.f1.IsList()
	case specialIntOrString:
		return mi.f1 != nil && mi.f1.Kind() == protoreflect.Int32Kind &&
			mi.f2 != nil && mi.f2.Kind() == protoreflect.StringKind &&
			mi.oneof != nil && mi.f1.ContainingOneof() == mi.oneof && mi.f2.ContainingOneof() == mi.oneof
	case specialStruct:
		return mi.f1 != nil && mi.f1.IsMap() && mi.f1.MapKey().Kind() == protoreflect.StringKind &&
			mi.f1.MapValue().Message() != nil && mi.f1.MapValue().Message().FullName() == nameValue
	case specialListValue:
		return mi.f1 != nil && mi.f1.IsList() && mi.f1.Message() != nil && mi.f1.Message().FullName() == nameValue
	case specialValue:
		return mi.f1 != nil && mi.f1.Kind() == protoreflect.EnumKind && mi.f2 != nil && mi.f2.Kind() == protoreflect.DoubleKind &&
			mi.f3 != nil && mi.f3.Kind() == protoreflect.StringKind && mi.f4 != nil && mi.f4.Kind() == protoreflect.BoolKind &&
			mi.f5 != nil && mi.f5.Message() != nil && mi.f5.Message().FullName() == nameStruct &&
			mi.f6 != nil && mi.f6.Message() != nil && mi.f6.Message().FullName() == nameListValue && mi.oneof != nil
	}
	return true
}
