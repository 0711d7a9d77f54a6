package openapi

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/trellis-dev/trellis/proto/kjson"
)

// schemas collects the definitions of the messages a document refers to, named by their proto full names.
type schemas struct {
	defs spec.Definitions
}

func newSchemas() *schemas { return &schemas{defs: spec.Definitions{}} }

// definitionRef is the JSON reference of the definition of md.
func definitionRef(md protoreflect.MessageDescriptor) string {
	return "#/definitions/" + string(md.FullName())
}

// message returns the schema of a value of message md: a reference to its definition for objects, an inline schema
// for the messages kjson writes in a special form.
func (s *schemas) message(md protoreflect.MessageDescriptor) spec.Schema {
	switch kjson.FormOf(md) {
	case kjson.FormTimestamp:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: "date-time"}}
	case kjson.FormRawExtension, kjson.FormValue:
		// Any JSON value, as Kubernetes describes RawExtension and JSON: no type, unknown fields preserved.
		return spec.Schema{VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
			"x-kubernetes-preserve-unknown-fields": true}}}
	case kjson.FormStruct:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}}
	case kjson.FormListValue:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}}}}}
	case kjson.FormIntOrString:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: "int-or-string"},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-int-or-string": true}}}
	}
	name := string(md.FullName())
	if _, ok := s.defs[name]; !ok {
		s.defs[name] = spec.Schema{} // reserve the name first: messages may refer to themselves
		s.defs[name] = s.object(md)
	}
	return *spec.RefSchema(definitionRef(md))
}

// object is the definition of a message written as an object of its fields.
func (s *schemas) object(md protoreflect.MessageDescriptor) spec.Schema {
	out := spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        spec.StringOrArray{"object"},
		Description: comment(md),
		Properties:  map[string]spec.Schema{},
	}}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		out.Properties[fd.JSONName()] = s.field(fd)
	}
	return out
}

// field is the schema of one field: its value, a list of values or a map of values.
func (s *schemas) field(fd protoreflect.FieldDescriptor) spec.Schema {
	quantity := kjson.IsQuantity(fd)
	var out spec.Schema
	switch {
	case fd.IsMap():
		v := s.value(fd.MapValue(), quantity)
		out = spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &v}}}
	case fd.IsList():
		v := s.value(fd, quantity)
		out = spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"array"}, Items: &spec.SchemaOrArray{Schema: &v}}}
		setListType(&out, fd)
	default:
		out = s.value(fd, quantity)
	}
	// Beside a $ref too, as kube-apiserver's v2 document has it; the v3 conversion wraps such a reference in allOf.
	out.Description = comment(fd)
	return out
}

// value is the schema of a single value of fd's type (the element of a list, the value of a map).
func (s *schemas) value(fd protoreflect.FieldDescriptor, quantity bool) spec.Schema {
	typ := func(t, format string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{t}, Format: format}}
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return typ("boolean", "")
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return typ("integer", "int32")
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		// kjson writes every integer as a JSON number, 64-bit ones included (unlike protojson).
		return typ("integer", "int64")
	case protoreflect.FloatKind:
		return typ("number", "float")
	case protoreflect.DoubleKind:
		return typ("number", "double")
	case protoreflect.StringKind:
		if quantity {
			// resource.Quantity: a string such as "20Gi"; kjson also accepts a JSON number, as Kubernetes does.
			return typ("string", "quantity")
		}
		return typ("string", "")
	case protoreflect.BytesKind:
		return typ("string", "byte")
	case protoreflect.EnumKind:
		out := typ("string", "")
		vals := fd.Enum().Values()
		for i := range vals.Len() {
			out.Enum = append(out.Enum, string(vals.Get(i).Name()))
		}
		return out
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return s.message(fd.Message())
	}
	return spec.Schema{}
}

// comment is the leading comment of a descriptor in its .proto file, with the comment markers' leading spaces and
// blank edges removed; "" when the descriptor carries no source information.
func comment(d protoreflect.Descriptor) string {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	lines := strings.Split(strings.TrimSpace(loc.LeadingComments), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
