package kjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decoder holds the state of one Unmarshal call; it is pooled together with its tokenizer.
type decoder struct {
	dec     *jsontext.Decoder
	in      bytes.Buffer // wraps the input without copying it (jsontext reads a *bytes.Buffer in place)
	opts    UnmarshalOptions
	path    []pathSeg // the field path of the value being read, turned into a string only for errors
	scratch []byte    // unescaped strings
}

var decoderPool = sync.Pool{New: func() any {
	d := new(decoder)
	d.dec = jsontext.NewDecoder(&d.in)
	return d
}}

func getDecoder(data []byte, o UnmarshalOptions) *decoder {
	d := decoderPool.Get().(*decoder)
	d.in = *bytes.NewBuffer(data)
	d.dec.Reset(&d.in, allowDuplicateNames)
	d.opts = o
	return d
}

func putDecoder(d *decoder) {
	d.in = bytes.Buffer{}
	d.dec.Reset(&d.in) // drop the reference to the input
	d.opts = UnmarshalOptions{}
	clear(d.path)
	d.path = d.path[:0]
	if cap(d.scratch) > 64<<10 {
		d.scratch = nil
	}
	decoderPool.Put(d)
}

// allowDuplicateNames turns off the tokenizer's duplicate-name tracking, which costs about a sixth of decoding; the
// decoder detects duplicates itself, more cheaply: a bitset of fields per message, a lookup per map entry, and a
// validation pass over RawExtension values and skipped unknown values.
var allowDuplicateNames = jsontext.AllowDuplicateNames(true)

var (
	errUnexpectedEOF = errors.New("unexpected end of JSON input")
	errTrailingData  = errors.New("unexpected data after the top-level JSON value")
)

// top reads the whole input into m.
func (d *decoder) top(m protoreflect.Message) error {
	mi := getMessageInfo(m.Descriptor())
	k, err := d.peek()
	if err != nil {
		return err
	}
	if k == 'n' && mi.special != specialValue {
		if _, err := d.dec.ReadValue(); err != nil {
			return d.syntaxError(err)
		}
	} else if err := d.message(mi, m, k); err != nil {
		return err
	}
	switch _, err := d.dec.ReadToken(); {
	case err == io.EOF:
		return nil
	case err == nil:
		return errTrailingData
	default:
		return fmt.Errorf("%w: %w", errTrailingData, err)
	}
}

// peek returns the kind of the next token: one of n f t " 0 { } [ ].
func (d *decoder) peek() (byte, error) {
	if k := d.dec.PeekKind(); k != jsontext.KindInvalid {
		return byte(k), nil
	}
	_, err := d.dec.ReadToken() // the error PeekKind saw
	if err == nil {
		err = errUnexpectedEOF
	}
	return 0, d.syntaxError(err)
}

// fail reports err at the current path; at the top level it is returned as it is.
func (d *decoder) fail(err error) error {
	if len(d.path) == 0 {
		return err
	}
	return &FieldError{Path: pathString(d.path), Err: err}
}

func (d *decoder) typeError(want string, got byte) error {
	return d.fail(fmt.Errorf("expected %s, got %s", want, kindName(got)))
}

func (d *decoder) numberError(lit []byte, err error, typ string) error {
	switch err {
	case errNotInteger:
		return d.fail(fmt.Errorf("expected an integer, got %s", lit))
	case errRange:
		return d.fail(fmt.Errorf("%s is out of range for %s", lit, typ))
	}
	return d.fail(fmt.Errorf("invalid number %s", lit))
}

// syntaxError reports an error of the tokenizer at the current path.
func (d *decoder) syntaxError(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.fail(errUnexpectedEOF)
	}
	return d.fail(err)
}

// unquote returns the contents of a JSON string token; the result is valid until the next read or unquote.
func (d *decoder) unquote(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	d.scratch, _ = jsontext.AppendUnquote(d.scratch[:0], raw) // the tokenizer has validated the escapes
	return d.scratch
}

