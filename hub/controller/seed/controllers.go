package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Source gives the controllers the store's collections; *api.Registry is one.
type Source interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// Check configures a check controller (Gardener's seedExtensionsCheck, seedBackupBucketsCheck).
type Check struct {
	Workers int
	// SyncPeriod is how often the check runs (default 30 s).
	SyncPeriod time.Duration
	// Threshold is how long a failing condition stays Progressing (0: it turns False or Unknown at once).
	Threshold time.Duration
}

// Config configures the controllers.
type Config struct {
	Source Source
	// Workers is controllers.seed.concurrentSyncs, for the secrets controller (default 5).
	Workers                   int
	BackupBuckets, Extensions Check
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Controllers are the Seed controllers.
type Controllers struct {
	all []*controller.Controller
}

// New returns the controllers for cfg.
func New(cfg Config) (*Controllers, error) {
	if cfg.Source == nil {
		return nil, errors.New("seed: no source")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for _, c := range []*Check{&cfg.BackupBuckets, &cfg.Extensions} {
		if c.SyncPeriod <= 0 {
			c.SyncPeriod = 30 * time.Second
		}
	}
	cols := map[string]*store.Collection{}
	var missing []string
	for name, gr := range map[string]schema.GroupResource{
		"seeds": {Group: "core.gardener.cloud", Resource: "seeds"}, "backupbuckets": {Group: "core.gardener.cloud", Resource: "backupbuckets"},
		"controllerinstallations": {Group: "core.gardener.cloud", Resource: "controllerinstallations"},
		"namespaces":              {Resource: "namespaces"}, "secrets": {Resource: "secrets"},
	} {
		c, ok := cfg.Source.Collection(gr)
		if !ok {
			missing = append(missing, name)
		}
		cols[name] = c
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("seed: not served: %s", strings.Join(missing, ", "))
	}
	seeds := cols["seeds"]
	log := cfg.Log.With("controller", "seed")
	seedOf := func(name func(store.Object) string) func(store.Object) []controller.Key {
		return func(o store.Object) []controller.Key {
			if n := name(o); n != "" {
				return []controller.Key{{Name: n}}
			}
			return nil
		}
	}
	allSeeds := func(ctx context.Context) ([]controller.Key, error) {
		res, err := seeds.List(ctx, "", store.ListOptions{})
		if err != nil {
			return nil, err
		}
		keys := make([]controller.Key, 0, len(res.Items))
		for _, o := range res.Items {
			keys = append(keys, controller.Key{Name: o.GetMetadata().GetName()})
		}
		return keys, nil
	}
	// Seeds: only their creation and deletion matter to these controllers (the checks requeue themselves).
	seedSource := controller.Source{Collection: seeds, Digest: func(o store.Object) string { return o.GetMetadata().GetUid() }}
	var all []*controller.Controller
	for _, cc := range []controller.Config{
		{Name: "seed-secrets", Workers: cfg.Workers,
			Reconciler: &secretsReconciler{seeds: seeds, namespaces: cols["namespaces"], secrets: cols["secrets"], log: log},
			// A shared secret that changes concerns every seed.
			Sources: []controller.Source{seedSource, {Collection: cols["secrets"], Map: func(o store.Object) []controller.Key {
				if o.GetMetadata().GetNamespace() != GardenNamespace {
					return nil
				}
				keys, _ := allSeeds(context.Background())
				return keys
			}}}},
		{Name: "seed-backupbuckets-check", Workers: cfg.BackupBuckets.Workers,
			Reconciler: &backupBucketsCheck{seeds: seeds, buckets: cols["backupbuckets"], syncPeriod: cfg.BackupBuckets.SyncPeriod,
				threshold: cfg.BackupBuckets.Threshold, clock: cfg.Clock},
			Sources: []controller.Source{seedSource, {Collection: cols["backupbuckets"],
				Map: seedOf(func(o store.Object) string { return o.(*corev1beta1.BackupBucket).GetSpec().GetSeedName() }),
				Digest: func(o store.Object) string {
					return fmt.Sprintf("%v", o.(*corev1beta1.BackupBucket).GetStatus().GetLastError())
				}}}},
		{Name: "seed-extensions-check", Workers: cfg.Extensions.Workers,
			Reconciler: &extensionsCheck{seeds: seeds, installations: cols["controllerinstallations"], syncPeriod: cfg.Extensions.SyncPeriod,
				threshold: cfg.Extensions.Threshold, clock: cfg.Clock},
			Sources: []controller.Source{seedSource, {Collection: cols["controllerinstallations"],
				Map: seedOf(func(o store.Object) string {
					return o.(*corev1beta1.ControllerInstallation).GetSpec().GetSeedRef().GetName()
				}),
				Digest: func(o store.Object) string {
					var b strings.Builder
					for _, c := range o.(*corev1beta1.ControllerInstallation).GetStatus().GetConditions() {
						fmt.Fprintf(&b, "%s=%s/%s/%s;", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
					}
					return b.String()
				}}}},
	} {
		cc.Clock, cc.Log = cfg.Clock, cfg.Log
		c, err := controller.New(cc)
		if err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	return &Controllers{all: all}, nil
}

// Run runs the controllers until ctx ends.
func (cs *Controllers) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range cs.all {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	wg.Wait()
	return nil
}
