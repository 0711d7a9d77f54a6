package kjson

import (
	"errors"
	"strconv"
	"strings"
)

// FieldError is a decoding (or encoding) error at a field path such as "spec.provider.workers[0].minimum". List
// elements are written as [index] and map entries as [key], e.g. "metadata.labels[app]".
type FieldError struct {
	// Path is the field path from the top-level object.
	Path string
	// Err says what is wrong at Path.
	Err error
}

// Error returns the path and the reason, e.g. `spec.provider.workerz: unknown field "workerz"`.
func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrUnknownField is the reason (via errors.Is) of the FieldError for a field the message does not have.
var ErrUnknownField = errors.New("unknown field")

// unknownFieldError names the unknown field; it unwraps to ErrUnknownField.
type unknownFieldError struct{ name string }

func (e *unknownFieldError) Error() string { return "unknown field " + strconv.Quote(e.name) }
func (e *unknownFieldError) Unwrap() error { return ErrUnknownField }

// segKind is the kind of one step of a field path.
type segKind uint8

const (
	segField segKind = iota // .name
	segIndex                // [index]
	segKey                  // [key]
)

// pathSeg is one step of a field path. The decoder keeps a stack of them and turns it into a string only when it
// reports an error or an unknown field.
type pathSeg struct {
	kind  segKind
	name  string // field name or map key
	index int
}

// appendPath writes the path of segs: fields joined by dots, list indexes and map keys in brackets
// ("metadata.labels[x]"); with dottedKeys map keys are joined by dots too, as kube-apiserver's decoding warnings
// name them ("metadata.labels.x").
func appendPath(sb *strings.Builder, segs []pathSeg, dottedKeys bool) {
	for i, s := range segs {
		switch {
		case s.kind == segField || s.kind == segKey && dottedKeys:
			if i > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(s.name)
		case s.kind == segIndex:
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(s.index))
			sb.WriteByte(']')
		default:
			sb.WriteByte('[')
			sb.WriteString(s.name)
			sb.WriteByte(']')
		}
	}
}

// kubePath is the path in the form of kube-apiserver's decoding warnings ("metadata.labels.x").
func kubePath(segs []pathSeg) string {
	var sb strings.Builder
	appendPath(&sb, segs, true)
	return sb.String()
}

func pathString(segs []pathSeg) string {
	var sb strings.Builder
	appendPath(&sb, segs, false)
	return sb.String()
}

// prependPath puts seg in front of the path of err, for errors that are built bottom-up (encoding). seg is a field
// name or an "[index]"/"[key]" step.
func prependPath(err error, seg string) error {
	if fe, ok := err.(*FieldError); ok {
		switch {
		case fe.Path == "":
			fe.Path = seg
		case fe.Path[0] == '[':
			fe.Path = seg + fe.Path
		default:
			fe.Path = seg + "." + fe.Path
		}
		return fe
	}
	return &FieldError{Path: seg, Err: err}
}

// kindName names the JSON kind of the token that starts with k (a jsontext.Kind), for type errors.
func kindName(k byte) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "invalid JSON"
}