// message reads a JSON object (or a special form) into m; k is the kind of the next token.
func (d *decoder) message(mi *messageInfo, m protoreflect.Message, k byte) error {
	if mi.special != specialNone {
		return d.special(mi, m, k)
	}
	if k != '{' {
		return d.typeError("an object", k)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.syntaxError(err)
	}
	gl, base := mi.layout(m)
	var seenBuf [2]uint64 // the fields read so far, for duplicate detection
	seen := seenBuf[:]
	if n := (len(mi.fields) + 63) / 64; n > len(seen) {
		seen = make([]uint64, n)
	}
	var unknownSeen []string // unknown names skipped so far (DiscardUnknown)
	for {
		k, err := d.peek()
		if err != nil {
			return err
		}
		if k == '}' {
			break
		}
		name, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		fi := mi.byName[string(d.unquote(name))]
		if fi == nil {
			if err := d.unknown(name, &unknownSeen); err != nil {
				return err
			}
			continue
		}
		d.path = append(d.path, pathSeg{kind: segField, name: fi.name})
		if w, bit := fi.index>>6, uint64(1)<<(fi.index&63); seen[w]&bit == 0 {
			seen[w] |= bit
		} else if err := d.repeated(fi, m); err != nil {
			return err
		}
		if p := gl.field(base, fi); p != nil {
			err = d.fastField(fi, p)
		} else {
			err = d.field(fi, m)
		}
		if err != nil {
			return err
		}
		d.path = d.path[:len(d.path)-1]
	}
	_, err := d.dec.ReadToken()
	return d.syntaxError(err)
}

// repeated handles a field of m that its object names again (at d.path): an error, or (OnDuplicate) reported and
// prepared for the value that follows, as kube-apiserver's decoder (Go's encoding/json) reads it: an object is read
// into what the first occurrence set, anything else replaces it.
func (d *decoder) repeated(fi *fieldInfo, m protoreflect.Message) error {
	if d.opts.OnDuplicate == nil {
		return d.fail(fmt.Errorf("duplicate field %q", fi.name))
	}
	d.opts.OnDuplicate(kubePath(d.path))
	k, err := d.peek()
	if err != nil {
		return err
	}
	if k == 'n' || fi.isList || !fi.isMap && (fi.elemMsg == nil || fi.elemSpecial != specialNone) {
		m.Clear(fi.fd)
	}
	return nil
}

// duplicateKey handles a key that a map names again: an error, or (OnDuplicate) reported, its value to replace the
// first.
func (d *decoder) duplicateKey(key string) error {
	if d.opts.OnDuplicate == nil {
		return d.fail(fmt.Errorf("duplicate key %q", key))
	}
	d.opts.OnDuplicate(kubePath(d.path))
	return nil
}

// unknown handles a member name the message does not have: an error, or skipped (and reported) when discarding.
func (d *decoder) unknown(rawName []byte, seen *[]string) error {
	name := string(d.unquote(rawName))
	d.path = append(d.path, pathSeg{kind: segField, name: name})
	if !d.opts.DiscardUnknown {
		return d.fail(&unknownFieldError{name: name})
	}
	again := slices.Contains(*seen, name)
	switch {
	case again && d.opts.OnDuplicate == nil:
		return d.fail(fmt.Errorf("duplicate field %q", name))
	case !again:
		*seen = append(*seen, name)
		if d.opts.OnUnknown != nil {
			d.opts.OnUnknown(pathString(d.path))
		}
	}
	raw, err := d.dec.ReadValue()
	if err != nil {
		return d.syntaxError(err)
	}
	if d.opts.OnDuplicate == nil { // else what it repeats inside is dropped with it
		if err := d.checkDuplicates(raw); err != nil {
			return err
		}
	}
	d.path = d.path[:len(d.path)-1]
	return nil
}

