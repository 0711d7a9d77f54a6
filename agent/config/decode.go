package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/proto/kjson"
)

// maxFileSize bounds configuration files; a real one is a few KiB.
const maxFileSize = 4 << 20

// Load reads the configuration file at path, decodes it strictly, applies defaults and validates it.
func Load(path string) (*AgentConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Decode reads a configuration (YAML or JSON) strictly: unknown fields, duplicate keys, type mismatches and a wrong
// apiVersion or kind are errors; errors about a field are *kjson.FieldError with its path. Defaults are not applied.
func Decode(data []byte) (*AgentConfiguration, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("configuration is larger than %d bytes", maxFileSize)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	c := &AgentConfiguration{}
	if err := json.Unmarshal(js, c, json.RejectUnknownMembers(true)); err != nil {
		return nil, fieldError(err)
	}
	if c.APIVersion != APIVersion {
		return nil, &kjson.FieldError{Path: "apiVersion", Err: fmt.Errorf("want %q, got %q", APIVersion, c.APIVersion)}
	}
	if c.Kind != Kind {
		return nil, &kjson.FieldError{Path: "kind", Err: fmt.Errorf("want %q, got %q", Kind, c.Kind)}
	}
	return c, nil
}

// fieldError turns the errors of the JSON decoder, which locate a problem by JSON pointer, into *kjson.FieldError with
// a field path, the form the hub's codec reports (and that seedConfig's errors already have).
func fieldError(err error) error {
	var serr *json.SemanticError
	if errors.As(err, &serr) {
		path := pointerPath(serr.JSONPointer)
		if path == "" && serr.Err == nil {
			return fmt.Errorf("configuration must be an object, not JSON %s", kindName(serr.JSONKind))
		}
		var fe *kjson.FieldError
		switch {
		case errors.As(serr.Err, &fe): // from seedConfig's codec, relative to seedConfig
			return &kjson.FieldError{Path: joinPath(path, fe.Path), Err: fe.Err}
		case errors.Is(serr.Err, json.ErrUnknownName):
			return &kjson.FieldError{Path: path, Err: fmt.Errorf("%w %q", kjson.ErrUnknownField, serr.JSONPointer.LastToken())}
		case serr.Err != nil:
			return &kjson.FieldError{Path: path, Err: serr.Err}
		default:
			want := "value"
			if serr.GoType != nil {
				want = serr.GoType.String()
			}
			return &kjson.FieldError{Path: path, Err: fmt.Errorf("cannot decode JSON %s into %s", kindName(serr.JSONKind), want)}
		}
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		if p := pointerPath(synErr.JSONPointer); p != "" {
			return &kjson.FieldError{Path: p, Err: synErr.Err}
		}
	}
	return err
}

// pointerPath turns a JSON pointer ("/a/b/0") into a field path ("a.b[0]").
func pointerPath(p jsontext.Pointer) string {
	var sb strings.Builder
	for tok := range p.Tokens() {
		if isIndex(tok) {
			sb.WriteString("[" + tok + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(tok)
	}
	return sb.String()
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case b[0] == '[':
		return a + b
	}
	return a + "." + b
}

func isIndex(tok string) bool {
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func kindName(k jsontext.Kind) string {
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
	return "value"
}
