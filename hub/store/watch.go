package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// EventType is the kind of a watch event, spelled as Kubernetes spells it.
type EventType string

// Watch event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
	Error    EventType = "ERROR"
)

// Event is one change seen by a watcher. Object is shared: do not modify it. A Bookmark's Object carries only
// metadata.resourceVersion. An Error event has Err (a StatusError) and no Object, and is the last event.
type Event struct {
	Type   EventType
	Object Object
	Err    error
}

// Watcher delivers events until Stop, the end of the Watch context, Close, or until it falls too far behind; in the
// last case a final Error event carries an Expired error and the client watches again.
type Watcher interface {
	Events() <-chan Event
	// Stop ends the watch and closes the channel; it returns when the channel is closed.
	Stop()
}

// WatchOptions select the events of a watch.
type WatchOptions struct {
	// ResourceVersion "" or "0" starts with ADDED events for the current state; any other value resumes after that
	// revision (410 Expired when it is older than the history kept). A revision the cache has not reached yet is
	// waited for, at most 5 s (then a Timeout error, as Kubernetes' "Too large resource version").
	ResourceVersion string
	Labels          labels.Selector
	Fields          fields.Selector
	// Bookmarks asks for a BOOKMARK event about every second while the watcher is idle.
	Bookmarks bool
	// InitialEventsEnd follows the ADDED events of the current state (ResourceVersion "" or "0") with a BOOKMARK
	// annotated k8s.io/initial-events-end=true, at the revision that state reflects: Kubernetes' watch-list
	// (sendInitialEvents=true), by which a client knows it has the whole state without a list.
	InitialEventsEnd bool
}

// watchBuffer is how many live events a watcher may have pending before it is ended as too slow.
const watchBuffer = 1000

// Watch starts a watch on the resource, in one namespace or ("") in all.
func (c *Collection) Watch(ctx context.Context, namespace string, o WatchOptions) (Watcher, error) {
	if err := c.checkNamespace(namespace); err != nil {
		return nil, err
	}
	pred, err := c.newPredicate(o.Labels, o.Fields)
	if err != nil {
		return nil, err
	}
	from := int64(-1) // initial state
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		from, err = strconv.ParseInt(o.ResourceVersion, 10, 64)
		if err != nil || from < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", o.ResourceVersion))
		}
	}
	if from < 0 {
		err = c.fresh(ctx)
	} else {
		err = c.cache.waitFor(ctx, from)
	}
	if err != nil {
		return nil, err
	}

	ch := c.cache
	if from >= 0 && from < ch.oldest() {
		// The history before the store opened may still be loading.
		if err := ch.waitBackfill(ctx); err != nil {
			return nil, err
		}
	}
	w := &watcher{
		ch:        ch,
		namespace: namespace,
		pred:      pred,
		bookmarks: o.Bookmarks,
		out:       make(chan Event),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		notify:    make(chan struct{}, 1),
	}
	ch.mu.Lock()
	if from < 0 {
		for _, e := range ch.selected(namespace, pred) {
			if pred.matches(e.obj) {
				w.queue = append(w.queue, queued{ev: Event{Type: Added, Object: e.obj}})
			}
		}
		if o.InitialEventsEnd {
			// The revision moves only under ch.mu, which is held: the state queued above is the state at rev.
			bm := ch.c.shape.newBookmark(ch.c.res.New, ch.rev.Load())
			ch.c.shape.metaOf(bm).Annotations = map[string]string{kmetav1.InitialEventsAnnotationKey: "true"}
			w.queue = append(w.queue, queued{ev: Event{Type: Bookmark, Object: bm}})
		}
	} else {
		evs, ok := ch.history.since(from)
		if !ok {
			oldest := ch.history.oldest
			ch.mu.Unlock()
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, oldest))
		}
		// The events are copied under the lock and converted by the watcher's goroutine (run): a state the history
		// keeps encoded is decoded there, not while the cache is locked.
		replay := make([]event, len(evs))
		for i, ev := range evs {
			replay[i] = *ev
			w.queue = append(w.queue, queued{replay: &replay[i]})
		}
	}
	ch.watchers[w] = struct{}{}
	ch.mu.Unlock()

	if err := c.store.goroutine(func(storeCtx context.Context) { w.run(ctx, storeCtx) }); err != nil {
		ch.removeWatcher(w)
		return nil, c.internal("watch", err)
	}
	return w, nil
}

// watcher is one client's watch: the cache queues events under its lock without blocking, and the watcher's
// goroutine forwards them to the client's channel.
type watcher struct {
	ch        *cache
	namespace string
	pred      predicate
	bookmarks bool

	out      chan Event
	done     chan struct{} // closed by Stop
	exited   chan struct{} // closed when run has returned and out is closed
	stopOnce sync.Once
	notify   chan struct{} // wakes run; capacity 1

	mu    sync.Mutex
	queue []queued
	ended bool  // no more events are queued
	final error // sent as an Error event after the queue when ended
	// live counts the live events queued or being sent; the initial state and the replay do not count.
	live atomic.Int64
}

// queued is an event waiting in a watcher's queue.
type queued struct {
	ev   Event
	live bool
	// replay, when set, is an event of the history to convert (and decode) before it is sent, in place of ev.
	replay *event
}

