package kjson

import (
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Fast paths over generated Go structs. protoreflect boxes every map entry and every string it converts to and from
// Go values (Map.Range, Map.Set, Message.Set, List.Append each allocate); for the fields Kubernetes objects are full
// of (strings, repeated strings, map<string, string> labels and annotations, map<string, bytes> Secret data) the
// codec reads and writes the Go struct field directly instead. Only messages generated with the open struct API
// qualify; anything else (dynamicpb, the opaque API) takes the protoreflect path.

// fastKind says how a field can be accessed directly.
type fastKind uint8

const (
	fastNone       fastKind = iota
	fastString              // string (proto3, no presence)
	fastStringList          // []string
	fastStringMap           // map[string]string
	fastBytesMap            // map[string][]byte
)

// fastKindOf is the fast access a field's descriptor allows, if its Go field has the matching type.
func fastKindOf(fd protoreflect.FieldDescriptor) fastKind {
	switch {
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind {
			return fastNone
		}
		switch fd.MapValue().Kind() {
		case protoreflect.StringKind:
			return fastStringMap
		case protoreflect.BytesKind:
			return fastBytesMap
		}
	case fd.Kind() != protoreflect.StringKind:
	case fd.IsList():
		return fastStringList
	case !fd.HasPresence() && fd.ContainingOneof() == nil:
		return fastString
	}
	return fastNone
}

var goTypeOf = map[fastKind]reflect.Type{
	fastString:     reflect.TypeFor[string](),
	fastStringList: reflect.TypeFor[[]string](),
	fastStringMap:  reflect.TypeFor[map[string]string](),
	fastBytesMap:   reflect.TypeFor[map[string][]byte](),
}

// probeKind says how to tell from a Go struct field whether the protobuf field is empty (m.Has false) without asking
// protoreflect, whose Has costs a reflect lookup per message field.
type probeKind uint8

const (
	probeNone    probeKind = iota // ask protoreflect
	probePointer                  // *T (messages, optional scalars): empty when nil
	probeSlice                    // []T (repeated fields, bytes): empty when len is 0
	probeMap                      // map[K]V: empty when nil (a non-nil map is asked about)
	probe8                        // bool: empty when zero
	probe32                       // int32, uint32, float32, enums: empty when all bits are zero
	probe64                       // int64, uint64, float64: empty when all bits are zero
)

// probeKindOf is the probe a field allows if its Go field has the Go kind it implies (checked by newGoLayout).
func probeKindOf(fd protoreflect.FieldDescriptor) (probeKind, reflect.Kind) {
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		return probeNone, 0 // a oneof wrapper interface
	}
	switch {
	case fd.IsMap():
		return probeMap, reflect.Map
	case fd.IsList():
		return probeSlice, reflect.Slice
	case fd.Message() != nil || fd.HasPresence():
		return probePointer, reflect.Pointer
	}
	switch fd.Kind() {
	case protoreflect.BytesKind:
		return probeSlice, reflect.Slice
	case protoreflect.BoolKind:
		return probe8, reflect.Bool
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return probe32, reflect.Int32
	case protoreflect.EnumKind:
		return probe32, reflect.Int32
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return probe32, reflect.Uint32
	case protoreflect.FloatKind:
		return probe32, reflect.Float32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return probe64, reflect.Int64
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return probe64, reflect.Uint64
	case protoreflect.DoubleKind:
		return probe64, reflect.Float64
	}
	return probeNone, 0
}

// goField is where one protobuf field lives in a generated Go struct.
type goField struct {
	offset uintptr
	fast   bool      // the fieldInfo's fastKind applies
	probe  probeKind // how to tell emptiness
}

// goLayout maps the fields of one message descriptor to the struct fields of one generated Go type.
type goLayout struct {
	typ    reflect.Type // the pointer type, as reflect.TypeOf(m.Interface()) gives it
	fields []goField    // by protobuf field index; nil when the Go type is not an open-struct generated message
}

// layout returns the goLayout of m's Go type and a pointer to m's struct, or nil when m is not an open-struct
// generated message. It caches the last Go type seen.
func (mi *messageInfo) layout(m protoreflect.Message) (*goLayout, unsafe.Pointer) {
	msg := m.Interface()
	t := reflect.TypeOf(msg)
	gl := mi.goLayout.Load()
	if gl == nil || gl.typ != t {
		gl = newGoLayout(mi, t)
		mi.goLayout.Store(gl)
	}
	if gl.fields == nil {
		return nil, nil
	}
	p := reflect.ValueOf(msg).UnsafePointer()
	if p == nil {
		return nil, nil
	}
	return gl, p
}

// field returns a pointer to the Go field of fi in the struct at base, or nil when fi has no fast path.
func (gl *goLayout) field(base unsafe.Pointer, fi *fieldInfo) unsafe.Pointer {
	if gl == nil || !gl.fields[fi.index].fast {
		return nil
	}
	return unsafe.Add(base, gl.fields[fi.index].offset)
}

// has reports whether fi is set (m.Has) in the struct at base; known is false when only protoreflect can tell.
func (gl *goLayout) has(base unsafe.Pointer, fi *fieldInfo) (has, known bool) {
	if gl == nil {
		return false, false
	}
	gf := &gl.fields[fi.index]
	p := unsafe.Add(base, gf.offset)
	switch gf.probe {
	case probePointer:
		return *(*unsafe.Pointer)(p) != nil, true
	case probeSlice:
		return len(*(*[]byte)(p)) != 0, true // every slice header has its length in the same place
	case probeMap:
		if *(*unsafe.Pointer)(p) == nil { // a map value is a pointer
			return false, true
		}
	case probe8:
		return *(*uint8)(p) != 0, true
	case probe32:
		return *(*uint32)(p) != 0, true
	case probe64:
		return *(*uint64)(p) != 0, true
	}
	return false, false
}

func newGoLayout(mi *messageInfo, t reflect.Type) *goLayout {
	gl := &goLayout{typ: t}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return gl
	}
	st := t.Elem()
	if st.NumField() == 0 || st.Field(0).Name != "state" || !strings.HasPrefix(st.Field(0).Tag.Get("protogen"), "open.") {
		return gl
	}
	fields := make([]goField, len(mi.fields))
	for i := range st.NumField() {
		sf := st.Field(i)
		if !sf.IsExported() {
			continue
		}
		parts := strings.SplitN(sf.Tag.Get("protobuf"), ",", 3)
		if len(parts) < 2 {
			continue
		}
		num, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		fd := mi.desc.Fields().ByNumber(protoreflect.FieldNumber(num))
		if fd == nil {
			continue
		}
		fi := mi.fields[fd.Index()]
		gf := goField{offset: sf.Offset}
		gf.fast = fi.fast != fastNone && sf.Type == goTypeOf[fi.fast]
		if probe, kind := probeKindOf(fd); probe != probeNone && sf.Type.Kind() == kind {
			gf.probe = probe
		}
		fields[fd.Index()] = gf
	}
	gl.fields = fields
	return gl
}
