package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	yamlv2 "go.yaml.in/yaml/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// MIME types the gateway reads and writes.
const (
	MIMEJSON = "application/json"
	MIMEYAML = "application/yaml"
	// mimeJSONLenient and mimeYAMLLenient are set by the middleware for ?fieldValidation=Ignore|Warn: the same JSON
	// or YAML, unknown fields dropped (and, for Warn, named in Warning headers: warningBody).
	mimeJSONLenient = "application/x-trellis-json-lenient"
	mimeYAMLLenient = "application/x-trellis-yaml-lenient"
)

// Marshaler is grpc-gateway's codec for Kubernetes JSON (or YAML). Watches do not pass through it: package api serves
// them as Kubernetes watch lines (see AppendWatchError for their errors).
type Marshaler struct {
	// Lenient drops unknown fields instead of failing.
	Lenient bool
	// YAML writes YAML instead of JSON.
	YAML bool
	// ReadYAML reads YAML (or JSON) and writes JSON: server-side apply's patches.
	ReadYAML bool
	// ObjectJSON, when set, returns the memoized JSON of an object served from the hub's cache (false for other
	// messages); lists and gets are then assembled from it instead of being encoded anew.
	ObjectJSON func(m proto.Message) ([]byte, bool)
	// ObjectDeflated, when set, returns the Segment of ObjectJSON's JSON of an object after before (NextSegment),
	// memoized with the JSON (false when ObjectJSON has none): gzipped answers are joined from them instead of being
	// compressed anew.
	ObjectDeflated func(m proto.Message, before Before) (*Segment, bool)
}

var _ runtime.Marshaler = (*Marshaler)(nil)

// ContentType implements runtime.Marshaler.
func (m *Marshaler) ContentType(any) string {
	if m.YAML {
		return MIMEYAML
	}
	return MIMEJSON
}

// Marshal implements runtime.Marshaler.
func (m *Marshaler) Marshal(v any) ([]byte, error) {
	b, err := m.marshalJSON(v)
	if err != nil || !m.YAML {
		return b, err
	}
	return yaml.JSONToYAML(b)
}

func (m *Marshaler) marshalJSON(v any) ([]byte, error) {
	if c, ok := v.(*writable); ok {
		switch {
		case m.YAML:
			return m.marshalJSON(c.msg) // YAML is compressed as it is written, if large enough
		case c.gz != nil:
			return m.marshalCompressible(c)
		}
		return m.marshalPlain(c)
	}
	x, ok := v.(proto.Message)
	if !ok {
		return json.Marshal(v)
	}
	if b, ok := m.objectJSON(x); ok {
		return b, nil
	}
	if isList(x) {
		return m.marshalList(x)
	}
	return kjson.Marshal(x)
}

// Unmarshal implements runtime.Marshaler.
func (m *Marshaler) Unmarshal(data []byte, v any) error { return m.unmarshal(data, v, nil) }

// unmarshal is Unmarshal that, when Lenient, calls warn (when not nil) with kube-apiserver's warning for each field
// it drops and each member an object repeats.
func (m *Marshaler) unmarshal(data []byte, v any, warn func(text string)) error {
	msg, ok := v.(proto.Message)
	if !ok {
		// grpc-gateway decodes a body mapped to a message field through a pointer to that (nil) field.
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Pointer && rv.Elem().Type().Implements(protoMessageType) {
			if rv.Elem().IsNil() {
				rv.Elem().Set(reflect.New(rv.Elem().Type().Elem()))
			}
			return m.unmarshal(data, rv.Elem().Interface(), warn)
		}
		return json.Unmarshal(data, v)
	}
	if m.YAML || m.ReadYAML {
		j, err := yamlToJSON(data, m.Lenient, warn)
		if err != nil {
			return err
		}
		data = j
	}
	if raw, ok := msg.(*metav1.RawExtension); ok {
		// A patch document: any JSON value, kept as sent.
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		raw.Raw = buf.Bytes()
		return nil
	}
	return LenientDecoding(m.Lenient, warn).Unmarshal(data, msg)
}

// LenientDecoding is how an object is read for ?fieldValidation=Ignore or Warn (lenient), as kube-apiserver reads it:
// unknown fields dropped, repeated members accepted (the last value wins, repeated objects merge), and for Warn each
// named by warn (not nil) in kube-apiserver's words. Not lenient (Strict), both are errors.
func LenientDecoding(lenient bool, warn func(text string)) kjson.UnmarshalOptions {
	if !lenient {
		return kjson.UnmarshalOptions{}
	}
	o := kjson.UnmarshalOptions{DiscardUnknown: true, OnDuplicate: func(string) {}}
	if warn != nil {
		o.OnUnknown = func(path string) { warn(UnknownFieldWarning(path)) }
		o.OnDuplicate = func(path string) { warn(DuplicateFieldWarning(path)) }
	}
	return o
}