// checkDuplicates reports a duplicate object member name anywhere in a raw JSON value (the tokenizer does not track
// names; see allowDuplicateNames).
func (d *decoder) checkDuplicates(raw []byte) error {
	if raw[0] != '{' && raw[0] != '[' || jsontext.Value(raw).IsValid() {
		return nil
	}
	_, err := jsontext.NewDecoder(bytes.NewReader(raw)).ReadValue()
	var se *jsontext.SyntacticError
	if errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &se) {
		return d.fail(fmt.Errorf("duplicate key %q at %s", se.JSONPointer.LastToken(), se.JSONPointer))
	}
	return d.syntaxError(err)
}

// field reads the value of one field of m.
func (d *decoder) field(fi *fieldInfo, m protoreflect.Message) error {
	k, err := d.peek()
	if err != nil {
		return err
	}
	if k == 'n' && (fi.elemSpecial != specialValue || fi.isList || fi.isMap) {
		_, err := d.dec.ReadValue() // null: leave the field unset
		return d.syntaxError(err)
	}
	if fi.oneof != nil {
		if which := m.WhichOneof(fi.oneof); which != nil && which != fi.fd { // itself: a repeated member (OnDuplicate)
			return d.fail(fmt.Errorf("%q and %q are alternatives (oneof %s); only one may be set",
				which.JSONName(), fi.name, fi.oneof.Name()))
		}
	}
	switch {
	case fi.isList:
		return d.list(fi, m, k)
	case fi.isMap:
		return d.mapObject(fi, m, k)
	case fi.elemMsg != nil:
		return d.message(fi.message(), m.Mutable(fi.fd).Message(), k)
	}
	v, err := d.scalar(fi, k)
	if err != nil {
		return err
	}
	m.Set(fi.fd, v)
	return nil
}

// element reads one list element or map value. null is the element's zero value (an empty message), except for
// google.protobuf.Value where it is the null value and for quantities where it is "0" (Kubernetes' zero Quantity).
func (d *decoder) element(fi *fieldInfo, k byte, newMessage func() protoreflect.Value) (protoreflect.Value, error) {
	if fi.elemMsg != nil {
		v := newMessage()
		if k == 'n' && fi.elemSpecial != specialValue {
			_, err := d.dec.ReadValue()
			return v, d.syntaxError(err)
		}
		return v, d.message(fi.message(), v.Message(), k)
	}
	if k == 'n' {
		_, err := d.dec.ReadValue()
		if fi.quantity {
			return protoreflect.ValueOfString(zeroQuantity), d.syntaxError(err)
		}
		return zeroValue(fi.elem), d.syntaxError(err)
	}
	return d.scalar(fi, k)
}

// list reads a JSON array into the repeated field fi of m.
func (d *decoder) list(fi *fieldInfo, m protoreflect.Message, k byte) error {
	if k != '[' {
		return d.typeError("an array", k)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.syntaxError(err)
	}
	l := m.Mutable(fi.fd).List()
	d.path = append(d.path, pathSeg{kind: segIndex})
	top := len(d.path) - 1
	for i := 0; ; i++ {
		d.path = d.path[:top] // errors between elements belong to the list
		k, err := d.peek()
		if err != nil {
			return err
		}
		if k == ']' {
			break
		}
		d.path = d.path[:top+1]
		d.path[top].index = i
		v, err := d.element(fi, k, l.NewElement)
		if err != nil {
			return err
		}
		l.Append(v)
	}
	_, err := d.dec.ReadToken()
	return d.syntaxError(err)
}

