package store

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Backfill. A cache starts with the current state and an empty history, so a watch from a revision before the
// store opened (a client reconnecting after a hub restart) would get 410 Expired and re-list. To spare that, the
// cache fills its history in the background from etcd's own history: the events of the last WatchWindow revisions,
// read by a watch with previous values. Watches from a revision the backfill will cover wait for it (bounded).

// backfillWait bounds how long a watch waits for the backfill before answering Expired.
const backfillWait = 5 * time.Second

// start fills the cache with the current state for Register and returns its revision.
func (ch *cache) start(ctx context.Context) (int64, error) {
	if err := ch.list(ctx); err != nil {
		close(ch.backfilled)
		return 0, err
	}
	return ch.rev.Load(), nil
}

// backfill adds the events of the revisions (cur-WatchWindow, cur] to the history; cur is the revision start listed
// at. It closes ch.backfilled when done, whatever the outcome.
func (ch *cache) backfill(ctx context.Context, cur int64) {
	defer close(ch.backfilled)
	from := max(cur-int64(ch.c.store.cfg.WatchWindow), 1)
	if from >= cur {
		return
	}
	evs, oldest, ok := ch.readHistory(ctx, from, cur)
	if !ok {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.history.oldest != cur {
		return // re-listed meanwhile: this history belongs to an older state
	}
	ch.shareWithItems(evs)
	ch.history.prepend(evs, oldest)
}

// shareWithItems has the backfilled events hold the cache's own objects where they are the same state (the same key
// and resourceVersion); every other state stays encoded, as the history filled live keeps superseded states. It runs
// under ch.mu.
func (ch *cache) shareWithItems(evs []event) {
	for i := range evs {
		ev := &evs[i]
		if ev.typ == Deleted {
			continue
		}
		if e := ch.items[ev.key]; e != nil && e.obj.GetMetadata().GetResourceVersion() == strconv.FormatInt(ev.objEnc.rev, 10) {
			ev.obj, ev.objEnc = e.obj, stored{}
		}
	}
}

// readHistory returns the events of the resource in (from, to] and the revision after which they are complete.
func (ch *cache) readHistory(ctx context.Context, from, to int64) (evs []event, oldest int64, ok bool) {
	wctx, cancel := context.WithCancel(watchContext(ctx))
	defer cancel()
	wch := ch.c.store.client.Watch(wctx, ch.c.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	oldest = from
	// The revision of the state each key was left in by the events read so far: the previous value of its next event
	// is that state, checked once for both events.
	latest := map[string]int64{}
	// Without events beyond to, only a progress notification says that everything up to it was delivered.
	nudge := time.NewTicker(progressNudge)
	defer nudge.Stop()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, 0, false
		case <-timeout.C:
			ch.log.Warn("history backfill gave up", "from", from, "to", to)
			return nil, 0, false
		case <-nudge.C:
			ch.c.store.progress.kick()
		case resp, open := <-wch:
			switch {
			case !open || resp.Canceled && resp.CompactRevision == 0:
				return nil, 0, false
			case resp.CompactRevision != 0:
				// Part of the window is compacted: take what etcd still has.
				if resp.CompactRevision >= to {
					return nil, 0, false
				}
				return ch.readHistory(ctx, resp.CompactRevision, to)
			case resp.Err() != nil:
				return nil, 0, false
			case resp.IsProgressNotify():
				if resp.Header.Revision >= to {
					return evs, oldest, true
				}
			}
			for _, e := range resp.Events {
				rev := e.Kv.ModRevision
				if rev > to {
					return evs, oldest, true
				}
				ev, good := ch.historyEvent(e, latest)
				if !good {
					// An event that cannot be rebuilt cuts the history: resuming from before it is impossible.
					evs, oldest = evs[:0], rev
					clear(latest)
					continue
				}
				if ev.typ == Deleted {
					delete(latest, ev.key)
				} else {
					latest[ev.key] = ev.rev
				}
				evs = append(evs, ev)
			}
			// etcd does not split a revision's events across responses: after an event at to, nothing is missing.
			if n := len(resp.Events); n > 0 && resp.Events[n-1].Kv.ModRevision == to {
				return evs, oldest, true
			}
		}
	}
}

// historyEvent rebuilds a cache event from an etcd event with its previous value, the states kept encoded; latest
// holds the revision of each key's state after the events before it, whose decoding was checked then. A state that
// does not decode makes the event one that cannot be rebuilt.
func (ch *cache) historyEvent(e *clientv3.Event, latest map[string]int64) (event, bool) {
	full := string(e.Kv.Key)
	ev := event{key: full[len(ch.c.prefix):], rev: e.Kv.ModRevision, prevEnc: storedOf(e.PrevKv)}
	decodes := func(s stored) bool {
		_, err := ch.c.decode(full, s.value, s.rev)
		return err == nil
	}
	if ev.prevEnc.value != nil && latest[ev.key] != ev.prevEnc.rev && !decodes(ev.prevEnc) {
		return ev, false
	}
	if e.Type == mvccpb.DELETE {
		if ev.prevEnc.value == nil {
			return ev, false
		}
		ev.typ, ev.objEnc = Deleted, stored{value: ev.prevEnc.value, rev: ev.rev}
		return ev, true
	}
	if ev.objEnc = storedOf(e.Kv); ev.objEnc.value == nil || !decodes(ev.objEnc) {
		return ev, false
	}
	ev.typ = Modified
	if ev.prevEnc.value == nil {
		ev.typ = Added
	}
	return ev, true
}

// prepend puts older events before the history's, keeping the newest capacity events; every event after oldest
// must be in evs.
func (h *history) prepend(evs []event, oldest int64) {
	// The backfilled events count as applied when the first event the cache applied itself was (now, when there is
	// none), so that the history stays in the order of its times (trim).
	at := time.Now().UnixNano()
	if len(h.buf) > 0 {
		at = h.at(0).at
	}
	for i := range evs {
		evs[i].at = at
	}
	all := make([]event, 0, len(evs)+len(h.buf))
	all = append(all, evs...)
	for i := range h.buf {
		all = append(all, *h.at(i))
	}
	if over := len(all) - h.capacity; over > 0 {
		oldest = all[over-1].rev
		all = all[over:]
	}
	h.buf, h.start, h.oldest = all, 0, oldest
}

// oldest is the revision after which the history is complete.
func (ch *cache) oldest() int64 {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	return ch.history.oldest
}

// waitBackfill waits until the backfill is done, at most backfillWait.
func (ch *cache) waitBackfill(ctx context.Context) error {
	t := time.NewTimer(backfillWait)
	defer t.Stop()
	select {
	case <-ch.backfilled:
	case <-t.C:
	case <-ctx.Done():
		return ch.c.internal("watch", ctx.Err())
	}
	return nil
}
