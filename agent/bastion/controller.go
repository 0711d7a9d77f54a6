package bastion

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
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the Bastion controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: the Bastions and their Shoots.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for the Bastions and their status.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has client-go's and the extension kinds.
	Seed client.Client
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many bastions are worked on at once; default 5.
	Workers int
	// PollInterval is how often a bastion is looked at while its extension object is not ready or not gone yet;
	// default 1 s.
	PollInterval time.Duration
	// SyncPeriod is how often a ready bastion is checked anyway (a lost extension object is recreated); default
	// 5 min.
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

// Controller reconciles the Bastions of one seed. Create it with New and run it with Run.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	bastions operationsv1alpha1.BastionServiceClient
	ext      *extension.Client
	queue    *keyqueue.Queue
	// objects writes the bastions and remembers what it wrote.
	objects *hubobject.Client[*operationsv1alpha1.Bastion]
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil {
		return nil, errors.New("bastion controller: SeedName, Cache, Hub and Seed are required")
	}
	cfg.defaults()
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Log.With("controller", "bastion"),
		bastions: operationsv1alpha1.NewBastionServiceClient(cfg.Hub),
		ext:      &extension.Client{C: cfg.Seed, Now: cfg.Now},
	}
	c.objects = hubobject.NewClient(c.bastions, cfg.HubTimeout, cfg.Now)
	c.queue = keyqueue.New(keyqueue.Config{Name: "bastion", Sync: c.sync, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: c.log})
	return c, nil
}

// Run works on bastions until ctx ends. It waits for the cache's first sync, so that it sees the whole seed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	removes := []func(){
		c.cfg.Cache.AddEventHandler(resources.Bastions, cache.HandlerFuncs{
			AddFunc:    c.enqueueBastion,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueBastion(obj) },
			DeleteFunc: c.forget,
		}),
		// A bastion waits for its shoot (and its technical ID).
		c.cfg.Cache.AddEventHandler(resources.Shoots, cache.HandlerFuncs{
			AddFunc:    c.enqueueShootBastions,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueShootBastions(obj) },
		}),
	}
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	c.log.Info("bastion controller started", "workers", c.cfg.Workers)
	c.queue.Run(ctx, c.cfg.Workers)
	return nil
}

func (c *Controller) enqueueBastion(obj proto.Message) {
	if b, ok := obj.(*operationsv1alpha1.Bastion); ok {
		c.queue.Add(hubobject.Key(b))
	}
}

func (c *Controller) forget(obj proto.Message) {
	if b, ok := obj.(*operationsv1alpha1.Bastion); ok {
		c.objects.Forget(hubobject.Key(b))
		c.queue.Forget(hubobject.Key(b))
	}
}

// enqueueShootBastions enqueues the bastions of the shoot obj.
func (c *Controller) enqueueShootBastions(obj proto.Message) {
	s, ok := obj.(*corev1beta1.Shoot)
	if !ok {
		return
	}
	for _, b := range cache.List[*operationsv1alpha1.Bastion](c.cfg.Cache, resources.Bastions) {
		if b.GetMetadata().GetNamespace() == s.GetMetadata().GetNamespace() && b.GetSpec().GetShootRef().GetName() == s.GetMetadata().GetName() {
			c.queue.Add(hubobject.Key(b))
		}
	}
}
