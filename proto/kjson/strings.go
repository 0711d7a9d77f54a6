package kjson

import (
	"encoding/base64"
	"errors"
	"math/bits"
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

// special8 has the high bit set in the lowest byte of x that is a control character, '"', '\\' or not ASCII (higher
// bytes may be flagged spuriously by borrows, never lower ones), and is zero when there is none.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((x - 0x20*ones) | ((x ^ '"'*ones) - ones) | ((x ^ '\\'*ones) - ones) | x) & highs
}

// appendString appends s as a JSON string, escaped as encoding/json escapes with HTML escaping off: \" \\ \b \f \n
// \r \t, other control characters as \u00XX, and U+2028/U+2029 as \u2028/\u2029. Invalid UTF-8 is an error.
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip 8 bytes at a time while none needs a look: no control character, '"', '\\' or non-ASCII byte.
		for i+8 <= len(s) {
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if t := special8(x); t != 0 {
				i += bits.TrailingZeros64(t) / 8
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
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
