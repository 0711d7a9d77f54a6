package kjson

import (
	"encoding/base64"
	"errors"
	"unicode/utf8"
)

var errInvalidUTF8 = errors.New("string is not valid UTF-8")

const hexDigits = "0123456789abcdef"

// plainASCII[c] is true for the ASCII bytes a JSON string holds as they are.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string, escaped as encoding/json escapes with HTML escaping off: \" \\ \b \f \n
// \r \t, other control characters as \u00XX, and U+2028/U+2029 as \u2028/\u2029. Invalid UTF-8 is an error.
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return b, errInvalidUTF8
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

// appendBase64 appends data as a JSON string in standard, padded base64.
func appendBase64(b []byte, data []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, '"')
}

// decodeBase64 reads standard base64, padded or not.
func decodeBase64(s []byte) ([]byte, error) {
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	out, err := enc.AppendDecode(make([]byte, 0, enc.DecodedLen(len(s))), s)
	if err != nil {
		return nil, errors.New("invalid base64")
	}
	return out, nil
}
