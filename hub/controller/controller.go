package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/store"
)

// Key names the object a reconciliation is about: Namespace is empty for cluster-scoped objects.
type Key struct {
	Namespace, Name string
	// Resource is set by controllers whose keys name objects of several kinds (the garbage collector); the others
	// leave it empty, their kind being their reconciler's.
	Resource schema.GroupResource
}

// String is "namespace/name", or "name" for a cluster-scoped object; with a resource, "resource namespace/name".
func (k Key) String() string {
	s := k.Name
	if k.Namespace != "" {
		s = k.Namespace + "/" + k.Name
	}
	if k.Resource != (schema.GroupResource{}) {
		s = k.Resource.String() + " " + s
	}
	return s
}

// Get reads the object key names from c, for a Reconciler: ok is false, without an error, when the object does not
// exist (anymore). The object is the cache's: clone it before modifying it.
func Get[T store.Object](ctx context.Context, c *store.Collection, key Key) (obj T, ok bool, err error) {
	o, err := c.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return obj, false, nil
	}
	if err != nil {
		return obj, false, err
	}
	return o.(T), true, nil
}

// NameKeys are the keys of the named cluster-scoped objects, without empty and repeated names.
func NameKeys(names ...string) []Key {
	var keys []Key
	for _, n := range names {
		if k := (Key{Name: n}); n != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Result tells the controller when to look at a key again after a successful reconciliation; the zero value means
// only when something changes.
type Result struct {
	RequeueAfter time.Duration
}

// Reconciler brings the world in line with the desired state of the object key names. It is called by one worker
// at a time per key. An error is logged and retried with backoff.
type Reconciler interface {
	Reconcile(ctx context.Context, key Key) (Result, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, key Key) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, key Key) (Result, error) { return f(ctx, key) }

// Config configures a Controller.
type Config struct {
	// Name names the controller in logs.
	Name string
	// Reconciler is called for every key.
	Reconciler Reconciler
	// Sources feed the queue.
	Sources []Source
	// Workers is how many keys are reconciled at once (default 1).
	Workers int
	// Resync is how often ResyncKeys are enqueued besides the changes watched (0: never).
	Resync time.Duration
	// ResyncKeys lists the keys a resync enqueues; required with Resync.
	ResyncKeys func(ctx context.Context) ([]Key, error)
	// RetryMin and RetryMax bound the per-key exponential backoff after errors (defaults 500 ms and 5 min).
	RetryMin, RetryMax time.Duration
	// Clock is the clock of every wait (default the real clock).
	Clock clock.WithTicker
	// Log receives the controller's logs (default discarded).
	Log *slog.Logger
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 500 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate reports what is missing from a Config.
func (c *Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if c.Reconciler == nil {
		errs = append(errs, errors.New("reconciler is required"))
	}
	if c.Resync > 0 && c.ResyncKeys == nil {
		errs = append(errs, errors.New("resync needs ResyncKeys"))
	}
	for i, s := range c.Sources {
		if s.Collection == nil {
			errs = append(errs, fmt.Errorf("sources[%d]: collection is required", i))
		}
	}
	return errors.Join(errs...)
}

// Controller runs a Reconciler over the keys its sources yield. Create it with New and run it with Run, once.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[Key]
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("controller %s: %w", cfg.Name, err)
	}
	return &Controller{
		cfg: cfg,
		log: cfg.Log.With("controller", cfg.Name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[Key](cfg.RetryMin, cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: cfg.Name, Clock: cfg.Clock,
				DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[Key]{
					Name: cfg.Name, Clock: cfg.Clock,
					Queue: newQueue(),
				})}),
	}, nil
}

// Name is the controller's name, as configured.
func (c *Controller) Name() string { return c.cfg.Name }

// Enqueue asks for a reconciliation of key.
func (c *Controller) Enqueue(key Key) { c.queue.Add(key) }

// Run works until ctx ends, then stops the sources and waits for the workers to finish their keys.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range c.cfg.Sources {
		wg.Go(func() { s.follow(ctx, c.cfg.Clock, c.log, c.queue.Add) })
	}
	if c.cfg.Resync > 0 {
		wg.Go(func() { c.resync(ctx) })
	}
	var workers sync.WaitGroup
	for range c.cfg.Workers {
		workers.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	c.log.Info("controller started", "workers", c.cfg.Workers)
	<-ctx.Done()
	c.queue.ShutDown()
	workers.Wait()
	wg.Wait()
	return nil
}

// resync enqueues ResyncKeys every Resync period until ctx ends.
func (c *Controller) resync(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		keys, err := c.cfg.ResyncKeys(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("resync failed", "err", err)
			}
			continue
		}
		for _, k := range keys {
			c.queue.Add(k)
		}
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	rctx, leave, err := laneOf(ctx).enter(ctx)
	if err != nil {
		return true // ctx ended: Run shuts the queue down
	}
	res, err := c.reconcile(rctx, key)
	leave()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		c.log.Error("reconcile failed", "key", key.String(), "retries", c.queue.NumRequeues(key), "err", err)
		c.queue.AddRateLimited(key)
	case res.RequeueAfter > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, res.RequeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
}

// reconcile calls the reconciler, turning a panic into an error so one bad object does not stop the leader.
func (c *Controller) reconcile(ctx context.Context, key Key) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.cfg.Reconciler.Reconcile(ctx, key)
}
