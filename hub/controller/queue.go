package controller

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// queue is the innermost queue of a controller: client-go's workqueue.Typed semantics (a key queued once however
// often it is added, never handed to two workers at once, queued again when added while a worker holds it), without
// what its sets keep for good. A Go map never gives back its buckets: client-go's dirty set keeps the size of the
// longest burst it ever held (the initial list of every object, and a fleet's arrival: 10,000 new Seeds and Shoots and
// what the loops add for them), one entry per object and controller, for as long as the hub runs — about 19 MB of the
// hub's live heap at 10,000 agents (docs/benchmarks.md). Here a set that runs empty after holding many keys is let go
// of, as the fifo lets go of its array. client-go's delaying and rate-limiting queues wrap it.
//
// The hub registers no work queue metrics provider, so client-go's queue reported none either.
type queue struct {
	mu           sync.Mutex
	cond         sync.Cond
	order        fifo
	dirty        keySet // queued or added again while processed
	processing   keySet // held by a worker
	shuttingDown bool
	drain        bool
}

var _ workqueue.TypedInterface[Key] = (*queue)(nil)

func newQueue() *queue {
	q := &queue{}
	q.cond.L = &q.mu
	return q
}

// Add queues k unless it is queued already; a key a worker holds is queued when the worker is done with it.
func (q *queue) Add(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown || q.dirty.has(k) {
		return
	}
	q.dirty.insert(k)
	if q.processing.has(k) {
		return
	}
	q.order.Push(k)
	q.cond.Signal()
}

// Len is the number of keys waiting for a worker.
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.order.Len()
}

// Get blocks until a key is queued or the queue shuts down (shutdown true); the caller calls Done with the key.
func (q *queue) Get() (Key, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.order.Len() == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if q.order.Len() == 0 {
		return Key{}, true
	}
	k := q.order.Pop()
	q.processing.insert(k)
	q.dirty.remove(k)
	return k, false
}

// Done ends a worker's hold on k and queues it again if it was added meanwhile.
func (q *queue) Done(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.processing.remove(k)
	if q.dirty.has(k) {
		q.order.Push(k)
		q.cond.Signal()
	} else if q.processing.len() == 0 {
		q.cond.Signal() // a draining ShutDownWithDrain waits for this
	}
}

// ShutDown ignores keys added from now on; workers get the keys still queued, then shutdown.
func (q *queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drain = false
	q.shuttingDown = true
	q.cond.Broadcast()
}

// ShutDownWithDrain is ShutDown that also waits until the workers are done with every key they hold (or ShutDown is
// called).
func (q *queue) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drain = true
	q.shuttingDown = true
	q.cond.Broadcast()
	for q.processing.len() != 0 && q.drain {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// fifo is the order of a controller's queue (queue): a slice, as in client-go's queue, except that it lets go of its
// array when it runs empty. client-go's keeps the array of its longest burst (the initial list of every object, and at
// a fleet's connect every Seed and Shoot again) for as long as the queue never grows past it: one Key per object and
// controller, for good.
type fifo []Key

// Push appends k.
func (q *fifo) Push(k Key) { *q = append(*q, k) }

// Len is the number of keys queued.
func (q *fifo) Len() int { return len(*q) }

// Pop takes the first key.
func (q *fifo) Pop() Key {
	k := (*q)[0]
	if len(*q) == 1 {
		*q = nil
		return k
	}
	(*q)[0] = Key{} // the array keeps its slots until it is let go of; the key's strings need not stay
	*q = (*q)[1:]
	return k
}

// keySetKeep is the most keys a set may have held and still keep its map as it shrinks: a few workers' keys and small
// bursts reuse it, a burst of a collection does not stay.
const keySetKeep = 256

// keySet is a set of keys whose map is let go of when the set shrinks to a sixteenth of the most keys it held, once
// that was more than keySetKeep (what is left is copied into a new map): a set that never runs quite empty — a
// controller that always has a key or two queued — does not keep its burst either. The copies cost at most one
// insertion per fifteen removals.
type keySet struct {
	m    map[Key]struct{}
	peak int // the most keys m has held
}

func (s *keySet) has(k Key) bool { _, ok := s.m[k]; return ok }

func (s *keySet) len() int { return len(s.m) }

func (s *keySet) insert(k Key) {
	if s.m == nil {
		s.m = map[Key]struct{}{}
	}
	s.m[k] = struct{}{}
	s.peak = max(s.peak, len(s.m))
}

func (s *keySet) remove(k Key) {
	delete(s.m, k)
	if s.peak <= keySetKeep || len(s.m) > s.peak/16 {
		return
	}
	if len(s.m) == 0 {
		s.m, s.peak = nil, 0
		return
	}
	m := make(map[Key]struct{}, len(s.m))
	for k := range s.m {
		m[k] = struct{}{}
	}
	s.m, s.peak = m, len(m)
}
