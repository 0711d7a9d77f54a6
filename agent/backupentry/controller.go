package backupentry

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/keyqueue"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the BackupEntry controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: the BackupEntries, their BackupBuckets and the
	// buckets' secrets.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for the entries, their status and the ShootStates to restore
	// from.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has client-go's and the extension kinds.
	Seed client.Client
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many entries are worked on at once; default 5.
	Workers int
	// PollInterval is how often an entry is looked at while its extension object is not ready; default 1 s.
	PollInterval time.Duration
	// SyncPeriod is how often a ready entry is checked anyway (a lost extension object is recreated); default 5 min.
	SyncPeriod time.Duration
	// RetryMin and RetryMax bound the backoff after a failed sync; defaults 1 s and 2 min.
	RetryMin, RetryMax time.Duration
	// HubTimeout bounds each call to the hub; default 30 s.
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Workers <= 0 {
		c.Workers = 5
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = 5 * time.Minute
	}
	if c.RetryMin <= 0 {
		c.RetryMin = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 2 * time.Minute
	}
	if c.HubTimeout <= 0 {
		c.HubTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Controller reconciles, migrates and deletes the BackupEntries of one seed. Create it with New and run it with Run.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	entries corev1beta1.BackupEntryServiceClient
	states  corev1beta1.ShootStateServiceClient
	ext     *extension.Client
	queue   *keyqueue.Queue
	// objects writes the entries and remembers what it wrote.
	objects *hubobject.Client[*corev1beta1.BackupEntry]
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil {
		return nil, errors.New("backupentry controller: SeedName, Cache, Hub and Seed are required")
	}
	cfg.defaults()
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log.With("controller", "backupentry"),
		entries: corev1beta1.NewBackupEntryServiceClient(cfg.Hub),
		states:  corev1beta1.NewShootStateServiceClient(cfg.Hub),
		ext:     &extension.Client{C: cfg.Seed, Now: cfg.Now},
	}
	c.objects = hubobject.NewClient(c.entries, cfg.HubTimeout, cfg.Now)
	c.queue = keyqueue.New(keyqueue.Config{Name: "backupEntry", Sync: c.sync, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: c.log})
	return c, nil
}

// Run works on entries until ctx ends. It waits for the cache's first sync, so that it sees the whole seed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	removes := []func(){
		c.cfg.Cache.AddEventHandler(resources.BackupEntries, cache.HandlerFuncs{
			AddFunc:    c.enqueueEntry,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueEntry(obj) },
			DeleteFunc: c.forget,
		}),
		// An entry waits for its bucket and follows the bucket's secret.
		c.cfg.Cache.AddEventHandler(resources.BackupBuckets, cache.HandlerFuncs{
			AddFunc:    c.enqueueBucketUsers,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueBucketUsers(obj) },
		}),
		c.cfg.Cache.AddEventHandler(resources.Secrets, cache.HandlerFuncs{
			AddFunc:    c.enqueueSecretUsers,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueSecretUsers(obj) },
		}),
	}
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	c.log.Info("backupentry controller started", "workers", c.cfg.Workers)
	c.queue.Run(ctx, c.cfg.Workers)
	return nil
}

func (c *Controller) enqueueEntry(obj proto.Message) {
	if e, ok := obj.(*corev1beta1.BackupEntry); ok {
		c.queue.Add(hubobject.Key(e))
	}
}

func (c *Controller) forget(obj proto.Message) {
	if e, ok := obj.(*corev1beta1.BackupEntry); ok {
		c.objects.Forget(hubobject.Key(e))
		c.queue.Forget(hubobject.Key(e))
	}
}

// enqueueBucketUsers enqueues the entries in the bucket obj.
func (c *Controller) enqueueBucketUsers(obj proto.Message) {
	b, ok := obj.(*corev1beta1.BackupBucket)
	if !ok {
		return
	}
	for _, e := range cache.List[*corev1beta1.BackupEntry](c.cfg.Cache, resources.BackupEntries) {
		if e.GetSpec().GetBucketName() == b.GetMetadata().GetName() {
			c.queue.Add(hubobject.Key(e))
		}
	}
}

// enqueueSecretUsers enqueues the entries whose bucket's secret is obj.
func (c *Controller) enqueueSecretUsers(obj proto.Message) {
	s, ok := obj.(*kcorev1.Secret)
	if !ok {
		return
	}
	for _, b := range cache.List[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets) {
		ns, name := bucketSecret(b)
		if name == s.GetMetadata().GetName() && ns == s.GetMetadata().GetNamespace() {
			c.enqueueBucketUsers(b)
		}
	}
}

// sync decides what the entry key needs from this seed and does it; it returns when to look again.
//
// An entry is this seed's to reconcile (or restore) and delete when spec.seedName is this seed and status.seedName
// is not another seed; while status.seedName is still another seed, that seed's agent migrates it first. It is this
// seed's to migrate when status.seedName is this seed and spec.seedName moved to another seed.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*corev1beta1.BackupEntry](c.cfg.Cache, resources.BackupEntries, ns, name)
	e, ok := c.objects.Pick(key, cached, ok)
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