// mapObject reads a JSON object into the map field fi of m.
func (d *decoder) mapObject(fi *fieldInfo, m protoreflect.Message, k byte) error {
	if k != '{' {
		return d.typeError("an object", k)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.syntaxError(err)
	}
	mp := m.Mutable(fi.fd).Map()
	d.path = append(d.path, pathSeg{kind: segKey})
	top := len(d.path) - 1
	for {
		d.path = d.path[:top] // errors between entries belong to the map
		k, err := d.peek()
		if err != nil {
			return err
		}
		if k == '}' {
			break
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		d.path = d.path[:top+1]
		key := string(d.unquote(raw))
		d.path[top].name = key
		mk, err := mapKey(fi.mapKey, key)
		if err != nil {
			return d.fail(err)
		}
		if k, err = d.peek(); err != nil {
			return err
		}
		if mp.Has(mk) {
			if err := d.duplicateKey(key); err != nil { // also "0" and "-0" for integer keys
				return err
			}
		}
		v, err := d.element(fi, k, mp.NewValue)
		if err != nil {
			return err
		}
		mp.Set(mk, v)
	}
	_, err := d.dec.ReadToken()
	return d.syntaxError(err)
}

// mapKey converts an object member name to a map key of fd's kind.
func mapKey(fd protoreflect.FieldDescriptor, key string) (protoreflect.MapKey, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(key).MapKey(), nil
	case protoreflect.BoolKind:
		switch key {
		case "true":
			return protoreflect.ValueOfBool(true).MapKey(), nil
		case "false":
			return protoreflect.ValueOfBool(false).MapKey(), nil
		}
		return protoreflect.MapKey{}, fmt.Errorf("invalid map key %q: expected true or false", key)
	}
	if !isIntegerText([]byte(key)) {
		return protoreflect.MapKey{}, fmt.Errorf("invalid map key %q: expected an integer", key)
	}
	var v protoreflect.Value
	var err error
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		var n int64
		n, err = parseInt([]byte(key), 32)
		v = protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		var n int64
		n, err = parseInt([]byte(key), 64)
		v = protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		var n uint64
		n, err = parseUint([]byte(key), 32)
		v = protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var n uint64
		n, err = parseUint([]byte(key), 64)
		v = protoreflect.ValueOfUint64(n)
	default:
		return protoreflect.MapKey{}, errUnsupportedKind(fd.Kind())
	}
	if err != nil {
		return protoreflect.MapKey{}, fmt.Errorf("map key %s is out of range for %v", key, fd.Kind())
	}
	return v.MapKey(), nil
}

// zeroValue is the zero value of a scalar field's type.
func zeroValue(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(0)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(0)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(0)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(0)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(nil)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(fd.Enum().Values().Get(0).Number())
	}
	return protoreflect.Value{}
}

