package api

import (
	"bytes"
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// typedResult is an object's typing: its typed value, or why it does not fit the schema.
type typedResult struct {
	tv  *typed.TypedValue
	err error
}

// fieldsTypeConverter is the field managers' type converter: a fieldsObject is typed by its unstructured content,
// validating what is not known to fit the schema already (structured-merge-diff validates the members of an object
// one by one, each against its field's type alone, so a member that fits does so in any object of the kind):
//
//   - an update's new object (fieldsObject.live set) is typed against its live object: the members of its top level
//     equal to the live object's fit as those do;
//   - a live object (fieldsObject.known set) is typed against what an earlier write typed: members of its top level
//     whose JSON an earlier write's new object had, and fitted (fittingMembers), are not validated again.
//
// Whether an object fits, and its typed value when it does, are the same as typing it whole.
type fieldsTypeConverter struct{ managedfields.TypeConverter }

func (c fieldsTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	o, ok := obj.(*fieldsObject)
	if !ok {
		return c.TypeConverter.ObjectToTyped(obj, opts...)
	}
	if len(opts) != 1 || opts[0] != typed.AllowDuplicates {
		return c.TypeConverter.ObjectToTyped(&o.Unstructured, opts...)
	}
	if o.live != nil {
		r := c.typeNew(o)
		o.fits = r.err == nil
		return r.tv, r.err
	}
	if o.typed == nil {
		o.typed = c.typeLive(o)
	}
	return o.typed.tv, o.typed.err
}

// whole types o as a whole.
func (c fieldsTypeConverter) whole(o *fieldsObject) *typedResult {
	tv, err := c.TypeConverter.ObjectToTyped(&o.Unstructured, typed.AllowDuplicates)
	return &typedResult{tv: tv, err: err}
}

// typeNew types o, a new object, with typed.AllowDuplicates against its live object.
func (c fieldsTypeConverter) typeNew(o *fieldsObject) *typedResult {
	if o.live.GroupVersionKind() != o.GroupVersionKind() {
		return c.whole(o)
	}
	live, err := c.ObjectToTyped(o.live, typed.AllowDuplicates)
	if err != nil {
		// The field manager fails the write's recording on either object's error, whichever it types first.
		return &typedResult{err: err}
	}
	r, ok := typedMembers(o.Object, live.Schema(), live.TypeRef(), func(k string, v any) bool {
		if b, lb := o.members[k], o.live.members[k]; b != nil && lb != nil && bytes.Equal(b, lb) {
			return true // the same JSON: the same value (sameMember)
		}
		lv, present := o.live.Object[k]
		return present && equalJSONValue(v, lv)
	})
	if !ok {
		return c.whole(o)
	}
	return r
}

// typeLive types o, a live object, with typed.AllowDuplicates, validating the members of its top level that are
// not in o.known.
func (c fieldsTypeConverter) typeLive(o *fieldsObject) *typedResult {
	if o.known == nil || o.members == nil {
		return c.whole(o)
	}
	// The kind's schema and root type: those of its empty object.
	empty := &unstructured.Unstructured{Object: map[string]any{}}
	empty.SetGroupVersionKind(o.GroupVersionKind())
	root, err := c.TypeConverter.ObjectToTyped(empty, typed.AllowDuplicates)
	if err != nil {
		return c.whole(o)
	}
	r, ok := typedMembers(o.Object, root.Schema(), root.TypeRef(), func(k string, _ any) bool {
		b, read := o.members[k]
		return read && o.known.fits(k, b)
	})
	if !ok {
		return c.whole(o)
	}
	return r
}

// typedMembers types content, an object's unstructured content, as type ref of schema s, validating each member of
// its top level for which fits is false against its field's type: its typed value, or the first member's error. ok
// is false when the root type is not an object
// or a member is not one of its declared fields (the caller types the whole object then).
func typedMembers(content map[string]any, s *schema.Schema, ref schema.TypeRef, fits func(k string, v any) bool) (r *typedResult, ok bool) {
	root, found := s.Resolve(ref)
	if !found || root.Map == nil {
		return nil, false
	}
	for k, v := range content {
		if fits(k, v) {
			continue
		}
		f, declared := root.Map.FindField(k)
		if !declared {
			return nil, false
		}
		if _, err := typed.AsTyped(value.NewValueInterface(v), s, f.Type, typed.AllowDuplicates); err != nil {
			return &typedResult{err: err}, true
		}
	}
	// Validated member by member above (or known to fit): AsTyped would validate the whole object again.
	return &typedResult{tv: typed.AsTypedUnvalidated(value.NewValueInterface(content), s, ref)}, true //nolint:staticcheck // SA1019: see above
}

// equalJSONValue reports whether a and b, values of the unstructured form (decodeJSONObject), are equal: of the same
// Go types and values.
func equalJSONValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !equalJSONValue(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalJSONValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		return equalScalar(a, b)
	case int64:
		return equalScalar(a, b)
	case float64:
		return equalScalar(a, b)
	case bool:
		return equalScalar(a, b)
	case nil:
		return b == nil
	}
	return false
}