// yamlToJSON converts a YAML body as kube-apiserver reads one: a key that a mapping repeats is refused (Strict), or
// its last value wins (lenient) and, for Warn, warn gets kube-apiserver's warning for each ("line 7: key "x" already
// set in map").
func yamlToJSON(data []byte, lenient bool, warn func(text string)) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err == nil {
		return j, nil
	}
	var te *yamlv2.TypeError
	if !lenient || !errors.As(err, &te) {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if warn != nil {
		for _, e := range te.Errors {
			warn(e)
		}
	}
	if j, err = yaml.YAMLToJSON(data); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	return j, nil
}

var protoMessageType = reflect.TypeFor[proto.Message]()

// NewDecoder implements runtime.Marshaler.
func (m *Marshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
		if err != nil {
			return err
		}
		if len(data) > maxBody {
			return fmt.Errorf("request body larger than %d bytes", maxBody)
		}
		var warn func(string)
		if wb, ok := r.(*warningBody); ok {
			warn = func(text string) { addWarning(wb.header, text) }
		}
		return m.unmarshal(data, v, warn)
	})
}

// NewEncoder implements runtime.Marshaler.
func (m *Marshaler) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}

// maxBody bounds request bodies (Kubernetes' limit is 3 MiB per object; ShootStates and charts can be larger).
const maxBody = 8 << 20

// isList reports whether m is a <Kind>List: apiVersion, kind, metadata and repeated items.
func isList(m proto.Message) bool {
	d := m.ProtoReflect().Descriptor()
	items := d.Fields().ByName("items")
	return items != nil && items.IsList() && items.Kind() == protoreflect.MessageKind &&
		d.Fields().ByName("metadata") != nil && strings.HasSuffix(string(d.Name()), "List")
}

// marshalList writes a list as Kubernetes does (items always present, [] when empty), with each item's JSON taken
// from ObjectJSON when it has it.
func (m *Marshaler) marshalList(list proto.Message) ([]byte, error) {
	pieces, size, err := m.listPieces(list)
	if err != nil {
		return nil, err
	}
	return joinPieces(pieces, size), nil
}

// piece is a part of an answer's JSON: an object's (obj set; after a comma if comma), or the glue of a list.
type piece struct {
	data  []byte
	obj   proto.Message
	comma bool
}

func joinPieces(pieces []piece, size int) []byte {
	out := make([]byte, 0, size)
	for _, p := range pieces {
		if p.comma {
			out = append(out, ',')
		}
		out = append(out, p.data...)
	}
	return out
}

// ListWriter is a ResponseWriter that takes a JSON list answer as it is made, not joined: the gateway hands a GET's
// list to WriteListJSON instead of writing it, with head, the JSON object of the list's members but items, and each
// item's JSON, which may be the cache's memoized encodings: the writer must neither change nor keep them beyond
// answering. An item's bytes never change for as long as they live (a memoized encoding is replaced, not rewritten;
// any other is made for this answer), so a writer may memoize what it reads of an item by the item's allocation
// without holding it (weak.Pointer), as the hub's Table handler does (hub/table, which reads lists this way).
type ListWriter interface {
	http.ResponseWriter
	WriteListJSON(head []byte, items [][]byte)
}

// listPieces returns a list's JSON in pieces, and their total size: the head, each item, and the end.
func (m *Marshaler) listPieces(list proto.Message) ([]piece, int, error) {
	hb, items, err := m.listParts(list)
	if err != nil {
		return nil, 0, err
	}
	open := hb[: len(hb)-1 : len(hb)-1]
	if len(hb) > 2 {
		open = append(open, ',')
	}
	open = append(open, `"items":[`...)
	pieces := make([]piece, 0, len(items)+2)
	pieces = append(pieces, piece{data: open})
	size := len(open) + len(listEnd)
	for i, it := range items {
		it.comma = i > 0
		pieces = append(pieces, it)
		size += len(it.data)
		if i > 0 {
			size++
		}
	}
	return append(pieces, piece{data: listEnd}), size, nil
}

// listParts returns the JSON of a list's members but items, as an object, and its items' pieces (memoized JSON
// where the cache has it).
func (m *Marshaler) listParts(list proto.Message) ([]byte, []piece, error) {
	src := list.ProtoReflect()
	itemsField := src.Descriptor().Fields().ByName("items")
	head := src.Type().New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd != itemsField {
			head.Set(fd, v)
		}
		return true
	})
	hb, err := kjson.Marshal(head.Interface())
	if err != nil {
		return nil, nil, err
	}
	items := src.Get(itemsField).List()
	pieces := make([]piece, 0, items.Len())
	for i := range items.Len() {
		item := items.Get(i).Message().Interface()
		b, ok := m.objectJSON(item)
		if !ok {
			if b, err = kjson.Marshal(item); err != nil {
				return nil, nil, err
			}
		}
		pieces = append(pieces, piece{data: b, obj: item})
	}
	return hb, pieces, nil
}

