package kjson

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The JSON forms of google.protobuf.Timestamp, trellis.meta.v1.RawExtension, trellis.meta.v1.IntOrString and
// google.protobuf.Struct/Value/ListValue, in both directions.

// Timestamps span 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z, as google.protobuf.Timestamp defines.
const (
	minTimestamp = -62135596800
	maxTimestamp = 253402300799
)

var (
	errTimestampRange = errors.New("timestamp out of range (years 0001 to 9999)")
	errInvalidRaw     = errors.New("RawExtension does not hold a valid JSON value")
	errValueKind      = errors.New("google.protobuf.Value has no kind set")
)

func errUnsupported(md protoreflect.MessageDescriptor) error {
	return fmt.Errorf("unsupported message type %s (kjson maps Timestamp, Struct, Value and ListValue of the "+
		"well-known types)", md.FullName())
}

func errUnsupportedKind(k protoreflect.Kind) error {
	return fmt.Errorf("unsupported field kind %v", k)
}

// rawOutput is how a RawExtension is checked before it is written: valid JSON (RFC 8259, UTF-8), duplicate member
// names allowed, as encoding/json writes Kubernetes' RawExtension. Tracking the names of every object (RFC 7493) cost
// three quarters of the check and an allocation per object: 28 of 38 µs for the 8 KB fieldsV1 of a shoot's managed
// fields, at every encoding of an object that has them. The decoder still refuses duplicates (or reports them).
var rawOutput = jsontext.AllowDuplicateNames(true)

// special appends a message that has its own JSON form.
func (e *encoder) special(b []byte, mi *messageInfo, m protoreflect.Message) ([]byte, error) {
	switch mi.special {
	case specialTimestamp:
		return appendTimestamp(b, m.Get(mi.f1).Int(), m.Get(mi.f2).Int())
	case specialRawExtension:
		raw := m.Get(mi.f1).Bytes()
		if len(raw) == 0 {
			return append(b, "null"...), nil
		}
		if !jsontext.Value(raw).IsValid(rawOutput) {
			return b, errInvalidRaw
		}
		return append(b, raw...), nil
	case specialIntOrString:
		switch m.WhichOneof(mi.oneof) {
		case mi.f1:
			return strconv.AppendInt(b, m.Get(mi.f1).Int(), 10), nil
		case mi.f2:
			return appendString(b, m.Get(mi.f2).String())
		}
		return append(b, "null"...), nil
	case specialStruct:
		return e.mapObject(b, mi.fields[mi.f1.Index()], m.Get(mi.f1).Map())
	case specialListValue:
		return e.list(b, mi.fields[mi.f1.Index()], m.Get(mi.f1).List())
	case specialValue:
		switch m.WhichOneof(mi.oneof) {
		case mi.f1:
			return append(b, "null"...), nil
		case mi.f2:
			return appendFloat(b, m.Get(mi.f2).Float(), 64)
		case mi.f3:
			return appendString(b, m.Get(mi.f3).String())
		case mi.f4:
			if m.Get(mi.f4).Bool() {
				return append(b, "true"...), nil
			}
			return append(b, "false"...), nil
		case mi.f5:
			return e.message(b, mi.fields[mi.f5.Index()].message(), m.Get(mi.f5).Message())
		case mi.f6:
			return e.message(b, mi.fields[mi.f6.Index()].message(), m.Get(mi.f6).Message())
		}
		return b, errValueKind
	}
	return b, errUnsupported(mi.desc)
}

