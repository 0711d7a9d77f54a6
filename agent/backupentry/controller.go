package backupentry

import (
	"context"
	"log/slog"
	"time"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the BackupEntry controller. Its Base's Cache holds the BackupEntries, their BackupBuckets and the
// buckets' secrets; Hub serves the entries, their status and the ShootStates to restore from. Defaults: 5 workers,
// retries after 1 s to 2 min, a ready entry checked every 5 min (a lost extension object is recreated).
type Config struct {
	controller.Base
	// PollInterval is how often an entry is looked at while its extension object is not ready; default 1 s.
	PollInterval time.Duration
}

// Controller reconciles, migrates and deletes the BackupEntries of one seed. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	controller.Mirror[*corev1beta1.BackupEntry]
	cfg     Config
	log     *slog.Logger
	entries corev1beta1.BackupEntryServiceClient
	states  corev1beta1.ShootStateServiceClient
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if err := cfg.CompleteMirror("backupEntry", controller.MirrorDefaults, &cfg.PollInterval); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log,
		entries: corev1beta1.NewBackupEntryServiceClient(cfg.Hub),
		states:  corev1beta1.NewShootStateServiceClient(cfg.Hub),
	}
	c.Mirror = controller.NewMirror(cfg.Base, c.entries)
	inBucket := func(e *corev1beta1.BackupEntry, b *corev1beta1.BackupBucket) bool {
		return e.GetSpec().GetBucketName() == b.GetMetadata().GetName()
	}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "backupEntry", Sync: c.sync, Watches: []controller.Watch{
		{Resource: resources.BackupEntries, Keys: controller.Own[*corev1beta1.BackupEntry](nil), Forget: c.Objects.Forget},
		// An entry waits for its bucket and follows the bucket's secret.
		{Resource: resources.BackupBuckets, Keys: controller.Each(cfg.Cache, resources.BackupEntries, inBucket)},
		{Resource: resources.Secrets, Keys: controller.Each(cfg.Cache, resources.BackupEntries, func(e *corev1beta1.BackupEntry, s *kcorev1.Secret) bool {
			b, ok := cache.Get[*corev1beta1.BackupBucket](cfg.Cache, resources.BackupBuckets, "", e.GetSpec().GetBucketName())
			ns, name := bucketSecret(b)
			return ok && name == s.GetMetadata().GetName() && ns == s.GetMetadata().GetNamespace()
		})},
	}})
	return c, nil
}

// sync decides what the entry key needs from this seed and does it; it returns when to look again.
//
// An entry is this seed's to reconcile (or restore) and delete when spec.seedName is this seed and status.seedName
// is not another seed; while status.seedName is still another seed, that seed's agent migrates it first. It is this
// seed's to migrate when status.seedName is this seed and spec.seedName moved to another seed.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*corev1beta1.BackupEntry](c.cfg.Cache, resources.BackupEntries, ns, name)
	e, ok := c.Objects.Pick(key, cached, ok)
	if !ok {
		return 0, nil
	}
	spec, st := e.GetSpec().GetSeedName(), e.GetStatus().GetSeedName()
	switch {
	case st == c.cfg.SeedName && spec != "" && spec != c.cfg.SeedName:
		return c.migrate(ctx, e)
	case spec != c.cfg.SeedName:
		return 0, nil
	case st != "" && st != c.cfg.SeedName:
		c.log.Debug("waiting for the migration from the source seed", "backupEntry", key, "sourceSeed", st)
		return c.cfg.SyncPeriod, nil // the source's status change brings us back
	case e.GetMetadata().GetDeletionTimestamp() != nil:
		return c.delete(ctx, e)
	}
	return c.reconcile(ctx, e)
}
