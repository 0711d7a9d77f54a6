package controller

import (
	"context"
	"hash/maphash"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/store"
)

// Source feeds a controller with the changes of one collection.
type Source struct {
	// Collection is watched, in all namespaces.
	Collection *store.Collection
	// Map returns the keys a change of obj concerns (nil Map: the object's own key). It sees the object's new state,
	// or its last state when it was deleted; it must not modify obj.
	Map func(obj store.Object) []Key
	// Digest, when set, summarises what of an object matters; a modification that changes neither the digest nor
	// the mapped keys enqueues nothing. Deletions always enqueue. The source keeps a 64-bit hash of each object's
	// digest, not the string (a dozen sources on the busiest collections, tens of thousands of objects each): two
	// digests that differ are taken as equal with a chance of 2⁻⁶⁴ per change.
	Digest func(obj store.Object) string
}

// object names an object of the source's collection: what a source remembers objects by. It is a Key without the
// Resource, which is never set for the source's own objects: with tens of thousands of objects per collection and a
// dozen sources on the busiest ones, each byte of the map's entries counts (an entry is 64 bytes instead of 96).
type object struct{ namespace, name string }

// key is the Key of the object itself.
func (o object) key() Key { return Key{Namespace: o.namespace, Name: o.name} }

// seen is what a source remembers of an object: the keys its last state mapped to (nil: only the object's own key,
// which is the map's, so that the common case costs no slice per object), and the hash of its digest.
type seen struct {
	keys   []Key
	digest uint64
}

// digestSeed seeds the hashes of the sources' digests.
var digestSeed = maphash.MakeSeed()

// keysOf returns the keys e names for the object self.
func (e seen) keysOf(self Key) []Key {
	if e.keys == nil {
		return []Key{self}
	}
	return e.keys
}

// retryWatch is how long a source waits before it watches again after the store refused a watch.
const retryWatch = time.Second

// follow watches the collection until ctx ends and hands every concerned key to enqueue. A watch that ends resumes
// after the last revision seen; that revision is known only from the first bookmark on, since the initial state
// arrives in key order, not revision order. A watch that ends earlier, or whose revision fell out of the history,
// starts over from the current state (restart).
func (s Source) follow(ctx context.Context, clk clock.Clock, log *slog.Logger, enqueue func(Key)) {
	log = log.With("source", s.Collection.Resource().Resource)
	last := map[object]seen{}
	rv := "" // "" starts with the current state
	for ctx.Err() == nil {
		w, err := s.Collection.Watch(ctx, "", store.WatchOptions{ResourceVersion: rv, Bookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = s.restart(last, enqueue)
				continue
			}
			if ctx.Err() == nil {
				log.Warn("watch failed; retrying", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-clk.After(retryWatch):
			}
			continue
		}
		synced := rv != ""
		for ev := range w.Events() {
			switch ev.Type {
			case store.Error:
				synced = false // expired or ended: the next watch starts over
				continue
			case store.Bookmark:
				rv, synced = ev.Object.GetMetadata().GetResourceVersion(), true
				continue
			}
			if synced {
				rv = ev.Object.GetMetadata().GetResourceVersion()
			}
			s.handle(ev, last, enqueue)
		}
		w.Stop()
		if !synced && ctx.Err() == nil {
			rv = s.restart(last, enqueue)
		}
	}
}

// restart forgets what the source knew after its history ran out: everything it knew of is enqueued once (an object
// deleted meanwhile is never seen again), and the next watch starts from the current state.
func (s Source) restart(last map[object]seen, enqueue func(Key)) string {
	for o, e := range last {
		if e.keys == nil {
			enqueue(o.key())
		}
		for _, k := range e.keys {
			enqueue(k)
		}
	}
	clear(last)
	return ""
}

// handle enqueues the keys of one event: those of the new state and those of the previous one.
func (s Source) handle(ev store.Event, last map[object]seen, enqueue func(Key)) {
	md := ev.Object.GetMetadata()
	o := object{namespace: md.GetNamespace(), name: md.GetName()}
	self := o.key()
	cur := seen{} // keys nil: self alone
	if s.Map != nil {
		cur.keys = s.Map(ev.Object)
		if len(cur.keys) == 1 && cur.keys[0] == self {
			cur.keys = nil
		} else if cur.keys == nil {
			cur.keys = []Key{}
		}
	}
	prev, had := last[o]
	if ev.Type == store.Deleted {
		delete(last, o)
	} else {
		if s.Digest != nil {
			cur.digest = maphash.String(digestSeed, s.Digest(ev.Object))
		}
		if had && s.Digest != nil && cur.digest == prev.digest && (cur.keys == nil) == (prev.keys == nil) && slices.Equal(cur.keys, prev.keys) {
			return
		}
		last[o] = cur
	}
	keys := cur.keysOf(self)
	for _, k := range keys {
		enqueue(k)
	}
	if !had {
		return
	}
	for _, k := range prev.keysOf(self) {
		if !slices.Contains(keys, k) {
			enqueue(k)
		}
	}
}
