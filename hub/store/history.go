package store

import "sort"

// event is one change of the cache, kept in the history and handed to watchers.
type event struct {
	typ  EventType // Added, Modified or Deleted
	key  string    // object key
	rev  int64
	obj  Object // state after the change; for Deleted the last state with the deletion's resourceVersion
	prev Object // state before the change; nil for Added
}

// history is a ring of the last capacity events. Every event with a revision above oldest is in it, so a watch can
// resume from any revision >= oldest.
type history struct {
	capacity int
	buf      []event // grows to capacity, then wraps
	start    int     // index of the oldest event once wrapped
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

func (h *history) at(i int) *event { return &h.buf[(h.start+i)%len(h.buf)] }

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
