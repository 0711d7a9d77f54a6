package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Resources the scheduler reads and writes.
var (
	shootsResource = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	seedsResource  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"}
)

// DefaultSchedulerName is the spec.schedulerName of shoots this scheduler places (as Gardener's); an empty one means
// it too. Shoots naming another scheduler are left to it.
const DefaultSchedulerName = "default-scheduler"

// Source gives the scheduler the store's collections; *api.Registry is one.
type Source interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// Config configures a Scheduler.
type Config struct {
	Source Source
	// Resync is how often every unscheduled shoot is looked at again besides the changes watched (default 30 s),
	// a safety net for a watch that ended.
	Resync time.Duration
	Log    *slog.Logger
}

// Scheduler places unscheduled shoots on seeds. Run it in the leader only: two schedulers would not place a shoot
// twice (the update is a compare-and-swap) but could spread shoots unevenly.
type Scheduler struct {
	cfg Config
}

// New returns a scheduler for cfg.
func New(cfg Config) *Scheduler {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Scheduler{cfg: cfg}
}

// Run places shoots until ctx ends: once at the start, after every change of a shoot that needs a seed, whenever a
// seed becomes usable (new, or turned ready), and every resync period. Passes are coalesced, so a burst of changes
// costs one; the seeds' routine status writes (heartbeat conditions) cost none.
func (s *Scheduler) Run(ctx context.Context) error {
	shoots, seeds, err := s.collections()
	if err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.follow(ctx, shoots, func(ev store.Event) bool {
			return ev.Type != store.Deleted && needsSeed(ev.Object.(*corev1beta1.Shoot))
		}, poke)
	}()
	go func() {
		defer wg.Done()
		wasUsable := map[string]bool{} // owned by this goroutine
		s.follow(ctx, seeds, func(ev store.Event) bool {
			name := ev.Object.GetMetadata().GetName()
			if ev.Type == store.Deleted {
				delete(wasUsable, name)
				return false
			}
			now := usable(ev.Object.(*corev1beta1.Seed))
			became := now && !wasUsable[name]
			wasUsable[name] = now
			return became
		}, poke)
	}()
	t := time.NewTicker(s.cfg.Resync)
	defer t.Stop()
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-t.C:
		}
		if _, err := s.Schedule(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("scheduling pass failed", "err", err)
		}
	}
}

func (s *Scheduler) collections() (shoots, seeds *store.Collection, err error) {
	if s.cfg.Source == nil {
		return nil, nil, errors.New("scheduler: no source")
	}
	shoots, ok1 := s.cfg.Source.Collection(shootsResource)
	seeds, ok2 := s.cfg.Source.Collection(seedsResource)
	if !ok1 || !ok2 {
		return nil, nil, errors.New("scheduler: shoots or seeds are not served")
	}
	return shoots, seeds, nil
}

// follow watches c and pokes for every event that matters, until ctx ends; a watch that ends (too slow, expired) is
// started again and pokes once, since changes may have been missed.
func (s *Scheduler) follow(ctx context.Context, c *store.Collection, matters func(store.Event) bool, poke func()) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, "", store.WatchOptions{})
		if err != nil {
			s.cfg.Log.Warn("scheduler: watch failed", "resource", c.Resource().Resource, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.Events() {
			if ev.Object != nil && ev.Type != store.Bookmark && ev.Type != store.Error && matters(ev) {
				poke()
			}
		}
		w.Stop()
		poke()
	}
}

// needsSeed reports whether a shoot is this scheduler's to place: no spec.seedName, not being deleted, and the
// default scheduler's.
func needsSeed(s *corev1beta1.Shoot) bool {
	name := s.GetSpec().GetSchedulerName()
	return s.GetSpec().GetSeedName() == "" && s.GetMetadata().GetDeletionTimestamp() == nil &&
		(name == "" || name == DefaultSchedulerName)
}