var listEnd = []byte("]}")

// writable is an answer that the marshaler may write itself as it joins it, the rest returned by Marshal going out
// after it: through gz, Compress's writer, for a client that takes gzip (the forward response rewriter hands it to
// the marshaler), else through plain, the answer's writer.
type writable struct {
	msg   proto.Message
	gz    *compressWriter
	plain io.Writer
}

// marshalPlain writes c's message as JSON: a list of at least CompressThreshold bytes a chunk at a time as it is
// joined from its items' memoized JSON, so that answering it never holds a copy of the whole list (a list of 2,000
// shoots is 31 MB) and the client reads the first items while the hub joins the rest; anything else as one piece.
func (m *Marshaler) marshalPlain(c *writable) ([]byte, error) {
	if _, ok := m.objectJSON(c.msg); ok || !isList(c.msg) {
		return m.marshalJSON(c.msg)
	}
	if lw, ok := c.plain.(ListWriter); ok {
		head, items, err := m.listParts(c.msg)
		if err != nil {
			return nil, err
		}
		jsons := make([][]byte, len(items))
		for i, it := range items {
			jsons[i] = it.data
		}
		lw.WriteListJSON(head, jsons)
		return nil, nil
	}
	pieces, size, err := m.listPieces(c.msg)
	if err != nil {
		return nil, err
	}
	if size < CompressThreshold {
		return joinPieces(pieces, size), nil
	}
	out := make([]byte, 0, 2*streamChunk)
	for _, p := range pieces {
		if p.comma {
			out = append(out, ',')
		}
		out = append(out, p.data...)
		if len(out) >= streamChunk {
			if _, err := c.plain.Write(out); err != nil {
				return nil, nil //nolint:nilerr // the answer has begun: nothing more can reach the client
			}
			out = out[:0]
		}
	}
	return out, nil // the rest, written by the caller
}

// marshalCompressible writes c's message as JSON, gzipped when it reaches CompressThreshold: the objects' memoized
// deflate segments (ObjectDeflated, else compressed here) and the glue stored, joined into one gzip member, which it
// writes to c's writer as it goes and returns the end of.
func (m *Marshaler) marshalCompressible(c *writable) ([]byte, error) {
	var pieces []piece
	size := 0
	if b, ok := m.objectJSON(c.msg); ok {
		pieces, size = []piece{{data: b, obj: c.msg}}, len(b)
	} else if isList(c.msg) {
		var err error
		if pieces, size, err = m.listPieces(c.msg); err != nil {
			return nil, err
		}
	} else {
		return kjson.Marshal(c.msg) // not from the cache: compressed as it is written, if large enough
	}
	if size < CompressThreshold || size < smallItems*len(pieces) {
		// Small, or of small items, whose segments' own overhead (a block header and the sync flush, 10 to 20
		// bytes each) would outweigh what they save: Compress gzips it as one stream as it is written.
		return joinPieces(pieces, size), nil
	}
	// The member goes out as it is joined, a chunk at a time: the client inflates the first items while the hub joins
	// the rest. Nothing after the first chunk can fail but the connection, and then the client is gone.
	c.gz.precompressed()
	j := gzipJoiner{out: make([]byte, 0, 2*streamChunk)}
	j.begin()
	var before Before // the piece before: an object's JSON is held (memoized, or made for this answer)
	for _, p := range pieces {
		before.Comma = p.comma
		part := gzipPart{comma: p.comma, data: p.data}
		if p.obj != nil {
			seg, ok := (*Segment)(nil), false
			if m.ObjectDeflated != nil {
				seg, ok = m.ObjectDeflated(p.obj, before)
			}
			if !ok {
				seg = NextSegment(nil, p.data, before)
			}
			part.seg = seg
		}
		j.add(part)
		if len(j.out) >= streamChunk {
			if _, err := c.gz.Write(j.out); err != nil {
				return nil, nil //nolint:nilerr // the answer has begun: nothing more can reach the client
			}
			j.out = j.out[:0]
		}
		before.Dict, before.Held = p.data, p.obj != nil
	}
	j.end()
	return j.out, nil // the rest, written by the caller
}

// streamChunk is about how much of a gzipped answer joined from segments the marshaler writes at a time.
const streamChunk = 32 << 10

// smallItems is the mean size of a list's items below which it is gzipped as one stream, not joined from segments.
const smallItems = 1 << 10

func (m *Marshaler) objectJSON(x proto.Message) ([]byte, bool) {
	if m.ObjectJSON == nil {
		return nil, false
	}
	return m.ObjectJSON(x)
}
