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

// goLayout maps the fast fields of one message descriptor to the struct fields of one generated Go type.
type goLayout struct {
	typ    reflect.Type // the pointer type, as reflect.TypeOf(m.Interface()) gives it
	fast   bool         // whether any field has a fast path
	offset []uintptr    // by protobuf field index: the Go field's offset in the struct, valid where the fieldInfo has fast
	ok     []bool       // by protobuf field index: whether the Go field was found with the expected type
}

// layout returns the goLayout of m's Go type and a pointer to m's struct, or nil when m has no fast fields (or is not
// an open-struct generated message). It caches the last Go type seen.
func (mi *messageInfo) layout(m protoreflect.Message) (*goLayout, unsafe.Pointer) {
	if !mi.hasFast {
		return nil, nil
	}
	msg := m.Interface()
	t := reflect.TypeOf(msg)
	gl := mi.goLayout.Load()
	if gl == nil || gl.typ != t {
		gl = newGoLayout(mi, t)
		mi.goLayout.Store(gl)
	}
	if !gl.fast {
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
	if gl == nil || !gl.ok[fi.index] {
		return nil
	}
	return unsafe.Add(base, gl.offset[fi.index])
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
	gl.offset = make([]uintptr, len(mi.fields))
	gl.ok = make([]bool, len(mi.fields))
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
		if fi := mi.fields[fd.Index()]; fi.fast != fastNone && sf.Type == goTypeOf[fi.fast] {
			gl.offset[fd.Index()] = sf.Offset
			gl.ok[fd.Index()] = true
			gl.fast = true
		}
	}
	return gl
}
