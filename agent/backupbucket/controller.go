package backupbucket

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

// Config configures the BackupBucket controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: the Seed, its BackupBuckets and their secrets.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for the buckets, their status and the generated secrets.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has client-go's and the extension kinds.
	Seed client.Client
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many buckets are worked on at once; default 2.
	Workers int
	// PollInterval is how often a bucket is looked at while its extension object is not ready; default 1 s.
	PollInterval time.Duration
	// SyncPeriod is how often a ready bucket is checked anyway (a lost extension object is recreated); default 5 min.
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
		c.Workers = 2
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

// seedKey is the queue key of the Seed's own bucket (ensureSeedBucket); no object name contains a colon.
const seedKey = "seed:"

// Controller reconciles the BackupBuckets of one seed. Create it with New and run it with Run.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	buckets corev1beta1.BackupBucketServiceClient
	secrets kcorev1.SecretServiceClient
	ext     *extension.Client
	queue   *keyqueue.Queue
	// objects writes the buckets and remembers what it wrote.
	objects *hubobject.Client[*corev1beta1.BackupBucket]
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil {
		return nil, errors.New("backupbucket controller: SeedName, Cache, Hub and Seed are required")
	}
	cfg.defaults()
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log.With("controller", "backupbucket"),
		buckets: corev1beta1.NewBackupBucketServiceClient(cfg.Hub),
		secrets: kcorev1.NewSecretServiceClient(cfg.Hub),
		ext:     &extension.Client{C: cfg.Seed, Now: cfg.Now},
	}
	c.objects = hubobject.NewClient(c.buckets, cfg.HubTimeout, cfg.Now)
	c.queue = keyqueue.New(keyqueue.Config{Name: "backupBucket", Sync: c.syncKey, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: c.log})
	return c, nil
}

// Run works on buckets until ctx ends. It waits for the cache's first sync, so that it sees the whole seed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	var removes []func()
	removes = append(removes,
		c.cfg.Cache.AddEventHandler(resources.BackupBuckets, cache.HandlerFuncs{
			AddFunc:    c.enqueueBucket,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueBucket(obj) },
			DeleteFunc: c.forget,
		}),
		c.cfg.Cache.AddEventHandler(resources.Seeds, cache.HandlerFuncs{
			AddFunc:    func(proto.Message) { c.queue.Add(seedKey) },
			UpdateFunc: func(_, _ proto.Message) { c.queue.Add(seedKey) },
		}),
		// A changed credentials secret is copied into the seed again.
		c.cfg.Cache.AddEventHandler(resources.Secrets, cache.HandlerFuncs{
			AddFunc:    c.enqueueSecretUsers,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueSecretUsers(obj) },
		}),
	)
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	c.log.Info("backupbucket controller started", "workers", c.cfg.Workers)
	c.queue.Run(ctx, c.cfg.Workers)
	return nil
}

func (c *Controller) enqueueBucket(obj proto.Message) {
	if b, ok := obj.(*corev1beta1.BackupBucket); ok {
		c.queue.Add(b.GetMetadata().GetName())
	}
}

func (c *Controller) forget(obj proto.Message) {
	if b, ok := obj.(*corev1beta1.BackupBucket); ok {
		c.objects.Forget(b.GetMetadata().GetName())
		c.queue.Forget(b.GetMetadata().GetName())
	}
}

// enqueueSecretUsers enqueues the buckets whose credentials are the secret obj.
func (c *Controller) enqueueSecretUsers(obj proto.Message) {
	s, ok := obj.(*kcorev1.Secret)
	if !ok {
		return
	}
	for _, b := range cache.List[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets) {
		ref := b.GetSpec().GetCredentialsRef()
		if ref.GetName() == s.GetMetadata().GetName() && ref.GetNamespace() == s.GetMetadata().GetNamespace() {
			c.queue.Add(b.GetMetadata().GetName())
		}
	}
}

// sync works on the bucket name and returns when to look again.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	cached, ok := cache.Get[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets, "", name)
	b, ok := c.objects.Pick(name, cached, ok)
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