// equalScalar reports whether b is a T equal to a.
func equalScalar[T comparable](a T, b any) bool {
	bv, ok := b.(T)
	return ok && a == bv
}

// fittingMembersMax bounds the objects fittingMembers remembers, per kind.
const fittingMembersMax = 1 << 14

// fittingMembers remembers, per object (namespace/name), the members of the top level of the last new object a
// write of it typed, and that fitted the kind's schema, by a digest of their JSON: the next write of the object
// finds most of them in its live object (the state that write stored), unchanged, and does not validate them again
// (fieldsTypeConverter.typeLive). What it remembers is a fact about JSON, not about a version: an entry that is not
// the live object's (another version, a failed write) only matches the members whose JSON it names. At most
// fittingMembersMax objects, forgetting some when full.
type fittingMembers struct {
	seeds [2]maphash.Seed
	mu    sync.Mutex
	m     map[string]map[string]jsonDigest
}

func newFittingMembers() *fittingMembers {
	return &fittingMembers{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, m: map[string]map[string]jsonDigest{}}
}

// jsonDigest identifies JSON bytes: their length and two 64-bit hashes with seeds of the process (a collision, which
// would take a member for one known to fit, is as likely as guessing 128 random bits).
type jsonDigest struct {
	n      int
	h1, h2 uint64
}

func (f *fittingMembers) digest(b []byte) jsonDigest {
	return jsonDigest{n: len(b), h1: maphash.Bytes(f.seeds[0], b), h2: maphash.Bytes(f.seeds[1], b)}
}

// knownMembers are the members of an object's top level known to fit its kind's schema, by the digest of their JSON.
type knownMembers struct {
	f *fittingMembers
	d map[string]jsonDigest
}

// fits reports whether member k with JSON b is known to fit.
func (k *knownMembers) fits(name string, b []byte) bool {
	d, ok := k.d[name]
	return ok && d == k.f.digest(b)
}

// get returns what f remembers of the object at key (nil when nothing).
func (f *fittingMembers) get(key string) *knownMembers {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	d := f.m[key]
	f.mu.Unlock()
	if d == nil {
		return nil
	}
	return &knownMembers{f: f, d: d}
}

// put remembers members, the JSON of the top-level members of a new object of key that fitted the schema.
func (f *fittingMembers) put(key string, members map[string][]byte) {
	if f == nil || len(members) == 0 {
		return
	}
	d := make(map[string]jsonDigest, len(members))
	for k, b := range members {
		d[k] = f.digest(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[key]; !ok && len(f.m) >= fittingMembersMax {
		// Forget an eighth, in map order (random).
		n := fittingMembersMax / 8
		for k := range f.m {
			delete(f.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	f.m[key] = d
}