// scalar reads one scalar value of the field's element type.
func (d *decoder) scalar(fi *fieldInfo, k byte) (protoreflect.Value, error) {
	switch fi.elemKind {
	case protoreflect.StringKind:
		if fi.quantity {
			s, err := d.quantity(k)
			if err != nil {
				return protoreflect.Value{}, err
			}
			return protoreflect.ValueOfString(s), nil
		}
		if k != '"' {
			return protoreflect.Value{}, d.typeError("a string", k)
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return protoreflect.Value{}, d.syntaxError(err)
		}
		return protoreflect.ValueOfString(string(d.unquote(raw))), nil
	case protoreflect.BoolKind:
		if k != 't' && k != 'f' {
			return protoreflect.Value{}, d.typeError("a boolean", k)
		}
		if _, err := d.dec.ReadValue(); err != nil {
			return protoreflect.Value{}, d.syntaxError(err)
		}
		return protoreflect.ValueOfBool(k == 't'), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		lit, err := d.number(k, false)
		if err != nil {
			return protoreflect.Value{}, err
		}
		n, err := parseInt(lit, 32)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "int32")
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		lit, err := d.number(k, true)
		if err != nil {
			return protoreflect.Value{}, err
		}
		n, err := parseInt(lit, 64)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "int64")
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		lit, err := d.number(k, false)
		if err != nil {
			return protoreflect.Value{}, err
		}
		n, err := parseUint(lit, 32)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "uint32")
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		lit, err := d.number(k, true)
		if err != nil {
			return protoreflect.Value{}, err
		}
		n, err := parseUint(lit, 64)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "uint64")
		}
		return protoreflect.ValueOfUint64(n), nil
	case protoreflect.FloatKind:
		lit, err := d.number(k, false)
		if err != nil {
			return protoreflect.Value{}, err
		}
		f, err := parseFloat(lit, 32)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "float")
		}
		return protoreflect.ValueOfFloat32(float32(f)), nil
	case protoreflect.DoubleKind:
		lit, err := d.number(k, false)
		if err != nil {
			return protoreflect.Value{}, err
		}
		f, err := parseFloat(lit, 64)
		if err != nil {
			return protoreflect.Value{}, d.numberError(lit, err, "double")
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.BytesKind:
		if k != '"' {
			return protoreflect.Value{}, d.typeError("a base64 string", k)
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return protoreflect.Value{}, d.syntaxError(err)
		}
		b, err := decodeBase64(d.unquote(raw))
		if err != nil {
			return protoreflect.Value{}, d.fail(err)
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.EnumKind:
		switch k {
		case '"':
			raw, err := d.dec.ReadValue()
			if err != nil {
				return protoreflect.Value{}, d.syntaxError(err)
			}
			name := d.unquote(raw)
			ev := fi.elem.Enum().Values().ByName(protoreflect.Name(name))
			if ev == nil {
				return protoreflect.Value{}, d.fail(fmt.Errorf("invalid value %q for enum %s", name, fi.elem.Enum().FullName()))
			}
			return protoreflect.ValueOfEnum(ev.Number()), nil
		case '0':
			lit, err := d.number(k, false)
			if err != nil {
				return protoreflect.Value{}, err
			}
			n, err := parseInt(lit, 32)
			if err != nil {
				return protoreflect.Value{}, d.numberError(lit, err, "enum")
			}
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
		}
		return protoreflect.Value{}, d.typeError("a string", k)
	}
	return protoreflect.Value{}, d.fail(errUnsupportedKind(fi.elemKind))
}

// quantity reads the value of a field marked (trellis.meta.v1.quantity) as Kubernetes' resource.Quantity reads its
// JSON (quantity.go): a string, or a number whose literal text is taken (2 is "2", 1e3 is "1e3"). The text, without
// surrounding whitespace, must parse with resource.ParseQuantity; it is kept as written, not canonicalized. Like
// Kubernetes, this looks at the string as written between the quotes: a quantity has no use for escapes, and one
// that has them is invalid there too.
func (d *decoder) quantity(k byte) (string, error) {
	if k != '"' && k != '0' {
		return "", d.typeError("a quantity (a string or a number)", k)
	}
	raw, err := d.dec.ReadValue()
	if err != nil {
		return "", d.syntaxError(err)
	}
	if k == '"' {
		raw = raw[1 : len(raw)-1]
	}
	s := strings.TrimSpace(string(raw))
	if err := checkQuantity(s); err != nil {
		return "", d.fail(err)
	}
	return s, nil
}

// number reads a number literal; a quoted integer is accepted for 64-bit fields (quoted).
func (d *decoder) number(k byte, quoted bool) ([]byte, error) {
	switch {
	case k == '0':
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, d.syntaxError(err)
		}
		return raw, nil
	case k == '"' && quoted:
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, d.syntaxError(err)
		}
		s := d.unquote(raw)
		if !isIntegerText(s) {
			return nil, d.fail(fmt.Errorf("expected an integer, got string %q", s))
		}
		return s, nil
	}
	return nil, d.typeError("a number", k)
}

