package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// usage keeps, from a list and watch of all shoots, how many shoots each seed has (Gardener's CalculateSeedUsage:
// spec.seedName, and status.seedName when it differs) and which shoots wait for this scheduler, so that a decision
// costs O(seeds) instead of a list of every shoot.
//
// It also holds reservations: a worker that decided on a seed reserves a place on it for the shoot before it binds,
// and the reservation counts as a shoot until the bind is observed (by the watch, a relist, or the bind's own result,
// whichever comes first: the shoot then counts in its place, never twice) or given up. Concurrent workers therefore
// see each other's binds in flight, so the least loaded seed and the capacity hold exactly, whatever the number of
// workers.
//
// States are applied by resourceVersion: a state older than the one recorded for the shoot is ignored, so the state
// a bind returned and the watch's events may arrive in any order. A deleted shoot leaves a tombstone (until the next
// relist) so that a late state of it is ignored too.
type usage struct {
	shoots *store.Collection
	clock  clock.Clock
	log    *slog.Logger
	// freed is called (from the watch goroutine, without locks held) when a seed lost a shoot: its capacity grew.
	freed func()

	mu       sync.Mutex
	entries  map[controller.Key]usageEntry
	count    map[string]int                     // shoots per seed
	reserved map[string]map[controller.Key]bool // binds in flight per seed, by shoot
	synced   chan struct{}                      // closed after the first list
	once     sync.Once
}

// usageEntry is what usage recorded of one shoot.
type usageEntry struct {
	rv      int64
	seeds   []string // the seeds the shoot counts for
	pending bool     // waits for this scheduler
	deleted bool     // tombstone
}

func newUsage(shoots *store.Collection, clk clock.Clock, log *slog.Logger) *usage {
	return &usage{shoots: shoots, clock: clk, log: log, freed: func() {}, entries: map[controller.Key]usageEntry{},
		count: map[string]int{}, reserved: map[string]map[controller.Key]bool{}, synced: make(chan struct{})}
}

// Pending reports whether a shoot waits for this scheduler: no spec.seedName, not being deleted, and
// spec.schedulerName unset or default-scheduler (Gardener's predicates).
func Pending(s *corev1beta1.Shoot) bool {
	return s.GetSpec().GetSeedName() == "" && s.GetMetadata().GetDeletionTimestamp() == nil &&
		(s.GetSpec().SchedulerName == nil || s.GetSpec().GetSchedulerName() == DefaultSchedulerName)
}

// seedsOf are the seeds a shoot counts for.
func seedsOf(s *corev1beta1.Shoot) []string {
	spec, status := s.GetSpec().GetSeedName(), s.GetStatus().GetSeedName()
	var out []string
	if spec != "" {
		out = append(out, spec)
	}
	if status != "" && status != spec {
		out = append(out, status)
	}
	return out
}

func revisionOf(o store.Object) int64 {
	rv, _ := strconv.ParseInt(o.GetMetadata().GetResourceVersion(), 10, 64)
	return rv
}

func keyOf(o store.Object) controller.Key {
	return controller.Key{Namespace: o.GetMetadata().GetNamespace(), Name: o.GetMetadata().GetName()}
}

// retryWatch is how long usage waits before it lists or watches again after the store refused.
const retryWatch = time.Second

// run lists and watches the shoots until ctx ends.
func (u *usage) run(ctx context.Context) {
	for ctx.Err() == nil {
		rv, err := u.relist(ctx)
		if err != nil {
			if ctx.Err() == nil {
				u.log.Warn("listing shoots failed; retrying", "err", err)
			}
			u.sleep(ctx, retryWatch)
			continue
		}
		u.once.Do(func() { close(u.synced) })
		u.watch(ctx, rv)
	}
}

func (u *usage) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-u.clock.After(d):
	}
}

// relist replaces what usage knows with the current state of all shoots and returns the list's revision.
func (u *usage) relist(ctx context.Context) (string, error) {
	res, err := u.shoots.List(ctx, "", store.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list shoots: %w", err)
	}
	entries := make(map[controller.Key]usageEntry, len(res.Items))
	count := map[string]int{}
	for _, o := range res.Items {
		e := entryOf(o.(*corev1beta1.Shoot))
		entries[keyOf(o)] = e
		for _, s := range e.seeds {
			count[s]++
		}
	}
	u.mu.Lock()
	freed := false
	for seed, n := range u.count {
		freed = freed || count[seed] < n
	}
	u.entries, u.count = entries, count
	for seed, shoots := range u.reserved {
		for key := range shoots {
			if slices.Contains(entries[key].seeds, seed) {
				u.unreserveLocked(seed, key) // the list saw the bind: the shoot counts instead
			}
		}
	}
	u.mu.Unlock()
	if freed {
		u.freed()
	}
	return res.ResourceVersion, nil
}

