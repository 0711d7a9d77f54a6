package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

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
	Source controller.Collections
	// Workers is controllers.seed.concurrentSyncs, for the secrets controller (default 5).
	Workers                   int
	BackupBuckets, Extensions Check
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// New returns the Seed controllers for cfg.
func New(cfg Config) (controller.Group, error) {
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
	var seeds, buckets, installations, namespaces, secrets *store.Collection
	if err := controller.OpenCollections(cfg.Source, "seed", map[schema.GroupResource]**store.Collection{
		{Group: "core.gardener.cloud", Resource: "seeds"}: &seeds, {Group: "core.gardener.cloud", Resource: "backupbuckets"}: &buckets,
		{Group: "core.gardener.cloud", Resource: "controllerinstallations"}: &installations,
		{Resource: "namespaces"}: &namespaces, {Resource: "secrets"}: &secrets,
	}); err != nil {
		return nil, err
	}
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
	var all controller.Group
	for _, cc := range []controller.Config{
		{Name: "seed-secrets", Workers: cfg.Workers,
			Reconciler: &secretsReconciler{seeds: seeds, namespaces: namespaces, secrets: secrets, log: log},
			// A shared secret that changes concerns every seed.
			Sources: []controller.Source{seedSource, {Collection: secrets, Map: func(o store.Object) []controller.Key {
				if o.GetMetadata().GetNamespace() != GardenNamespace {
					return nil
				}
				keys, _ := allSeeds(context.Background())
				return keys
			}}}},
		{Name: "seed-backupbuckets-check", Workers: cfg.BackupBuckets.Workers,
			Reconciler: &backupBucketsCheck{seeds: seeds, buckets: buckets, syncPeriod: cfg.BackupBuckets.SyncPeriod,
				threshold: cfg.BackupBuckets.Threshold, clock: cfg.Clock},
			Sources: []controller.Source{seedSource, {Collection: buckets,
				Map: seedOf(func(o store.Object) string { return o.(*corev1beta1.BackupBucket).GetSpec().GetSeedName() }),
				Digest: func(o store.Object) string {
					return fmt.Sprintf("%v", o.(*corev1beta1.BackupBucket).GetStatus().GetLastError())
				}}}},
		{Name: "seed-extensions-check", Workers: cfg.Extensions.Workers,
			Reconciler: &extensionsCheck{seeds: seeds, installations: installations, syncPeriod: cfg.Extensions.SyncPeriod,
				threshold: cfg.Extensions.Threshold, clock: cfg.Clock},
			Sources: []controller.Source{seedSource, {Collection: installations,
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
	return all, nil
}
