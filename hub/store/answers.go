package store

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// A write's answer and the cached state it stored are one state in two objects: a REST client gets the write's result
// as JSON, and the watch cache then holds the same state decoded from etcd's watch, which the first get, list or
// watch of it encoded again. For a request marked WithEncodedAnswer, the collection remembers each object its write
// returns (by its metadata's address, weakly: nothing is kept alive for it) with the revision it wrote, and
// CachedEncoding serves such an object as the cached state it stored: the answer's encoding is the cached state's
// memoized encoding, made once, whichever comes first (the answer before the cache applied the write: the encoding
// waits in answers and the cache takes it; the cache first: the answer encodes the cached state and memoizes it).
//
// This relies on what CachedEncoding already asks of its callers (an encoding depends on the object's content
// only) and on the write's result being unchanged when it is encoded: the API's servers answer with it as the store
// returned it (a conversion or a revealed credential is another object).

// answerKey is the context key of WithEncodedAnswer.
type answerKey struct{}

// WithEncodedAnswer marks ctx as a request whose writes' results are answered encoded through CachedEncoding (the
// REST gateway's requests): the collection remembers them, so that the encoding of the answer is the written state's
// memoized encoding too. Such a request hands over the objects it creates and only reads what its writes return: a
// create's result then shares all but the metadata with the request's object, a deletion's result shares the
// fields of the deleted state (as a DELETED event's object does) instead of being a deep copy, and a deletion that
// only marks the object (finalizers hold it) writes and returns a copy of its metadata sharing the rest with the
// cached state.
func WithEncodedAnswer(ctx context.Context) context.Context {
	return context.WithValue(ctx, answerKey{}, true)
}

func encodedAnswer(ctx context.Context) bool {
	v, _ := ctx.Value(answerKey{}).(bool)
	return v
}

// answer is a write's result that the cache has not applied yet.
type answer struct {
	rev  int64
	meta weak.Pointer[metav1.ObjectMeta] // the result's metadata: identifies the result
	data []byte                          // the result's encoding, when the answer was encoded first; under answers.mu
}

// answers are a collection's write results that the cache has not applied yet, by object key: at most one per key,
// the latest write's, and each only until the cache applies its revision (or a later one of its key).
type answers struct {
	n  atomic.Int64 // len(m): the cache skips the lock while it is 0
	mu sync.Mutex
	m  map[string]*answer
}

// put remembers the result whose metadata is meta, written to key at rev.
func (a *answers) put(key string, rev int64, meta *metav1.ObjectMeta) {
	w := &answer{rev: rev, meta: weak.Make(meta)}
	a.mu.Lock()
	if cur := a.m[key]; cur == nil || cur.rev < rev {
		if a.m == nil {
			a.m = map[string]*answer{}
		}
		a.m[key] = w
		a.n.Store(int64(len(a.m)))
	}
	a.mu.Unlock()
}

// answered remembers the result of a write WithEncodedAnswer: obj, written to key at rev. When the cache has applied
// the write already, its entry names the result at once; otherwise the cache takes the answer when it applies it.
func (c *Collection) answered(key string, rev int64, obj Object) {
	meta := c.shape.metaOf(obj)
	c.answers.put(key, rev, meta)
	// put stores answers.n before this load and the cache stores applying before take loads answers.n (both
	// sequentially consistent): either the cache's take sees the answer or this sees the batch that applies rev.
	if c.cache.applying.Load() < rev {
		return
	}
	// The cache applies or applied rev while the answer was put: take it back unless the cache took it, and name it
	// in the entry once the batch is applied (cache.answered waits for the cache's lock).
	if w := c.answers.take(key, rev); w != nil {
		c.cache.answered(key, rev, w.meta)
	}
}