func entryOf(s *corev1beta1.Shoot) usageEntry {
	return usageEntry{rv: revisionOf(s), seeds: seedsOf(s), pending: Pending(s)}
}

// watch applies the changes after revision rv until ctx ends or the history no longer covers what the watch missed.
func (u *usage) watch(ctx context.Context, rv string) {
	for ctx.Err() == nil {
		w, err := u.shoots.Watch(ctx, "", store.WatchOptions{ResourceVersion: rv, Bookmarks: true})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return // relist
		}
		if err != nil {
			if ctx.Err() == nil {
				u.log.Warn("watching shoots failed; retrying", "err", err)
			}
			u.sleep(ctx, retryWatch)
			continue
		}
		for ev := range w.Events() {
			switch ev.Type {
			case store.Error:
				continue // the channel closes next; resume from rv
			case store.Bookmark:
				rv = ev.Object.GetMetadata().GetResourceVersion()
				continue
			}
			rv = ev.Object.GetMetadata().GetResourceVersion()
			if ev.Type == store.Deleted {
				u.forget(ev.Object)
			} else {
				u.observe(ev.Object.(*corev1beta1.Shoot))
			}
		}
		w.Stop()
	}
}

// observe records a shoot's state unless a newer one is known.
func (u *usage) observe(s *corev1beta1.Shoot) {
	u.apply(keyOf(s), entryOf(s))
}

// forget records a shoot's deletion (o carries the deletion's revision).
func (u *usage) forget(o store.Object) {
	u.apply(keyOf(o), usageEntry{rv: revisionOf(o), deleted: true})
}

func (u *usage) apply(key controller.Key, e usageEntry) {
	u.mu.Lock()
	freed := u.applyLocked(key, e)
	u.mu.Unlock()
	if freed {
		u.freed()
	}
}

// applyLocked records e for key unless a newer state is known, and reports whether a seed lost the shoot; mu is held.
func (u *usage) applyLocked(key controller.Key, e usageEntry) (freed bool) {
	old, had := u.entries[key]
	if had && old.rv >= e.rv {
		return false
	}
	u.entries[key] = e
	for _, s := range old.seeds {
		if u.count[s]--; u.count[s] <= 0 {
			delete(u.count, s)
		}
		freed = freed || !slices.Contains(e.seeds, s)
	}
	for _, s := range e.seeds {
		u.count[s]++
		u.unreserveLocked(s, key) // a bind in flight was observed: the shoot counts instead of its reservation
	}
	return freed
}

// unreserveLocked drops the reservation of key on seed, if there is one, and reports whether there was; mu is held.
func (u *usage) unreserveLocked(seed string, key controller.Key) bool {
	shoots := u.reserved[seed]
	if !shoots[key] {
		return false
	}
	delete(shoots, key)
	if len(shoots) == 0 {
		delete(u.reserved, seed)
	}
	return true
}

// wait blocks until the first list has been applied.
func (u *usage) wait(ctx context.Context) error {
	select {
	case <-u.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapshot returns the shoots per seed, reservations included.
func (u *usage) snapshot() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]int, len(u.count)+len(u.reserved))
	for s, n := range u.count {
		out[s] = n
	}
	for s, shoots := range u.reserved {
		out[s] += len(shoots)
	}
	return out
}

// reserve takes a place on seed for the bind of shoot about to be written, if the seed still has the number of
// shoots the decision saw (saw, reservations included); false means another worker got there first and the decision
// is stale.
func (u *usage) reserve(seed string, shoot controller.Key, saw int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.count[seed]+len(u.reserved[seed]) != saw {
		return false
	}
	if u.reserved[seed] == nil {
		u.reserved[seed] = map[controller.Key]bool{}
	}
	u.reserved[seed][shoot] = true
	return true
}

// release ends the reservation of shoot on seed; bound, when not nil, is the state the bind wrote, which counts
// instead. A reservation given up without a bind leaves room that other decisions may have missed: the waiting
// shoots are looked at again.
func (u *usage) release(seed string, shoot controller.Key, bound *corev1beta1.Shoot) {
	u.mu.Lock()
	freed := false
	if bound != nil {
		freed = u.applyLocked(keyOf(bound), entryOf(bound))
	}
	if u.unreserveLocked(seed, shoot) {
		freed = true
	}
	u.mu.Unlock()
	if freed {
		u.freed()
	}
}

// pending lists the shoots waiting for this scheduler.
func (u *usage) pending() []controller.Key {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []controller.Key
	for k, e := range u.entries {
		if e.pending && !e.deleted {
			out = append(out, k)
		}
	}
	return out
}
