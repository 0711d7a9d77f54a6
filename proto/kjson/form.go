package kjson

import "google.golang.org/protobuf/reflect/protoreflect"

// Form is the JSON form this codec gives a message: an object of its fields, or one of the special forms below. It
// lets other packages describe the JSON (an OpenAPI schema, say) without repeating the codec's rules.
type Form uint8

// The JSON forms of messages.
const (
	FormObject       Form = iota // an object of the message's fields, by JSON name
	FormTimestamp                // an RFC 3339 string (google.protobuf.Timestamp)
	FormRawExtension             // any JSON value, embedded as is (trellis.meta.v1.RawExtension)
	FormIntOrString              // a number or a string (trellis.meta.v1.IntOrString)
	FormStruct                   // any JSON object (google.protobuf.Struct)
	FormValue                    // any JSON value (google.protobuf.Value)
	FormListValue                // any JSON array (google.protobuf.ListValue)
	FormUnsupported              // a well-known type this codec refuses
)

// FormOf returns the JSON form of messages of md.
func FormOf(md protoreflect.MessageDescriptor) Form {
	switch getMessageInfo(md).special {
	case specialTimestamp:
		return FormTimestamp
	case specialRawExtension:
		return FormRawExtension
	case specialIntOrString:
		return FormIntOrString
	case specialStruct:
		return FormStruct
	case specialValue:
		return FormValue
	case specialListValue:
		return FormListValue
	case specialUnsupported:
		return FormUnsupported
	}
	return FormObject
}

// IsQuantity reports whether the string field fd (or the values of the map or list fd) holds Kubernetes quantities:
// it is marked [(trellis.meta.v1.quantity) = true], so the codec accepts JSON numbers for it and checks the text.
func IsQuantity(fd protoreflect.FieldDescriptor) bool {
	elem := fd
	if fd.IsMap() {
		elem = fd.MapValue()
	}
	return elem.Kind() == protoreflect.StringKind && quantityOption(fd)
}