// take returns the answer of the write of key at rev, which the cache applies now, and forgets it and any earlier
// one of key; nil when there is none.
func (a *answers) take(key string, rev int64) *answer {
	if a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.m[key]
	if w == nil || w.rev > rev {
		return nil
	}
	delete(a.m, key)
	a.n.Store(int64(len(a.m)))
	if w.rev != rev {
		return nil
	}
	return w
}

// find returns the answer that meta names, the metadata of a result written to key at rev; nil when the cache
// applied it already (or the result is no write's).
func (a *answers) find(key string, rev int64, meta *metav1.ObjectMeta) *answer {
	if a.n.Load() == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.m[key]
	if w == nil || w.rev != rev || w.meta.Value() != meta {
		return nil
	}
	return w
}

// encoded keeps data, the encoding of w's result, for the cache to take with the write, unless it took it already.
func (a *answers) encoded(key string, w *answer, data []byte) {
	a.mu.Lock()
	if a.m[key] == w {
		w.data = data
	}
	a.mu.Unlock()
}

// reset forgets every answer: the cache relisted, and what it applies next is not the writes' events.
func (a *answers) reset() {
	a.mu.Lock()
	clear(a.m)
	a.n.Store(0)
	a.mu.Unlock()
}

// A deletion answered encoded returns the deleted state at the deletion's resourceVersion (withRevision): the content
// of a state the cache held, whose encoding is often memoized already (a get, a list, a watch or the last write's
// answer made it). When the collection can revise an encoding's resourceVersion (Resource.Revised), the deletion
// keeps that encoding for its result, and the answer is the encoding revised instead of a new encoding of the whole
// object. The cache does not take these: the deleted state has no entry left to share an encoding with.

// deletions are the results of deletions answered encoded, by their metadata's address (weakly), with the memoized
// encoding of the state each deleted. Each is kept until its answer is encoded or the result is collected.
type deletions struct {
	n  atomic.Int64 // len(m): answerEncoding skips the lock while it is 0
	mu sync.Mutex
	m  map[weak.Pointer[metav1.ObjectMeta]][]byte
}

// put keeps data, the encoding of the state that a deletion's result, whose metadata is meta, carries.
func (d *deletions) put(meta *metav1.ObjectMeta, data []byte) {
	p := weak.Make(meta)
	d.mu.Lock()
	if d.m == nil {
		d.m = map[weak.Pointer[metav1.ObjectMeta]][]byte{}
	}
	d.m[p] = data
	d.n.Store(int64(len(d.m)))
	d.mu.Unlock()
	// A result whose answer is never encoded (the request failed after the deletion) takes its record with it.
	runtime.AddCleanup(meta, d.forget, p)
}

// take returns the encoding kept for the result whose metadata is meta, and forgets it; nil when there is none.
func (d *deletions) take(meta *metav1.ObjectMeta) []byte {
	if d.n.Load() == 0 || meta == nil {
		return nil
	}
	p := weak.Make(meta)
	d.mu.Lock()
	data := d.m[p]
	if data != nil {
		delete(d.m, p)
		d.n.Store(int64(len(d.m)))
	}
	d.mu.Unlock()
	return data
}

func (d *deletions) forget(p weak.Pointer[metav1.ObjectMeta]) {
	d.mu.Lock()
	delete(d.m, p)
	d.n.Store(int64(len(d.m)))
	d.mu.Unlock()
}

// deletionEncoding returns the encoding of obj when it is the result of a deletion answered encoded whose deleted
// state had a memoized encoding: that encoding revised to obj's resourceVersion.
func (c *Collection) deletionEncoding(obj Object) ([]byte, bool) {
	if c.deletions.n.Load() == 0 || obj.ProtoReflect().Descriptor() != c.shape.desc {
		return nil, false // nothing kept, or another kind sharing a result's metadata (a conversion)
	}
	md := obj.GetMetadata()
	data := c.deletions.take(md)
	if data == nil {
		return nil, false
	}
	return c.res.Revised(data, md.GetResourceVersion())
}