func (w *watcher) Events() <-chan Event { return w.out }

func (w *watcher) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
	<-w.exited
}

// run forwards queued events until the watcher is stopped, its context or the store ends, or it is terminated.
func (w *watcher) run(ctx, storeCtx context.Context) {
	defer close(w.exited)
	defer close(w.out)
	defer w.ch.removeWatcher(w)
	send := func(ev Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-w.done:
		case <-ctx.Done():
		case <-storeCtx.Done():
		}
		return false
	}
	for {
		w.mu.Lock()
		batch, ended, final := w.queue, w.ended, w.final
		w.queue = nil
		w.mu.Unlock()
		for _, q := range batch {
			ev := q.ev
			if q.replay != nil {
				var ok bool
				if ev, ok = w.convert(q.replay); !ok {
					continue
				}
			}
			if !send(ev) {
				return
			}
			if q.live {
				w.live.Add(-1)
			}
		}
		if ended {
			if final != nil {
				send(Event{Type: Error, Err: final})
			}
			return
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-w.notify:
		case <-w.done:
			return
		case <-ctx.Done():
			return
		case <-storeCtx.Done():
			return
		}
	}
}

func (w *watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// enqueue queues a live event without blocking. A watcher whose queue is full is terminated with an Expired error;
// enqueue then returns false and the cache forgets it.
func (w *watcher) enqueue(ev Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	if w.live.Load() >= watchBuffer {
		w.ended, w.queue = true, nil
		w.final = apierrors.NewResourceExpired(fmt.Sprintf(
			"watch of %s fell behind by more than %d events; watch again from the last resourceVersion received", w.ch.c.gr, watchBuffer))
		w.wake()
		return false
	}
	w.queue = append(w.queue, queued{ev: ev, live: true})
	w.live.Add(1)
	w.wake()
	return true
}

// terminate ends the watcher with a final error event.
func (w *watcher) terminate(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.ended, w.queue, w.final = true, nil, err
		w.wake()
	}
}

// idle reports whether nothing is waiting to be sent.
func (w *watcher) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue) == 0 && w.live.Load() == 0 && !w.ended
}

// convert turns a cache event into what this watcher sees, as Kubernetes' watch cache does: an object that starts
// matching the selectors is ADDED, one that stops matching is DELETED (its previous state at the event's revision).
func (w *watcher) convert(ev *event) (Event, bool) {
	if w.namespace != "" && namespaceOfKey(ev.key) != w.namespace {
		return Event{}, false
	}
	// Without a selector only whether there was a previous state matters: it is not decoded.
	var prev Object
	prevMatch := ev.prev != nil || ev.prevEnc.value != nil
	if prevMatch && !w.pred.everything() {
		prev = w.ch.prevOf(ev)
		prevMatch = prev != nil && w.pred.matches(prev)
	}
	if ev.typ == Deleted {
		if prevMatch {
			if obj := w.ch.objOf(ev); obj != nil {
				return Event{Type: Deleted, Object: obj}, true
			}
		}
		return Event{}, false
	}
	obj := w.ch.objOf(ev)
	if obj == nil {
		return Event{}, false
	}
	curMatch := w.pred.matches(obj)
	switch {
	case curMatch && prevMatch:
		return Event{Type: Modified, Object: obj}, true
	case curMatch:
		return Event{Type: Added, Object: obj}, true
	case prevMatch:
		return Event{Type: Deleted, Object: w.ch.c.withRevision(prev, ev.rev)}, true
	}
	return Event{}, false
}

// objOf returns the state after ev, decoding it where the history keeps it encoded; nil if it no longer decodes
// (logged: it did when it was written).
func (ch *cache) objOf(ev *event) Object { return ch.state(ev.key, ev.obj, ev.objEnc) }

// prevOf returns the state before ev (nil for Added), decoding it where the history keeps it encoded.
func (ch *cache) prevOf(ev *event) Object { return ch.state(ev.key, ev.prev, ev.prevEnc) }

func (ch *cache) state(key string, obj Object, enc stored) Object {
	if obj != nil || enc.value == nil {
		return obj
	}
	obj, err := ch.c.decode(ch.c.prefix+key, enc.value, enc.rev)
	if err != nil {
		ch.log.Error("a state in the watch history no longer decodes; its event is left out of a replay", "key", key, "err", err)
		return nil
	}
	return obj
}

// dispatch queues an event for every watcher it concerns; mu must be held for writing.
func (ch *cache) dispatch(ev *event) {
	for w := range ch.watchers {
		out, ok := w.convert(ev)
		if ok && !w.enqueue(out) {
			delete(ch.watchers, w)
		}
	}
}

// bookmark queues a BOOKMARK at the cache's revision for every idle watcher that asked for bookmarks.
func (ch *cache) bookmark() {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	rev := ch.rev.Load()
	var bm Object
	for w := range ch.watchers {
		if !w.bookmarks || !w.idle() {
			continue
		}
		if bm == nil {
			bm = ch.c.shape.newBookmark(ch.c.res.New, rev)
		}
		w.enqueue(Event{Type: Bookmark, Object: bm})
	}
}

func (ch *cache) removeWatcher(w *watcher) {
	ch.mu.Lock()
	delete(ch.watchers, w)
	ch.mu.Unlock()
}
