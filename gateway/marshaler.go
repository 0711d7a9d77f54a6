package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/gateway/kjson"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// MIME types the gateway reads and writes.
const (
	MIMEJSON = "application/json"
	MIMEYAML = "application/yaml"
	// mimeJSONLenient is set by the middleware for ?fieldValidation=Ignore|Warn: same JSON, unknown fields dropped.
	mimeJSONLenient = "application/x-trellis-json-lenient"
)

// Marshaler is grpc-gateway's codec for Kubernetes JSON (or YAML). Watch streams are written as Kubernetes watch
// events, one JSON object per line, instead of grpc-gateway's {"result": ...} wrapping.
type Marshaler struct {
	// Lenient drops unknown fields instead of failing.
	Lenient bool
	// YAML writes YAML instead of JSON.
	YAML bool
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
	switch x := v.(type) {
	case proto.Message:
		return kjson.Marshal(x)
	case map[string]any:
		// grpc-gateway wraps each streamed message as {"result": msg}; a watch event is written as itself.
		if r, ok := x["result"]; ok && len(x) == 1 {
			return m.marshalJSON(r)
		}
		if e, ok := x["error"]; ok && len(x) == 1 {
			return m.marshalStreamError(e)
		}
	case map[string]proto.Message:
		if e, ok := x["error"]; ok && len(x) == 1 {
			return m.marshalStreamError(e)
		}
		if r, ok := x["result"]; ok && len(x) == 1 {
			return kjson.Marshal(r)
		}
	}
	return json.Marshal(v)
}

// marshalStreamError writes an error inside a watch stream the way Kubernetes does: {"type":"ERROR","object":Status}.
func (m *Marshaler) marshalStreamError(e any) ([]byte, error) {
	var st *metav1.Status
	switch x := e.(type) {
	case *spb.Status:
		st = StatusOf(status.FromProto(x).Err())
	case *metav1.Status:
		st = x
	default:
		st = StatusOf(fmt.Errorf("%v", e))
	}
	obj, err := kjson.Marshal(st)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`{"type":"ERROR","object":`), obj...), '}'), nil
}

// Unmarshal implements runtime.Marshaler.
func (m *Marshaler) Unmarshal(data []byte, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		// grpc-gateway decodes a body mapped to a message field through a pointer to that (nil) field.
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Pointer && rv.Elem().Type().Implements(protoMessageType) {
			if rv.Elem().IsNil() {
				rv.Elem().Set(reflect.New(rv.Elem().Type().Elem()))
			}
			return m.Unmarshal(data, rv.Elem().Interface())
		}
		return json.Unmarshal(data, v)
	}
	if m.YAML {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
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
	return kjson.UnmarshalOptions{DiscardUnknown: m.Lenient}.Unmarshal(data, msg)
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
		return m.Unmarshal(data, v)
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

// Delimiter implements runtime.Delimited: one watch event per line.
func (m *Marshaler) Delimiter() []byte { return []byte("\n") }

// maxBody bounds request bodies (Kubernetes' limit is 3 MiB per object; ShootStates and charts can be larger).
const maxBody = 8 << 20
