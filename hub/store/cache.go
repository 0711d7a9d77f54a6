package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Tunables of the watch cache.
const (
	listPageSize     = 1000            // keys per etcd range request when (re)listing
	freshTimeout     = 5 * time.Second // how long a read waits for the cache to catch up
	bookmarkInterval = time.Second
	// progressNudge is how long a waiting reader lets events bring the cache forward before it asks etcd for a
	// progress notification.
	progressNudge   = 20 * time.Millisecond
	maxWatchBackoff = 5 * time.Second
)

// entry is one cached object. obj is immutable and shared; it is replaced, never modified.
type entry struct {
	key string // object key: "<namespace>/<name>" or "<name>"
	obj Object
	// encoded memoizes a serialization of obj (see Collection.CachedEncoding); it belongs to the object it names.
	encoded atomic.Pointer[encoding]
}

// encoding is one serialization of one cached object, and what was derived from it (CachedDerivedEncoding).
type encoding struct {
	obj Object
	// data is obj's serialization; nil while there is none yet, when the encoding only names answered.
	data    []byte
	derived atomic.Pointer[any]
	// answered is the metadata of the result of the write that stored obj, when that write was this hub's and is
	// answered encoded (WithEncodedAnswer): CachedEncoding of that result is obj's.
	answered weak.Pointer[metav1.ObjectMeta]
}

// answers reports whether obj, not the cached state, is the result of the write that stored m.obj (answered): the
// same message type and revision, so the same content while the result is unchanged.
func (m *encoding) answers(obj Object) bool {
	md := obj.GetMetadata()
	return md != nil && m.answered.Value() == md && md.GetResourceVersion() == m.obj.GetMetadata().GetResourceVersion() &&
		obj.ProtoReflect().Descriptor() == m.obj.ProtoReflect().Descriptor()
}

// cache is the watch cache of one resource: the objects at revision rev, sorted by key, the secondary indexes, the
// recent history and the watchers fed from it. It is filled by one etcd watch (run) and read under mu.
type cache struct {
	c   *Collection
	log *slog.Logger

	mu       sync.RWMutex
	items    map[string]*entry
	sorted   []*entry                                // by key, for ordered and namespace-ranged lists
	indexes  map[string]map[string]map[string]*entry // index → value → key → entry
	history  history
	watchers map[*watcher]struct{}

	// rev is the revision the cache reflects: every event up to it is applied. Written under mu, read without.
	rev atomic.Int64
	// applying is the last revision of the batch being applied, stored before the batch takes its writes' answers:
	// a write that remembers its answer after the batch looked for it sees that the cache has it (answered).
	applying atomic.Int64
	// changed is closed and replaced whenever rev moves, to wake readers waiting for a revision.
	changed atomic.Pointer[chan struct{}]
	// backfilled is closed when the history of the revisions before the store opened is loaded (or given up).
	backfilled chan struct{}
	// beforeApply, when set (tests only), runs before each batch of events is applied.
	beforeApply atomic.Pointer[func()]
	// whileApplying, when set (tests only), runs after a batch's events are applied, before the revision moves.
	whileApplying atomic.Pointer[func()]
}

func newCache(c *Collection) *cache {
	ch := &cache{
		c:          c,
		log:        c.store.log.With("resource", c.gr.String()),
		items:      map[string]*entry{},
		watchers:   map[*watcher]struct{}{},
		backfilled: make(chan struct{}),
	}
	ch.history.capacity, ch.history.maxAge = c.store.cfg.WatchWindow, c.store.cfg.WatchWindowAge
	wake := make(chan struct{})
	ch.changed.Store(&wake)
	return ch
}

// watchContext puts all cache watches of a client on one gRPC watch stream, separate from other users of the client,
// so that one progress request reaches them all.
func watchContext(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "trellis-watch", "cache")
}