// appendTimestamp appends an RFC 3339 timestamp in UTC, with fractional seconds (trailing zeros trimmed) only when
// nanos is not zero.
func appendTimestamp(b []byte, secs, nanos int64) ([]byte, error) {
	if secs < minTimestamp || secs > maxTimestamp {
		return b, errTimestampRange
	}
	if nanos < 0 || nanos >= 1e9 {
		return b, errors.New("timestamp nanos out of range")
	}
	b = append(b, '"')
	b = time.Unix(secs, nanos).UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// special reads a message that has its own JSON form; k is the kind of the next token. A null for a field has been
// handled by the caller (except for Value, where null is a value).
func (d *decoder) special(mi *messageInfo, m protoreflect.Message, k byte) error {
	switch mi.special {
	case specialTimestamp:
		if k != '"' {
			return d.typeError("an RFC 3339 timestamp string", k)
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		secs, nanos, err := parseTimestamp(d.unquote(raw))
		if err != nil {
			return d.fail(err)
		}
		m.Set(mi.f1, protoreflect.ValueOfInt64(secs))
		if nanos != 0 {
			m.Set(mi.f2, protoreflect.ValueOfInt32(nanos))
		}
		return nil
	case specialRawExtension:
		raw, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		if err := d.checkDuplicates(raw); err != nil {
			return err
		}
		m.Set(mi.f1, protoreflect.ValueOfBytes(compactJSON(raw)))
		return nil
	case specialIntOrString:
		switch k {
		case '0':
			raw, err := d.dec.ReadValue()
			if err != nil {
				return d.syntaxError(err)
			}
			n, err := parseInt(raw, 32)
			if err != nil {
				return d.numberError(raw, err, "int32")
			}
			m.Set(mi.f1, protoreflect.ValueOfInt32(int32(n)))
			return nil
		case '"':
			raw, err := d.dec.ReadValue()
			if err != nil {
				return d.syntaxError(err)
			}
			m.Set(mi.f2, protoreflect.ValueOfString(string(d.unquote(raw))))
			return nil
		}
		return d.typeError("a number or a string", k)
	case specialStruct:
		return d.mapObject(mi.fields[mi.f1.Index()], m, k)
	case specialListValue:
		return d.list(mi.fields[mi.f1.Index()], m, k)
	case specialValue:
		switch k {
		case 'n':
			if _, err := d.dec.ReadValue(); err != nil {
				return d.syntaxError(err)
			}
			m.Set(mi.f1, protoreflect.ValueOfEnum(0))
			return nil
		case 't', 'f':
			if _, err := d.dec.ReadValue(); err != nil {
				return d.syntaxError(err)
			}
			m.Set(mi.f4, protoreflect.ValueOfBool(k == 't'))
			return nil
		case '0':
			raw, err := d.dec.ReadValue()
			if err != nil {
				return d.syntaxError(err)
			}
			f, err := parseFloat(raw, 64)
			if err != nil {
				return d.numberError(raw, err, "double")
			}
			m.Set(mi.f2, protoreflect.ValueOfFloat64(f))
			return nil
		case '"':
			raw, err := d.dec.ReadValue()
			if err != nil {
				return d.syntaxError(err)
			}
			m.Set(mi.f3, protoreflect.ValueOfString(string(d.unquote(raw))))
			return nil
		case '{':
			return d.message(mi.fields[mi.f5.Index()].message(), m.Mutable(mi.f5).Message(), k)
		case '[':
			return d.message(mi.fields[mi.f6.Index()].message(), m.Mutable(mi.f6).Message(), k)
		}
		return d.typeError("a JSON value", k)
	}
	return d.fail(errUnsupported(mi.desc))
}

// compactJSON copies a valid JSON value without the whitespace between tokens.
func compactJSON(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	inString := false
	start := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			out = append(out, raw[start:i]...)
			start = i + 1
		}
	}
	return append(out, raw[start:]...)
}

// parseTimestamp reads an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)), as time.Parse with
// time.RFC3339 accepts it, without allocating.
func parseTimestamp(s []byte) (secs int64, nanos int32, err error) {
	bad := func() (int64, int32, error) {
		return 0, 0, fmt.Errorf("invalid RFC 3339 timestamp %q", s)
	}
	num := func(p []byte) (int, bool) {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return bad()
	}
	year, ok1 := num(s[0:4])
	month, ok2 := num(s[5:7])
	day, ok3 := num(s[8:10])
	hour, ok4 := num(s[11:13])
	minute, ok5 := num(s[14:16])
	second, ok6 := num(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return bad()
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || second > 59 {
		return bad()
	}
	rest := s[19:]
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		scale := int32(1e8)
		for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
			nanos += int32(rest[i]-'0') * scale // digits past nanoseconds are truncated, as time.Parse does
			scale /= 10
		}
		if i == 1 {
			return bad()
		}
		rest = rest[i:]
	}
	var offset int64
	switch {
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := num(rest[1:3])
		om, ok2 := num(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return bad()
		}
		offset = int64(oh*3600 + om*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return bad()
	}
	secs = time.Date(year, time.Month(month), day, hour, minute, second, 0, time.UTC).Unix() - offset
	if secs < minTimestamp || secs > maxTimestamp {
		return 0, 0, errTimestampRange
	}
	return secs, nanos, nil
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