// fastField reads a field straight into its Go struct field p (see golayout.go). Values of the wrong JSON type go
// to field, which reports them.
func (d *decoder) fastField(fi *fieldInfo, p unsafe.Pointer) error {
	k, err := d.peek()
	if err != nil {
		return err
	}
	if k == 'n' {
		_, err := d.dec.ReadValue() // null: leave the field unset
		return d.syntaxError(err)
	}
	switch fi.fast {
	case fastString:
		if fi.quantity {
			s, err := d.quantity(k)
			if err != nil {
				return err
			}
			*(*string)(p) = s
			return nil
		}
		if k != '"' {
			return d.typeError("a string", k)
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		*(*string)(p) = string(d.unquote(raw))
		return nil
	case fastStringList:
		if k != '[' {
			return d.typeError("an array", k)
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return d.syntaxError(err)
		}
		l := (*[]string)(p)
		d.path = append(d.path, pathSeg{kind: segIndex})
		top := len(d.path) - 1
		for i := 0; ; i++ {
			d.path = d.path[:top]
			k, err := d.peek()
			if err != nil {
				return err
			}
			if k == ']' {
				break
			}
			d.path = d.path[:top+1]
			d.path[top].index = i
			s, err := d.fastString(fi, k)
			if err != nil {
				return err
			}
			*l = append(*l, s)
		}
		_, err := d.dec.ReadToken()
		return d.syntaxError(err)
	case fastStringMap:
		mp := (*map[string]string)(p)
		if *mp == nil {
			*mp = make(map[string]string)
		}
		return d.fastMap(k, func(key string, k byte) error {
			if _, dup := (*mp)[key]; dup {
				if err := d.duplicateKey(key); err != nil {
					return err
				}
			}
			v, err := d.fastString(fi, k)
			(*mp)[key] = v
			return err
		})
	case fastBytesMap:
		mp := (*map[string][]byte)(p)
		if *mp == nil {
			*mp = make(map[string][]byte)
		}
		return d.fastMap(k, func(key string, k byte) error {
			if _, dup := (*mp)[key]; dup {
				if err := d.duplicateKey(key); err != nil {
					return err
				}
			}
			if k == 'n' {
				_, err := d.dec.ReadValue()
				(*mp)[key] = nil
				return d.syntaxError(err)
			}
			if k != '"' {
				return d.typeError("a base64 string", k)
			}
			raw, err := d.dec.ReadValue()
			if err != nil {
				return d.syntaxError(err)
			}
			v, err := decodeBase64(d.unquote(raw))
			if err != nil {
				return d.fail(err)
			}
			(*mp)[key] = v
			return nil
		})
	}
	return d.fail(errUnsupportedKind(fi.elemKind))
}

// fastString reads a string element of fi; null is "" ("0" for a quantity).
func (d *decoder) fastString(fi *fieldInfo, k byte) (string, error) {
	if fi.quantity && k != 'n' {
		return d.quantity(k)
	}
	switch k {
	case '"':
		raw, err := d.dec.ReadValue()
		if err != nil {
			return "", d.syntaxError(err)
		}
		return string(d.unquote(raw)), nil
	case 'n':
		_, err := d.dec.ReadValue()
		if fi.quantity {
			return zeroQuantity, d.syntaxError(err)
		}
		return "", d.syntaxError(err)
	}
	return "", d.typeError("a string", k)
}

// fastMap reads a JSON object with string keys, calling entry for each member with the kind of its value.
func (d *decoder) fastMap(k byte, entry func(key string, k byte) error) error {
	if k != '{' {
		return d.typeError("an object", k)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return d.syntaxError(err)
	}
	d.path = append(d.path, pathSeg{kind: segKey})
	top := len(d.path) - 1
	for {
		d.path = d.path[:top]
		k, err := d.peek()
		if err != nil {
			return err
		}
		if k == '}' {
			break
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return d.syntaxError(err)
		}
		key := string(d.unquote(raw))
		d.path = d.path[:top+1]
		d.path[top].name = key
		if k, err = d.peek(); err != nil {
			return err
		}
		if err := entry(key, k); err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return d.syntaxError(err)
}
