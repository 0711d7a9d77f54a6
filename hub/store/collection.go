package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource describes a stored kind.
type Resource struct {
	// Group and Resource name the collection, e.g. "core.gardener.cloud" and "shoots"; Group "" is Kubernetes' core.
	Group, Resource string
	Namespaced      bool
	// Encrypted values are encrypted at rest with Config.EncryptionKeys.
	Encrypted bool
	// New returns an empty message of the stored type.
	New func() Object
	// Fields are the field-selector getters beyond metadata.name and metadata.namespace, by field path
	// (e.g. "spec.seedName").
	Fields map[string]func(Object) string
	// Indexes are named secondary indexes maintained by the watch cache (e.g. "seed"); ByIndex reads them.
	Indexes map[string]func(Object) []string
	// MustIncreaseGeneration, if set, moves metadata.generation on an update that leaves the desired state alone:
	// the kind's own reasons, as Gardener's strategies have them (a Shoot annotated with a credentials rotation).
	// next is the object to be stored, cur the stored one; neither may be changed.
	MustIncreaseGeneration func(next, cur Object) bool
	// Revised, if set, returns data, an encoding that CachedEncoding made of an object (its callers' encode), as the
	// encoding of the same object at resourceVersion; false when it cannot. The answer to a deletion WithEncodedAnswer
	// (the deleted state at the deletion's resourceVersion) is then the deleted state's memoized encoding revised,
	// not a new encoding of the same content.
	Revised func(data []byte, resourceVersion string) ([]byte, bool)
}

// Collection is one registered resource: its writes go to etcd, its reads to its watch cache.
type Collection struct {
	store  *Store
	res    Resource
	shape  *shape
	gr     schema.GroupResource
	gk     schema.GroupKind
	prefix string // key prefix ending in "/"
	cache  *cache

	// written is the highest revision this Store wrote to the resource; reads wait for the cache to reach it.
	written atomic.Int64
	// answers are the results of writes WithEncodedAnswer that the cache has not applied yet.
	answers answers
	// deletions are the results of deletions WithEncodedAnswer whose deleted state had a memoized encoding.
	deletions deletions
}

func newCollection(s *Store, r Resource) (*Collection, error) {
	if r.Resource == "" || r.New == nil {
		return nil, errors.New("store: Resource needs Resource and New")
	}
	sh, err := newShape(r.New())
	if err != nil {
		return nil, fmt.Errorf("store: resource %s: %w", r.Resource, err)
	}
	if r.Encrypted && !s.enc.enabled() {
		return nil, fmt.Errorf("store: resource %s is encrypted but Config.EncryptionKeys is empty", r.Resource)
	}
	for f := range r.Fields {
		if f == fieldMetaName || f == fieldMetaNamespace {
			return nil, fmt.Errorf("store: resource %s: field %s is built in", r.Resource, f)
		}
	}
	c := &Collection{
		store:  s,
		res:    r,
		shape:  sh,
		gr:     schema.GroupResource{Group: r.Group, Resource: r.Resource},
		gk:     schema.GroupKind{Group: r.Group, Kind: sh.kind},
		prefix: resourcePrefix(s.cfg.Prefix, r.Group, r.Resource),
	}
	c.cache = newCache(c)
	return c, nil
}

// Resource returns the description the collection was registered with.
func (c *Collection) Resource() Resource { return c.res }

