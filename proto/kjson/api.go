package kjson

import (
	"bytes"
	"errors"
	"sync"

	"google.golang.org/protobuf/proto"
)

var errNilMessage = errors.New("kjson: nil message")

// bufPool holds the output buffers of Marshal, which copies the result out at its exact size.
var bufPool sync.Pool

// Marshal writes m as Kubernetes JSON (compact, fields in declaration order, map keys sorted).
func Marshal(m proto.Message) ([]byte, error) {
	p, _ := bufPool.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	buf, err := AppendMarshal((*p)[:0], m)
	var out []byte
	if err == nil {
		out = bytes.Clone(buf)
	}
	if cap(buf) <= 1<<20 { // do not keep huge buffers alive
		*p = buf
		bufPool.Put(p)
	}
	return out, err
}

// AppendMarshal appends the JSON of m to b. On error it returns b unchanged.
func AppendMarshal(b []byte, m proto.Message) ([]byte, error) {
	if m == nil {
		return b, errNilMessage
	}
	mr := m.ProtoReflect()
	if !mr.IsValid() {
		return append(b, "null"...), nil // a typed nil message
	}
	e := encoderPool.Get().(*encoder)
	out, err := e.message(b, getMessageInfo(mr.Descriptor()), mr)
	encoderPool.Put(e)
	if err != nil {
		return b, err
	}
	return out, nil
}

// Unmarshal reads Kubernetes JSON into m, strictly: unknown fields are errors. m is reset first.
func Unmarshal(data []byte, m proto.Message) error {
	return UnmarshalOptions{}.Unmarshal(data, m)
}

// UnmarshalOptions tune decoding.
type UnmarshalOptions struct {
	// DiscardUnknown ignores unknown fields instead of failing.
	DiscardUnknown bool
	// OnUnknown, when set with DiscardUnknown, is called with the path of each unknown field (for warnings).
	OnUnknown func(path string)
	// OnDuplicate, when set, accepts a member that an object repeats, as kube-apiserver's decoder does unless its
	// fieldValidation is Strict, and is called with its path in kube-apiserver's form ("data", "metadata.labels.x"):
	// a repeated object (a message, a map) is read into what its first occurrence set, a repeated array or value
	// replaces it, null clears it, a repeated map key's value replaces the first, and a repeated unknown field is
	// skipped. Unset, a repeated member is an error.
	OnDuplicate func(path string)
}

// Unmarshal reads Kubernetes JSON into m, which is reset first. Errors below the top level are *FieldError.
func (o UnmarshalOptions) Unmarshal(data []byte, m proto.Message) error {
	if m == nil {
		return errNilMessage
	}
	mr := m.ProtoReflect()
	if !mr.IsValid() {
		return errNilMessage
	}
	proto.Reset(m)
	d := getDecoder(data, o)
	err := d.top(mr)
	putDecoder(d)
	return err
}
