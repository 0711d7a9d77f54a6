package kjson

import (
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// DecodeAny reads the value dec reads next in the unstructured form: objects as map[string]any (the last of repeated
// names wins, when dec allows them), arrays as []any, strings, booleans, nil for null, and numbers as number makes
// them of their literal (apimachinery's JSON decoder: int64 or float64; encoding/json's UseNumber: json.Number).
func DecodeAny(dec *jsontext.Decoder, number func(literal string) (any, error)) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 'f', 't':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return number(tok.String())
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String() // a token is valid until the decoder's next call
			if m[k], err = DecodeAny(dec, number); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := DecodeAny(dec, number)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.ReadToken()
		return a, err
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}
