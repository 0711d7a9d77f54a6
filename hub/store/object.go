package store

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Object is a stored kind: a protobuf message with Kubernetes object metadata.
type Object interface {
	proto.Message
	GetMetadata() *metav1.ObjectMeta
}

// Field names the store treats by name. Everything that is not metadata, status or type metadata (apiVersion, kind)
// is desired state: a change to it moves metadata.generation.
const (
	fieldMetadata   = "metadata"
	fieldStatus     = "status"
	fieldAPIVersion = "api_version"
	fieldKind       = "kind"
)

var objectMetaName = (&metav1.ObjectMeta{}).ProtoReflect().Descriptor().FullName()

// shape is what the store knows about a kind's message: where metadata and status are and which fields are desired
// state.
type shape struct {
	desc    protoreflect.MessageDescriptor
	kind    string
	meta    protoreflect.FieldDescriptor
	status  protoreflect.FieldDescriptor // nil when the kind has no status
	desired []protoreflect.FieldDescriptor
}

func newShape(obj Object) (*shape, error) {
	md := obj.ProtoReflect().Descriptor()
	s := &shape{desc: md, kind: string(md.Name())}
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		switch fd.Name() {
		case fieldMetadata:
			if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.Message().FullName() != objectMetaName {
				return nil, fmt.Errorf("%s.metadata is not a %s", md.FullName(), objectMetaName)
			}
			s.meta = fd
		case fieldStatus:
			if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
				s.status = fd
			} else {
				s.desired = append(s.desired, fd)
			}
		case fieldAPIVersion, fieldKind:
		default:
			s.desired = append(s.desired, fd)
		}
	}
	if s.meta == nil {
		return nil, fmt.Errorf("%s has no metadata field", md.FullName())
	}
	return s, nil
}

// metaOf returns obj's metadata, creating it when absent. obj must be owned by the caller.
func (s *shape) metaOf(obj Object) *metav1.ObjectMeta {
	if m := obj.GetMetadata(); m != nil {
		return m
	}
	m := &metav1.ObjectMeta{}
	obj.ProtoReflect().Set(s.meta, protoreflect.ValueOfMessage(m.ProtoReflect()))
	return m
}

// copyStatus sets dst's status to a deep copy of src's, or to src's own with shared (or clears it).
func (s *shape) copyStatus(dst, src Object, shared bool) {
	if s.status == nil {
		return
	}
	d, sr := dst.ProtoReflect(), src.ProtoReflect()
	if !sr.Has(s.status) {
		d.Clear(s.status)
		return
	}
	st := sr.Get(s.status)
	if !shared {
		st = protoreflect.ValueOfMessage(proto.Clone(st.Message().Interface()).ProtoReflect())
	}
	d.Set(s.status, st)
}

// desiredEqual reports whether a and b have the same desired state.
func (s *shape) desiredEqual(a, b Object) bool {
	am, bm := a.ProtoReflect(), b.ProtoReflect()
	for _, fd := range s.desired {
		ha, hb := am.Has(fd), bm.Has(fd)
		if ha != hb {
			return false
		}
		if !ha {
			continue
		}
		va, vb := am.Get(fd), bm.Get(fd)
		if fd.Message() != nil && !fd.IsList() && !fd.IsMap() {
			// proto.Equal takes the generated messages' fast path; Value.Equal walks them by reflection.
			if !proto.Equal(va.Message().Interface(), vb.Message().Interface()) {
				return false
			}
			continue
		}
		if !va.Equal(vb) {
			return false
		}
	}
	return true
}

// sameObject reports whether the stored object cur and the candidate next are equal apart from resourceVersion.
// next is owned by the caller and left unchanged.
func (s *shape) sameObject(next, cur Object) bool {
	m := s.metaOf(next)
	rv := m.ResourceVersion
	m.ResourceVersion = cur.GetMetadata().GetResourceVersion()
	eq := proto.Equal(next, cur)
	m.ResourceVersion = rv
	return eq
}

// newBookmark is an empty object carrying only a resourceVersion.
func (s *shape) newBookmark(newObj func() Object, rev int64) Object {
	obj := newObj()
	s.metaOf(obj).ResourceVersion = strconv.FormatInt(rev, 10)
	return obj
}

var marshalOptions = proto.MarshalOptions{Deterministic: true}

// encode marshals obj for key (with resourceVersion cleared) and encrypts it when asked. obj is owned by the caller;
// its resourceVersion is restored.
func (c *Collection) encode(key string, obj Object) ([]byte, error) {
	m := c.shape.metaOf(obj)
	rv := m.ResourceVersion
	m.ResourceVersion = ""
	data, err := marshalOptions.Marshal(obj)
	m.ResourceVersion = rv
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", key, err)
	}
	if c.res.Encrypted {
		data, err = c.store.enc.seal(key, data)
		if err != nil {
			return nil, fmt.Errorf("encrypt %s: %w", key, err)
		}
	}
	return data, nil
}

// decode reads a stored value of key into a new object whose resourceVersion is rev.
func (c *Collection) decode(key string, value []byte, rev int64) (Object, error) {
	plain, err := c.store.enc.open(key, value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	obj := c.res.New()
	if err := proto.Unmarshal(plain, obj); err != nil {
		return nil, fmt.Errorf("unmarshal %s: %w", key, err)
	}
	c.shape.metaOf(obj).ResourceVersion = strconv.FormatInt(rev, 10)
	return obj, nil
}

// withRevision returns obj, a state the cache holds, at another resourceVersion (for DELETED events, which carry the
// deletion's). The copy is shallow: it shares every field of obj but metadata, and every field of obj's metadata but
// the resourceVersion, with obj. Both are the cache's and immutable; a deep copy of a large object was most of a
// delete's cost in the cache.
func (c *Collection) withRevision(obj Object, rev int64) Object {
	out, meta := c.metaCopy(obj)
	meta.ResourceVersion = strconv.FormatInt(rev, 10)
	return out
}

// writable returns the copy of obj that a write sets metadata fields of, and its metadata: with shared (a request
// WithEncodedAnswer, which hands its objects over and only reads what it gets back) a copy of the metadata alone,
// sharing the rest with obj (metaCopy); otherwise a deep copy, as the caller may change obj or the result afterwards.
func (c *Collection) writable(shared bool, obj Object) (Object, *metav1.ObjectMeta) {
	if shared {
		return c.metaCopy(obj)
	}
	out := clone(obj)
	return out, c.shape.metaOf(out)
}

// metaCopy returns a copy of obj that shares every field but metadata with obj, and its metadata, which shares every
// field with obj's: setting a field of meta leaves obj as it is; changing a shared value in place would not.
func (c *Collection) metaCopy(obj Object) (out Object, meta *metav1.ObjectMeta) {
	m := shallowCopy(obj.ProtoReflect())
	meta = &metav1.ObjectMeta{}
	if om := obj.GetMetadata(); om != nil {
		meta = shallowCopy(om.ProtoReflect()).Interface().(*metav1.ObjectMeta)
	}
	m.Set(c.shape.meta, protoreflect.ValueOfMessage(meta.ProtoReflect()))
	return m.Interface().(Object), meta
}

// shallowCopy returns a new message with m's populated and unknown fields, sharing their values (messages, lists,
// maps, bytes) with m.
func shallowCopy(m protoreflect.Message) protoreflect.Message {
	out := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out.Set(fd, v)
		return true
	})
	if u := m.GetUnknown(); len(u) > 0 {
		out.SetUnknown(u)
	}
	return out
}

func clone(obj Object) Object { return proto.Clone(obj).(Object) }
