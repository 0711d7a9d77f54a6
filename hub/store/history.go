package store

import (
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// event is one change of the cache, kept in the history and handed to watchers. A state that is the cache's current
// object is held decoded (shared with the cache); a superseded state, which only the history still refers to, is
// held as etcd stores it and decoded only for a watch that replays it (objOf, prevOf). With 10,000 agents each
// writing its Seed and Shoot, that keeps a few KiB of encoded bytes per superseded state instead of the decoded
// object, several times larger.
type event struct {
	typ  EventType // Added, Modified or Deleted
	key  string    // object key
	rev  int64
	at   int64  // when the cache applied it (or backfilled it), in Unix nanoseconds
	obj  Object // state after the change (for Deleted the last state with the deletion's resourceVersion); nil: objEnc
	prev Object // state before the change; nil for Added, or when it is held in prevEnc

	objEnc, prevEnc stored
}

// stored is an object's state as etcd holds it (encrypted where the resource is), with the revision it was written
// at; the zero value holds nothing.
type stored struct {
	value []byte
	rev   int64
}

// storedOf keeps kv's value. It is not copied: the etcd client decodes each watch response with protobuf-go, which
// gives every bytes field an array of its own (gRPC's receive buffer is pooled and reused, never aliased), so the
// value keeps nothing else of the response alive.
func storedOf(kv *mvccpb.KeyValue) stored {
	if kv == nil || len(kv.Value) == 0 {
		return stored{}
	}
	return stored{value: kv.Value, rev: kv.ModRevision}
}

// history is a ring of the last capacity events. Every event with a revision above oldest is in it, so a watch can
// resume from any revision >= oldest.
type history struct {
	capacity int
	maxAge   time.Duration // trim drops the events older than this
	buf      []event       // grows to capacity, then wraps
	start    int           // index of the oldest event once wrapped
	oldest   int64
}

func (h *history) reset(rev int64) {
	h.buf, h.start, h.oldest = nil, 0, rev
}

func (h *history) add(e event) {
	if len(h.buf) < h.capacity {
		h.buf = append(h.buf, e)
		return
	}
	// Evict the oldest: resuming from before its revision is no longer possible.
	h.oldest = h.buf[h.start].rev
	h.buf[h.start] = e
	h.start = (h.start + 1) % len(h.buf)
}

// trim drops the events applied before now less maxAge, the oldest first, and gives their slots back: a watch
// resumes from any revision since the newest one dropped.
func (h *history) trim(now int64) {
	if !h.expired(now) {
		return
	}
	n, cutoff := len(h.buf), now-int64(h.maxAge)
	i := sort.Search(n, func(i int) bool { return h.at(i).at >= cutoff })
	h.oldest = h.at(i - 1).rev
	kept := make([]event, n-i)
	for j := range kept {
		kept[j] = *h.at(i + j)
	}
	h.buf, h.start = kept, 0
}

// expired reports whether the oldest event was applied before now less maxAge: whether trim has work.
func (h *history) expired(now int64) bool {
	return len(h.buf) > 0 && h.at(0).at < now-int64(h.maxAge)
}

func (h *history) at(i int) *event { return &h.buf[(h.start+i)%len(h.buf)] }

// supersede records, after the newest event (of key) was handed to the live watchers, that the state before it,
// prev as etcd stored it, is now held by the history alone: the newest event and the event that wrote that state
// keep it encoded instead of decoded. A zero prev (etcd sent no previous value) changes nothing.
func (h *history) supersede(key string, prev stored) {
	if prev.value == nil || len(h.buf) == 0 {
		return
	}
	newest := h.at(len(h.buf) - 1)
	if newest.key != key || newest.prev == nil {
		return
	}
	newest.prev, newest.prevEnc = nil, prev
	if newest.typ == Deleted {
		newest.obj, newest.objEnc = nil, stored{value: prev.value, rev: newest.rev}
	}
	if e := h.find(key, prev.rev); e != nil && e.obj != nil {
		e.obj, e.objEnc = nil, prev
	}
}

// find returns the event of key at rev, nil if the history no longer (or never) held it.
func (h *history) find(key string, rev int64) *event {
	n := len(h.buf)
	i := sort.Search(n, func(i int) bool { return h.at(i).rev >= rev })
	for ; i < n && h.at(i).rev == rev; i++ {
		if e := h.at(i); e.key == key {
			return e
		}
	}
	return nil
}

// since returns the events with a revision above rev, oldest first; ok is false when some of them were evicted.
func (h *history) since(rev int64) (evs []*event, ok bool) {
	if rev < h.oldest {
		return nil, false
	}
	n := len(h.buf)
	i := sort.Search(n, func(i int) bool { return h.at(i).rev > rev })
	evs = make([]*event, 0, n-i)
	for ; i < n; i++ {
		evs = append(evs, h.at(i))
	}
	return evs, true
}