// list loads the resource's current state from etcd and replaces the cache's state with it. Watchers of a previous
// state are ended with an Expired error: the history they would resume from is gone.
func (ch *cache) list(ctx context.Context) error {
	var (
		items  map[string]*entry
		sorted []*entry
		rev    int64
		err    error
	)
	for attempt := 0; ; attempt++ {
		items, sorted, rev, err = ch.load(ctx)
		// The revision of the first page may be compacted before the last page is read; start over.
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 3 {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	indexes := map[string]map[string]map[string]*entry{}
	for name := range ch.c.res.Indexes {
		indexes[name] = map[string]map[string]*entry{}
	}

	ch.mu.Lock()
	ch.items, ch.sorted, ch.indexes = items, sorted, indexes
	for _, e := range sorted {
		ch.index(e, true)
	}
	ch.history.reset(rev)
	for w := range ch.watchers {
		w.terminate(apierrors.NewResourceExpired(fmt.Sprintf("the watch cache of %s was re-listed at revision %d; list again", ch.c.gr, rev)))
		delete(ch.watchers, w)
	}
	ch.setRev(rev)
	ch.mu.Unlock()
	ch.c.answers.reset()
	ch.wake()
	return nil
}

// load reads every key of the resource at the current revision, in pages.
func (ch *cache) load(ctx context.Context) (map[string]*entry, []*entry, int64, error) {
	items := map[string]*entry{}
	var sorted []*entry
	var rev int64
	key, end := ch.c.prefix, clientv3.GetPrefixRangeEnd(ch.c.prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := ch.c.store.client.Get(ctx, key, opts...)
		if err != nil {
			return nil, nil, 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key[len(ch.c.prefix):])
			obj, err := ch.c.decode(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				ch.log.Error("skipping undecodable object", "key", string(kv.Key), "err", err)
				continue
			}
			e := &entry{key: k, obj: obj}
			items[k] = e
			sorted = append(sorted, e)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return items, sorted, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

var errCompacted = errors.New("watch revision compacted")

// run keeps the cache current until ctx ends: it watches from the cache's revision, resumes after errors and
// re-lists when the revision it needs was compacted.
func (ch *cache) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		err := ch.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errCompacted) {
			ch.log.Warn("watch revision compacted; re-listing", "rev", ch.rev.Load())
			if err = ch.list(ctx); err == nil {
				backoff = 50 * time.Millisecond
				continue
			}
		}
		ch.log.Warn("watch ended; resuming", "rev", ch.rev.Load(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

// trimHistory drops the history's events older than its maxAge (history.trim), when there are any.
func (ch *cache) trimHistory() {
	now := time.Now().UnixNano()
	ch.mu.RLock()
	stale := ch.history.expired(now)
	ch.mu.RUnlock()
	if !stale {
		return
	}
	ch.mu.Lock()
	ch.history.trim(now)
	ch.mu.Unlock()
}

// watch applies the events after the cache's revision until the watch fails or ctx ends. It also sends bookmarks.
func (ch *cache) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(watchContext(ctx))
	defer cancel()
	// The watch starts at the cache's revision, not after it: etcd answers progress requests only when every watch
	// of the stream has reached its start revision, and a watch starting at a revision etcd has not reached yet would
	// hold back the progress of all caches until the next write. apply skips the events the cache already has.
	wch := ch.c.store.client.Watch(wctx, ch.c.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(ch.rev.Load()), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	ticker := time.NewTicker(bookmarkInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			ch.bookmark()
			ch.trimHistory()
		case resp, ok := <-wch:
			switch {
			case !ok:
				return errors.New("etcd watch channel closed")
			case resp.CompactRevision != 0:
				return errCompacted
			case resp.Err() != nil:
				return resp.Err()
			case resp.IsProgressNotify():
				ch.progressTo(resp.Header.Revision)
			case len(resp.Events) > 0:
				ch.apply(resp.Events)
			}
		}
	}
}

// decodedEvent is an etcd event with its value decoded outside the cache lock.
type decodedEvent struct {
	key    string // object key
	rev    int64
	delete bool
	obj    Object // new state of a put; nil if undecodable
	// prevKv is the state a delete removed, decoded (under the lock) only if the cache lacks the key: the cache's
	// own object is that state.
	prevKv *mvccpb.KeyValue
	// prevEnc is PrevKv as stored: the history keeps the superseded state so (history.supersede).
	prevEnc stored
}

// apply brings the cache forward by a batch of etcd events and hands them to the watchers. Events at or below the
// cache's revision are in its state already and skipped. Only run calls apply, so the revision cannot move between
// the check and the update.
func (ch *cache) apply(evs []*clientv3.Event) {
	batch := make([]decodedEvent, 0, len(evs))
	applied := ch.rev.Load()
	for _, ev := range evs {
		if ev.Kv.ModRevision <= applied {
			continue
		}
		full := string(ev.Kv.Key)
		d := decodedEvent{key: full[len(ch.c.prefix):], rev: ev.Kv.ModRevision}
		if ev.Type == mvccpb.DELETE {
			d.delete = true
		} else {
			obj, err := ch.c.decode(full, ev.Kv.Value, ev.Kv.ModRevision)
			if err != nil {
				ch.log.Error("undecodable object in watch; dropping it from the cache", "key", full, "err", err)
				d.delete = true
			}
			d.obj = obj
		}
		if d.delete {
			d.prevKv = ev.PrevKv
		}
		d.prevEnc = storedOf(ev.PrevKv)
		batch = append(batch, d)
	}

	if f := ch.beforeApply.Load(); f != nil {
		(*f)()
	}
	ch.mu.Lock()
	last := ch.rev.Load()
	if len(batch) > 0 {
		ch.applying.Store(batch[len(batch)-1].rev)
	}
	now := time.Now().UnixNano()
	for _, d := range batch {
		last = max(last, d.rev)
		// Taken under the lock: an answer encoded until the write is applied gives the entry its encoding.
		answer := ch.c.answers.take(d.key, d.rev)
		old := ch.items[d.key]
		var ev event
		switch {
		case d.delete:
			var prev Object
			if old != nil {
				prev = old.obj
				ch.remove(old)
			} else if d.prevKv != nil {
				prev, _ = ch.c.decode(string(d.prevKv.Key), d.prevKv.Value, d.prevKv.ModRevision)
			}
			if prev == nil {
				continue
			}
			ev = event{typ: Deleted, key: d.key, rev: d.rev, obj: ch.c.withRevision(prev, d.rev), prev: prev}
		case old == nil:
			e := &entry{key: d.key, obj: d.obj}
			e.adopt(answer)
			ch.insert(e)
			ev = event{typ: Added, key: d.key, rev: d.rev, obj: d.obj}
		default:
			ch.index(old, false)
			ev = event{typ: Modified, key: d.key, rev: d.rev, obj: d.obj, prev: old.obj}
			old.obj = d.obj
			old.adopt(answer)
			ch.index(old, true)
		}
		ev.at = now
		ch.history.add(ev)
		ch.dispatch(&ev)
		ch.history.supersede(d.key, d.prevEnc)
	}
	if f := ch.whileApplying.Load(); f != nil {
		(*f)()
	}
	ch.setRev(last)
	ch.mu.Unlock()
	ch.wake()
}

// answered makes the entry of key, when its state is the one written at rev, name meta's object, the write's
// result, as answered (encoding.answered), keeping an encoding made already.
func (ch *cache) answered(key string, rev int64, meta weak.Pointer[metav1.ObjectMeta]) {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	e := ch.items[key]
	if e == nil || revisionOf(e.obj) != rev {
		return
	}
	m := e.encoded.Load()
	n := &encoding{obj: e.obj, answered: meta}
	if m != nil && m.obj == e.obj {
		n.data = m.data
		n.derived.Store(m.derived.Load())
	}
	e.encoded.CompareAndSwap(m, n)
}

// adopt gives e, whose state a write of this hub just stored, the encoding of the write's answer, or what names the
// answer when it was not encoded yet; nothing when a is nil.
func (e *entry) adopt(a *answer) {
	if a == nil {
		return
	}
	e.encoded.Store(&encoding{obj: e.obj, data: a.data, answered: a.meta})
}

// progressTo records that etcd has delivered every event up to rev.
func (ch *cache) progressTo(rev int64) {
	ch.mu.Lock()
	moved := rev > ch.rev.Load()
	if moved {
		ch.setRev(rev)
	}
	ch.mu.Unlock()
	if moved {
		ch.wake()
	}
}

// setRev moves the revision; mu must be held.
func (ch *cache) setRev(rev int64) {
	if rev > ch.applying.Load() {
		ch.applying.Store(rev) // a relist's or a progress notification's revision
	}
	ch.rev.Store(rev)
	ch.c.store.observe(rev)
}

// wake releases readers waiting for the revision to move.
func (ch *cache) wake() {
	next := make(chan struct{})
	old := ch.changed.Swap(&next)
	close(*old)
}

// waitFor waits until the cache has reached rev, at most freshTimeout.
func (ch *cache) waitFor(ctx context.Context, rev int64) error {
	if ch.rev.Load() >= rev {
		return nil
	}
	deadline := time.NewTimer(freshTimeout)
	defer deadline.Stop()
	// Revisions written to other resources reach this cache only through progress notifications; ask for them when
	// events do not bring the cache forward soon.
	nudge := time.NewTicker(progressNudge)
	defer nudge.Stop()
	for {
		wake := ch.changed.Load()
		if ch.rev.Load() >= rev {
			return nil
		}
		select {
		case <-*wake:
		case <-nudge.C:
			ch.c.store.progress.kick()
		case <-deadline.C:
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rev, ch.rev.Load()), 1)
		case <-ctx.Done():
			return ch.c.internal("wait for cache", ctx.Err())
		}
	}
}

// get returns the cached object of namespace/name or nil.
func (ch *cache) get(namespace, name string) Object {
	_, obj := ch.entry(namespace, name)
	return obj
}

// entry returns the cache's entry of namespace/name and its object, read under the lock (apply replaces an entry's
// object), or nil. The key is built on the stack (objectKey's concatenation allocated on every lookup; a map index by
// a []byte conversion does not): lists served from the memoized encodings look up every item twice.
func (ch *cache) entry(namespace, name string) (*entry, Object) {
	var buf [128]byte
	var e *entry
	ch.mu.RLock()
	switch {
	case namespace == "":
		e = ch.items[name]
	case len(namespace)+1+len(name) <= len(buf):
		k := append(append(append(buf[:0], namespace...), '/'), name...)
		e = ch.items[string(k)]
	default:
		e = ch.items[objectKey(namespace, name)]
	}
	var obj Object
	if e != nil {
		obj = e.obj
	}
	ch.mu.RUnlock()
	return e, obj
}

// keyedObject is an object with its cache key, as read under the cache's lock.
type keyedObject struct {
	key string
	obj Object
}

// byIndex returns the objects whose index function gave value.
func (ch *cache) byIndex(index, value string) []keyedObject {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	set := ch.indexes[index][value]
	out := make([]keyedObject, 0, len(set))
	for _, e := range set {
		out = append(out, keyedObject{key: e.key, obj: e.obj})
	}
	return out
}

func (ch *cache) countByIndex(index, value string) int {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	return len(ch.indexes[index][value])
}

// insert adds a new entry; mu must be held for writing.
func (ch *cache) insert(e *entry) {
	ch.items[e.key] = e
	i, _ := slices.BinarySearchFunc(ch.sorted, e.key, compareEntryKey)
	ch.sorted = slices.Insert(ch.sorted, i, e)
	ch.index(e, true)
}

// remove drops an entry; mu must be held for writing.
func (ch *cache) remove(e *entry) {
	delete(ch.items, e.key)
	if i, ok := slices.BinarySearchFunc(ch.sorted, e.key, compareEntryKey); ok {
		ch.sorted = slices.Delete(ch.sorted, i, i+1)
	}
	ch.index(e, false)
}

func compareEntryKey(e *entry, key string) int { return strings.Compare(e.key, key) }

// index adds e to or removes it from the secondary indexes, by the values of its current object.
func (ch *cache) index(e *entry, add bool) {
	for name, fn := range ch.c.res.Indexes {
		byValue := ch.indexes[name]
		for _, v := range fn(e.obj) {
			set := byValue[v]
			if add {
				if set == nil {
					set = map[string]*entry{}
					byValue[v] = set
				}
				set[e.key] = e
				continue
			}
			delete(set, e.key)
			if len(set) == 0 {
				delete(byValue, v)
			}
		}
	}
}

// selected returns the entries pred may match in namespace ("" for all): the one object its field selector names,
// or the namespace's range; mu must be held.
func (ch *cache) selected(namespace string, pred predicate) []*entry {
	key, ok := pred.single(ch.c.res.Namespaced, namespace)
	if !ok {
		return ch.rangeOf(namespace)
	}
	if e := ch.items[key]; e != nil {
		return []*entry{e}
	}
	return nil
}

// rangeOf returns the sorted entries of a namespace (all entries for ""); mu must be held.
func (ch *cache) rangeOf(namespace string) []*entry {
	if namespace == "" {
		return ch.sorted
	}
	// The namespace's keys lie in ["<ns>/", "<ns>0"): '0' follows '/'.
	lo, _ := slices.BinarySearchFunc(ch.sorted, namespace+"/", compareEntryKey)
	hi, _ := slices.BinarySearchFunc(ch.sorted, namespace+"0", compareEntryKey)
	return ch.sorted[lo:hi]
}
