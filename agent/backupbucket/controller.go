package backupbucket

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the BackupBucket controller. Its Base's Cache holds the Seed, its BackupBuckets and their
// secrets; Hub serves the buckets, their status and the generated secrets. Defaults: 2 workers, retries after 1 s to
// 2 min, a ready bucket checked every 5 min (a lost extension object is recreated).
type Config struct {
	controller.Base
	// PollInterval is how often a bucket is looked at while its extension object is not ready; default 1 s.
	PollInterval time.Duration
}

// seedKey is the queue key of the Seed's own bucket (ensureSeedBucket); no object name contains a colon.
const seedKey = "seed:"

// Controller reconciles the BackupBuckets of one seed. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	controller.Mirror[*corev1beta1.BackupBucket]
	cfg     Config
	log     *slog.Logger
	buckets corev1beta1.BackupBucketServiceClient
	secrets kcorev1.SecretServiceClient
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	d := controller.MirrorDefaults
	d.Workers = 2
	if err := cfg.CompleteMirror("backupBucket", d, &cfg.PollInterval); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log,
		buckets: corev1beta1.NewBackupBucketServiceClient(cfg.Hub),
		secrets: kcorev1.NewSecretServiceClient(cfg.Hub),
	}
	c.Mirror = controller.NewMirror(cfg.Base, c.buckets)
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "backupBucket", Sync: c.syncKey, Watches: []controller.Watch{
		{Resource: resources.BackupBuckets, Keys: controller.Own[*corev1beta1.BackupBucket](nil), Forget: c.Objects.Forget},
		{Resource: resources.Seeds, Keys: func(proto.Message) []string { return []string{seedKey} }},
		// A changed credentials secret is copied into the seed again.
		{Resource: resources.Secrets, Keys: controller.Each(cfg.Cache, resources.BackupBuckets, func(b *corev1beta1.BackupBucket, s *kcorev1.Secret) bool {
			ref := b.GetSpec().GetCredentialsRef()
			return ref.GetName() == s.GetMetadata().GetName() && ref.GetNamespace() == s.GetMetadata().GetNamespace()
		})},
	}})
	return c, nil
}

// sync works on the bucket name and returns when to look again.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	cached, ok := cache.Get[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets, "", name)
	b, ok := c.Objects.Pick(name, cached, ok)
	if !ok || b.GetSpec().GetSeedName() != c.cfg.SeedName {
		return 0, nil // gone, or not this seed's (a self-hosted shoot's bucket)
	}
	if b.GetMetadata().GetDeletionTimestamp() != nil {
		return c.delete(ctx, b)
	}
	return c.reconcile(ctx, b)
}

// syncKey syncs the Seed's own bucket (seedKey) or the bucket key; it returns when to look again.
func (c *Controller) syncKey(ctx context.Context, key string) (time.Duration, error) {
	if key == seedKey {
		return 0, c.ensureSeedBucket(ctx)
	}
	return c.sync(ctx, key)
}