// wrote records a revision this Store wrote to the resource, for read-your-writes.
func (c *Collection) wrote(rev int64) {
	for {
		cur := c.written.Load()
		if rev <= cur || c.written.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// fresh waits until the cache has seen every write of this Store to the resource.
func (c *Collection) fresh(ctx context.Context) error {
	return c.cache.waitFor(ctx, c.written.Load())
}

// Sync waits until the cache reflects every write committed to etcd before the call, by any replica: a linearizable
// read of etcd's current revision, then a wait for the cache to reach it. Controllers call it before decisions a stale
// read would make wrong (creating an object another leader may just have created), as Gardener's controllers read
// through the API server instead of their informer caches for such decisions.
func (c *Collection) Sync(ctx context.Context) error {
	// Any linearizable read answers with the current revision; one of a single key (the prefix itself, never an
	// object's) costs a lookup, where counting the prefix's keys walked every object of the resource.
	resp, err := c.store.client.Get(ctx, c.prefix, clientv3.WithCountOnly())
	if err != nil {
		return c.internal("read the current revision", err)
	}
	return c.cache.waitFor(ctx, resp.Header.Revision)
}

// checkNamespace validates the namespace argument of a read: cluster-scoped resources take none.
func (c *Collection) checkNamespace(namespace string) error {
	if !c.res.Namespaced && namespace != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s is cluster-scoped: namespace must be empty, got %q", c.gr, namespace))
	}
	return nil
}

// checkName validates the identity of an object named in a request.
func (c *Collection) checkName(namespace, name string) error {
	var errs field.ErrorList
	if c.res.Namespaced {
		errs = append(errs, validatePathSegment(field.NewPath("metadata", "namespace"), namespace)...)
	} else if namespace != "" {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"), "not allowed on a cluster-scoped resource"))
	}
	errs = append(errs, validatePathSegment(field.NewPath("metadata", "name"), name)...)
	if len(errs) > 0 {
		return c.invalid(name, errs)
	}
	return nil
}

// Get returns the object from the watch cache. The object is shared: do not modify it.
func (c *Collection) Get(ctx context.Context, namespace, name string) (Object, error) {
	if err := c.checkName(namespace, name); err != nil {
		return nil, err
	}
	if err := c.fresh(ctx); err != nil {
		return nil, err
	}
	if obj := c.cache.get(namespace, name); obj != nil {
		return obj, nil
	}
	return nil, c.notFound(name)
}

// ByIndex returns the objects whose index function yields value, sorted by key. The objects are shared: do not
// modify them.
func (c *Collection) ByIndex(ctx context.Context, index, value string) ([]Object, error) {
	if err := c.freshIndex(ctx, index); err != nil {
		return nil, err
	}
	entries := c.cache.byIndex(index, value)
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	out := make([]Object, len(entries))
	for i, e := range entries {
		out[i] = e.obj
	}
	return out, nil
}

// CountByIndex returns how many objects the index function yields value for: whether any object does, without
// collecting and sorting them (an index value many objects share, e.g. a Secret every Shoot references).
func (c *Collection) CountByIndex(ctx context.Context, index, value string) (int, error) {
	if err := c.freshIndex(ctx, index); err != nil {
		return 0, err
	}
	return c.cache.countByIndex(index, value), nil
}

// freshIndex checks that the collection has index and waits, as every read does, for the cache to reflect this
// hub's writes (fresh).
func (c *Collection) freshIndex(ctx context.Context, index string) error {
	if _, ok := c.res.Indexes[index]; !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("%s has no index %q", c.gr, index))
	}
	return c.fresh(ctx)
}

// CachedEncoding returns encode(obj), memoized in the watch cache while obj is the cached state of its object, so
// that serving the same object many times (lists, gets) serializes it once — what Kubernetes' watch cache does with
// its caching objects. Objects that are not the cached state (results of writes, converted objects) are encoded
// without memoization. encode must be deterministic and the same for every caller of a collection.
func (c *Collection) CachedEncoding(obj Object, encode func(Object) ([]byte, error)) ([]byte, error) {
	e, state := c.cachedEntry(obj)
	if e == nil {
		return c.answerEncoding(obj, encode)
	}
	m, err := e.encoding(state, encode)
	if err != nil {
		return nil, err
	}
	return m.data, nil
}

// CachedDerivedEncoding returns what derive makes of data, CachedEncoding's encoding of obj, given memo, what derive
// made of that encoding the last time (nil the first time). A result derive reports as changed is kept with the
// encoding, so a caller derives anew only when what it derives from changed (the REST gateway's deflate segment of
// an object, which depends on the object before it in a list too). derive returns memo and false when it still holds.
func (c *Collection) CachedDerivedEncoding(obj Object, encode func(Object) ([]byte, error), derive func(data []byte, memo any) (v any, changed bool)) (any, error) {
	e, state := c.cachedEntry(obj)
	if e == nil {
		data, err := c.answerEncoding(obj, encode)
		if err != nil {
			return nil, err
		}
		v, _ := derive(data, nil)
		return v, nil
	}
	m, err := e.encoding(state, encode)
	if err != nil {
		return nil, err
	}
	var memo any
	if p := m.derived.Load(); p != nil {
		memo = *p
	}
	v, changed := derive(m.data, memo)
	if changed {
		kept := v // a copy: storing &v itself would put v on the heap for every call
		m.derived.Store(&kept)
	}
	return v, nil
}

