package kjson

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// encoder holds the scratch state of one Marshal call; it is pooled. The JSON itself is threaded through the
// methods as an append buffer.
type encoder struct {
	// keys collects the keys of a map[string]string or map[string][]byte for sorting.
	keys []string
	// entries collects map entries for sorting; nested maps use the slice as a stack.
	entries []mapEntry
	// collect appends one map entry to entries; made once per encoder so that Map.Range does not allocate a closure.
	collect func(protoreflect.MapKey, protoreflect.Value) bool
}

type mapEntry struct {
	key string // the key as written (without quotes); entries are sorted by it, as encoding/json sorts map keys
	v   protoreflect.Value
}

var encoderPool = sync.Pool{New: func() any {
	e := new(encoder)
	e.collect = func(k protoreflect.MapKey, v protoreflect.Value) bool {
		e.entries = append(e.entries, mapEntry{k.String(), v}) // String formats bool and integer keys

		return true
	}
	return e
}}

// message appends m as a JSON object (or as its special form).
func (e *encoder) message(b []byte, mi *messageInfo, m protoreflect.Message) ([]byte, error) {
	if mi.special != specialNone {
		return e.special(b, mi, m)
	}
	gl, base := mi.layout(m)
	b = append(b, '{')
	first := true
	for _, fi := range mi.fields {
		if p := gl.field(base, fi); p != nil {
			var err error
			if b, err = e.fastField(b, fi, p, &first); err != nil {
				return b, prependPath(err, fi.name)
			}
			continue
		}
		// Has is exactly Kubernetes' omitempty: proto3 scalars are "set" when non-zero, optional scalars and
		// messages when present, lists and maps when non-empty. The Go struct answers it faster where it can.
		if has, known := gl.has(base, fi); known && !has || !known && !m.Has(fi.fd) {
			continue
		}
		v := m.Get(fi.fd)
		if fi.elemSpecial != specialNone && !fi.isList && !fi.isMap && emptySpecial(fi, v.Message()) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, fi.key...)
		var err error
		switch {
		case fi.isList:
			b, err = e.list(b, fi, v.List())
		case fi.isMap:
			b, err = e.mapObject(b, fi, v.Map())
		default:
			b, err = e.single(b, fi, v)
		}
		if err != nil {
			return b, prependPath(err, fi.name)
		}
	}
	return append(b, '}'), nil
}

// emptySpecial reports whether a set RawExtension or IntOrString field holds nothing; such a field is left out, the
// same as unset (JSON null reads back as unset).
func emptySpecial(fi *fieldInfo, m protoreflect.Message) bool {
	switch fi.elemSpecial {
	case specialRawExtension:
		return len(m.Get(fi.message().f1).Bytes()) == 0
	case specialIntOrString:
		return m.WhichOneof(fi.message().oneof) == nil
	}
	return false
}

// single appends one value of the field's element type.
func (e *encoder) single(b []byte, fi *fieldInfo, v protoreflect.Value) ([]byte, error) {
	switch fi.elemKind {
	case protoreflect.StringKind:
		return appendString(b, v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return e.message(b, fi.message(), v.Message())
	case protoreflect.BoolKind:
		if v.Bool() {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return appendFloat(b, v.Float(), 32)
	case protoreflect.DoubleKind:
		return appendFloat(b, v.Float(), 64)
	case protoreflect.BytesKind:
		return appendBase64(b, v.Bytes()), nil
	case protoreflect.EnumKind:
		if ev := fi.elem.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10), nil
	}
	return b, errUnsupportedKind(fi.elemKind)
}

// list appends a repeated field as a JSON array.
func (e *encoder) list(b []byte, fi *fieldInfo, l protoreflect.List) ([]byte, error) {
	b = append(b, '[')
	for i := range l.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = e.single(b, fi, l.Get(i)); err != nil {
			return b, prependPath(err, "["+strconv.Itoa(i)+"]")
		}
	}
	return append(b, ']'), nil
}

// mapObject appends a map field as a JSON object with sorted keys.
func (e *encoder) mapObject(b []byte, fi *fieldInfo, mp protoreflect.Map) ([]byte, error) {
	start := len(e.entries)
	mp.Range(e.collect)
	end := len(e.entries)
	defer func() {
		clear(e.entries[start:end]) // do not keep the caller's values alive in the pool
		e.entries = e.entries[:start]
	}()
	slices.SortFunc(e.entries[start:end], compareKeys)
	b = append(b, '{')
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		// Index e.entries afresh: a nested map may have grown (moved) the slice.
		ent := e.entries[i]
		var err error
		if b, err = appendString(b, ent.key); err != nil {
			return b, prependPath(err, "["+strings.ToValidUTF8(ent.key, "\uFFFD")+"]")
		}
		b = append(b, ':')
		if b, err = e.single(b, fi, ent.v); err != nil {
			return b, prependPath(err, "["+ent.key+"]")
		}
	}
	return append(b, '}'), nil
}

func compareKeys(a, b mapEntry) int { return strings.Compare(a.key, b.key) }

// fastField appends a field read directly from its Go struct field p (see golayout.go), unless it is empty.
func (e *encoder) fastField(b []byte, fi *fieldInfo, p unsafe.Pointer, first *bool) ([]byte, error) {
	switch fi.fast {
	case fastString:
		s := *(*string)(p)
		if s == "" {
			return b, nil
		}
		b = e.fieldKey(b, fi, first)
		return appendString(b, s)
	case fastStringList:
		l := *(*[]string)(p)
		if len(l) == 0 {
			return b, nil
		}
		b = e.fieldKey(b, fi, first)
		b = append(b, '[')
		for i, s := range l {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendString(b, s); err != nil {
				return b, prependPath(err, "["+strconv.Itoa(i)+"]")
			}
		}
		return append(b, ']'), nil
	case fastStringMap:
		mp := *(*map[string]string)(p)
		if len(mp) == 0 {
			return b, nil
		}
		b = e.fieldKey(b, fi, first)
		return appendSortedMap(b, e, mp, func(b []byte, v string) ([]byte, error) { return appendString(b, v) })
	case fastBytesMap:
		mp := *(*map[string][]byte)(p)
		if len(mp) == 0 {
			return b, nil
		}
		b = e.fieldKey(b, fi, first)
		return appendSortedMap(b, e, mp, func(b []byte, v []byte) ([]byte, error) { return appendBase64(b, v), nil })
	}
	return b, nil
}

func (e *encoder) fieldKey(b []byte, fi *fieldInfo, first *bool) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	return append(b, fi.key...)
}

// appendSortedMap appends a Go map with string keys as a JSON object with sorted keys.
func appendSortedMap[V any](b []byte, e *encoder, mp map[string]V,
	appendValue func([]byte, V) ([]byte, error)) ([]byte, error) {
	keys := e.keys[:0]
	for k := range mp {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	defer func() {
		clear(keys)
		e.keys = keys[:0]
	}()
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendString(b, k); err != nil {
			return b, prependPath(err, "["+strings.ToValidUTF8(k, "\uFFFD")+"]")
		}
		b = append(b, ':')
		if b, err = appendValue(b, mp[k]); err != nil {
			return b, prependPath(err, "["+k+"]")
		}
	}
	return append(b, '}'), nil
}