// Schedule makes one pass: every shoot that needs a seed gets one if a candidate exists. It returns how many shoots
// it placed; a shoot without a candidate is left for a later pass.
func (s *Scheduler) Schedule(ctx context.Context) (int, error) {
	shoots, seeds, err := s.collections()
	if err != nil {
		return 0, err
	}
	res, err := shoots.List(ctx, "", store.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list shoots: %w", err)
	}
	var pending []*corev1beta1.Shoot
	load := map[string]int{}
	for _, obj := range res.Items {
		sh := obj.(*corev1beta1.Shoot)
		if needsSeed(sh) {
			pending = append(pending, sh)
		}
		spec, status := sh.GetSpec().GetSeedName(), sh.GetStatus().GetSeedName()
		if spec != "" {
			load[spec]++
		}
		if status != "" && status != spec {
			load[status]++
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	sres, err := seeds.List(ctx, "", store.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list seeds: %w", err)
	}
	var candidates []*corev1beta1.Seed
	for _, obj := range sres.Items {
		if seed := obj.(*corev1beta1.Seed); usable(seed) {
			candidates = append(candidates, seed)
		}
	}
	placed := 0
	var errs []error
	for _, sh := range pending {
		seed := Pick(sh, candidates, load)
		if seed == "" {
			s.cfg.Log.Debug("no seed for shoot", "namespace", sh.GetMetadata().GetNamespace(), "shoot", sh.GetMetadata().GetName())
			continue
		}
		ok, err := s.bind(ctx, shoots, sh, seed)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			load[seed]++
			placed++
			s.cfg.Log.Info("placed shoot", "namespace", sh.GetMetadata().GetNamespace(), "shoot", sh.GetMetadata().GetName(), "seed", seed)
		}
	}
	return placed, errors.Join(errs...)
}

// usable reports whether a seed may take shoots: not being deleted, GardenletReady True.
func usable(seed *corev1beta1.Seed) bool {
	if seed.GetMetadata().GetDeletionTimestamp() != nil {
		return false
	}
	for _, c := range seed.GetStatus().GetConditions() {
		if c.GetType() == "GardenletReady" {
			return c.GetStatus() == "True"
		}
	}
	return false
}

// Pick returns the seed for a shoot among usable seeds ("" when there is none), given how many shoots each seed
// has: seeds of the shoot's provider type (any seed when none has it), then those of the shoot's region if there
// are any, then the fewest shoots, then the smallest name.
func Pick(sh *corev1beta1.Shoot, seeds []*corev1beta1.Seed, load map[string]int) string {
	pool := prefer(seeds, func(seed *corev1beta1.Seed) bool {
		return seed.GetSpec().GetProvider().GetType() == sh.GetSpec().GetProvider().GetType()
	})
	pool = prefer(pool, func(seed *corev1beta1.Seed) bool {
		return seed.GetSpec().GetProvider().GetRegion() == sh.GetSpec().GetRegion()
	})
	if len(pool) == 0 {
		return ""
	}
	best := slices.MinFunc(pool, func(a, b *corev1beta1.Seed) int {
		return cmp.Or(cmp.Compare(load[a.GetMetadata().GetName()], load[b.GetMetadata().GetName()]),
			cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName()))
	})
	return best.GetMetadata().GetName()
}

// prefer returns the seeds that match, or all seeds when none does.
func prefer(seeds []*corev1beta1.Seed, match func(*corev1beta1.Seed) bool) []*corev1beta1.Seed {
	var out []*corev1beta1.Seed
	for _, seed := range seeds {
		if match(seed) {
			out = append(out, seed)
		}
	}
	if len(out) == 0 {
		return seeds
	}
	return out
}

// maxBindAttempts bounds the retries of a placement that conflicts with other writes of the shoot.
const maxBindAttempts = 5

// bind sets spec.seedName of sh with an update carrying sh's resourceVersion; on a conflict it reads the shoot again
// and retries while it still needs a seed. It reports whether it placed the shoot.
func (s *Scheduler) bind(ctx context.Context, shoots *store.Collection, sh *corev1beta1.Shoot, seed string) (bool, error) {
	md := sh.GetMetadata()
	for range maxBindAttempts {
		next := proto.Clone(sh).(*corev1beta1.Shoot)
		if next.Spec == nil {
			next.Spec = &corev1beta1.ShootSpec{}
		}
		next.Spec.SeedName = proto.String(seed)
		_, err := shoots.Update(ctx, next)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, fmt.Errorf("place shoot %s/%s on seed %s: %w", md.GetNamespace(), md.GetName(), seed, err)
		}
		cur, err := shoots.Get(ctx, md.GetNamespace(), md.GetName())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read shoot %s/%s: %w", md.GetNamespace(), md.GetName(), err)
		}
		if sh = cur.(*corev1beta1.Shoot); !needsSeed(sh) {
			return false, nil
		}
	}
	return false, fmt.Errorf("place shoot %s/%s on seed %s: still conflicting after %d attempts", md.GetNamespace(), md.GetName(), seed, maxBindAttempts)
}