// cachedEntry returns obj's entry in the watch cache and the cached state whose encoding is obj's: obj itself when it
// is the cached state, or the state a write stored when obj is that write's result, answered encoded (answers);
// nil when obj is neither.
func (c *Collection) cachedEntry(obj Object) (*entry, Object) {
	md := obj.GetMetadata()
	e, cur := c.cache.entry(md.GetNamespace(), md.GetName())
	if e == nil {
		return nil, nil
	}
	if cur == obj {
		return e, obj
	}
	if m := e.encoded.Load(); m != nil && m.answers(obj) {
		return e, m.obj
	}
	return nil, nil
}

// answerEncoding is encode(obj) for an object that is not a cached state. When obj is the result of a write the
// cache has not applied yet (answers), the encoding is kept for the cache to take as the written state's.
func (c *Collection) answerEncoding(obj Object, encode func(Object) ([]byte, error)) ([]byte, error) {
	if data, ok := c.deletionEncoding(obj); ok {
		return data, nil
	}
	var (
		w   *answer
		key string
	)
	if c.answers.n.Load() > 0 && obj.ProtoReflect().Descriptor() == c.shape.desc {
		md := obj.GetMetadata()
		key = objectKey(md.GetNamespace(), md.GetName())
		w = c.answers.find(key, revisionOf(obj), md)
	}
	data, err := encode(obj)
	if err == nil && w != nil {
		c.answers.encoded(key, w, data)
	}
	return data, err
}

// encoding returns e's memoized encoding of obj, its cached state, encoding and memoizing it first when there is none.
func (e *entry) encoding(obj Object, encode func(Object) ([]byte, error)) (*encoding, error) {
	m := e.encoded.Load()
	if m != nil && m.obj == obj && m.data != nil {
		return m, nil
	}
	data, err := encode(obj)
	if err != nil {
		return nil, err
	}
	n := &encoding{obj: obj, data: data}
	if m != nil && m.obj == obj {
		n.answered = m.answered
	}
	e.encoded.Store(n)
	return n, nil
}

// MemoizedEncoding returns the encoding CachedEncoding memoized for the cached state of an object when that state is
// at resourceVersion (the state a write applies to), else nil: a write reuses what a read or a watch serialized of
// the version it replaces, without encoding (and memoizing) a version that is about to be replaced.
func (c *Collection) MemoizedEncoding(namespace, name, resourceVersion string) []byte {
	e, _ := c.cache.entry(namespace, name)
	if e == nil {
		return nil
	}
	m := e.encoded.Load()
	if m == nil || m.data == nil || m.obj.GetMetadata().GetResourceVersion() != resourceVersion {
		return nil
	}
	return m.data
}

// Outdated returns Conflict when resourceVersion, an update's precondition, cannot hold because the cached object is
// already newer (resourceVersions only grow); nil when it may hold (the cache may lag behind: the write's
// compare-and-swap decides). Writers check it before the work of a write (validation, copies, admission), so that an
// update from a stale read, common when controllers write the same objects, fails cheaply.
func (c *Collection) Outdated(namespace, name, resourceVersion string) error {
	if resourceVersion == "" {
		return nil
	}
	want, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil {
		return nil // the write's own checks name the bad value
	}
	if cur := c.cache.get(namespace, name); cur != nil && revisionOf(cur) > want {
		return c.conflict(name)
	}
	return nil
}

// AtLeast waits until the cache has reached resourceVersion, Kubernetes' "not older than" for a get or list with a
// resourceVersion: "" and "0" need nothing beyond what reads do anyway; a revision not reached within a few seconds
// is a Timeout error ("Too large resource version"), as kube-apiserver answers.
func (c *Collection) AtLeast(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" || resourceVersion == "0" {
		return nil
	}
	rev, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil || rev < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", resourceVersion))
	}
	return c.cache.waitFor(ctx, rev)
}
