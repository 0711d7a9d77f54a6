// Package kjson is Trellis' JSON codec: it writes and reads protobuf messages as Kubernetes/Gardener JSON, so the REST
// gateway and the CLI serve exactly the JSON that Gardener's own API server would.
//
// It owns the JSON mapping of every Trellis message (docs/proto-conventions.md says how protos are written for it):
//
//   - Field names are the descriptor's JSON name (json_name); only that name is accepted on input.
//   - Output follows Kubernetes' omitempty: non-optional scalars at their zero value, empty lists and empty maps are
//     left out; optional scalars are written whenever set (even 0, false or ""), message fields whenever set (an
//     empty message prints {}). Fields are written in declaration order, map keys sorted as encoding/json sorts them.
//   - Integers of every width and floats are JSON numbers (64-bit integers are not quoted, unlike protojson); quoted
//     64-bit integers are accepted on input, and so are integral numbers such as 1.0 or 1e3 for integer fields.
//     NaN and infinities are errors. Strings must be valid UTF-8 and are escaped as encoding/json escapes them with
//     HTML escaping off.
//   - bytes are standard base64 (padded on output; padded or not on input); enums are their value names.
//   - Kubernetes quantities (resource.Quantity, the values of corev1.ResourceList) are strings in the protos; the
//     fields are marked [(trellis.meta.v1.quantity) = true] (proto/trellis/meta/v1/options.proto; on a map or
//     repeated field the mark applies to its values). As Kubernetes does, such a field accepts a JSON number as well
//     as a string and keeps the number's literal text (2 is "2", 1e3 is "1e3"); the text, without surrounding
//     whitespace, must parse with resource.ParseQuantity, or decoding fails with a *FieldError at the field. It is
//     kept as written, not canonicalized, and always written as a string. null inside a map or list of quantities is
//     "0", Kubernetes' zero quantity. Other string fields reject numbers.
//   - google.protobuf.Timestamp is an RFC 3339 string in UTC ("2026-05-16T13:04:16Z", fractional seconds only when
//     non-zero); trellis.meta.v1.RawExtension is the embedded JSON value itself, compacted on input and written as
//     held when it is valid JSON (a value with duplicate member names, which the decoder refuses, is written as is, as
//     encoding/json writes Kubernetes' RawExtension);
//     trellis.meta.v1.IntOrString is a number or a string; google.protobuf.Struct, Value and ListValue use the
//     standard JSON mapping. Other well-known types (Any, Duration, wrappers, ...) are rejected. A RawExtension or
//     IntOrString that holds nothing is written as null, and left out where it is a field.
//   - JSON null means "unset" for a field. Inside lists and maps null is the element's zero value; a
//     google.protobuf.Value reads null as its null value, as in protojson.
//   - Unmarshal resets the message first. Decoding is strict by default: unknown fields, duplicate keys, type mismatches and trailing data are errors
//     reported as *FieldError with the field path ("spec.provider.workers[0].minimum", "metadata.labels[key]").
//
// Files: api.go (the entry points and options), encode.go and decode.go (the two directions over protoreflect),
// golayout.go (direct access to the fields of generated Go structs where protoreflect would allocate or reflect),
// wellknown.go (Timestamp, RawExtension, IntOrString, Struct/Value/ListValue), descriptors.go (the cached
// per-message field tables, including which fields are quantities), strings.go and numbers.go (string escaping,
// base64, number parsing and formatting), quantity.go (checking quantities in bounded time), errors.go (FieldError
// and field paths), yaml.go (YAML manifests).
package kjson
