package controller

import (
	"context"
	"log/slog"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/keyqueue"
)

// Watch maps the changes of one cache resource to the keys to sync.
type Watch struct {
	// Resource is the cache resource watched, such as resources.BackupBuckets.
	Resource string
	// Keys returns the keys to sync for an object that was added or updated.
	Keys func(obj proto.Message) []string
	// Forget, if set, is called with each key Keys gives for an object that left the cache, after the queue dropped
	// the key's backoff: the controller forgets what it keeps of the object.
	Forget func(key string)
	// Deleted, if set, is called with the last state of an object that left the cache and returns the keys to sync;
	// nil ignores deletions.
	Deleted func(obj proto.Message) []string
}

// Config configures a Controller.
type Config struct {
	// Base is the controller's completed Base (see Base.Complete): the cache, the log, workers and retry bounds.
	Base
	// Name names the queue in client-go's metrics and the key in logs (for example "backupBucket").
	Name string
	// Sync brings one key in line and says when to look at it again.
	Sync keyqueue.SyncFunc
	// Watches say which keys the cache's changes enqueue.
	Watches []Watch
	// Loops run beside the workers from the first sync until the controller stops; each must return when its
	// context ends.
	Loops []func(ctx context.Context)
}

// Controller is a cache-driven controller: a queue of keys fed by watches of the agent's cache and drained by
// workers. Create it with New and run it with Run once.
type Controller struct {
	cfg   Config
	queue *keyqueue.Queue
}

// New returns a controller for cfg.
func New(cfg Config) *Controller {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, queue: keyqueue.New(keyqueue.Config{Name: cfg.Name, Sync: cfg.Sync,
		RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: cfg.Log})}
}

// Add asks for a sync of key.
func (c *Controller) Add(key string) { c.queue.Add(key) }

// Forget drops key's backoff history, for a key whose object is gone.
func (c *Controller) Forget(key string) { c.queue.Forget(key) }

// Run works until ctx ends. It waits for the cache's first sync, so that the controller sees the whole seed, and
// returns nil once its workers and loops have returned.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	for _, w := range c.cfg.Watches {
		defer c.cfg.Cache.AddEventHandler(w.Resource, c.handler(w))()
	}
	c.cfg.Log.Info(c.cfg.Name+" controller started", "workers", c.cfg.Workers)
	var wg sync.WaitGroup
	for _, loop := range c.cfg.Loops {
		wg.Go(func() { loop(ctx) })
	}
	c.queue.Run(ctx, c.cfg.Workers)
	wg.Wait()
	return nil
}

func (c *Controller) handler(w Watch) cache.Handler {
	add := func(keys []string) {
		for _, k := range keys {
			c.queue.Add(k)
		}
	}
	h := cache.HandlerFuncs{
		AddFunc:    func(obj proto.Message) { add(w.Keys(obj)) },
		UpdateFunc: func(_, obj proto.Message) { add(w.Keys(obj)) },
	}
	if w.Forget != nil || w.Deleted != nil {
		h.DeleteFunc = func(obj proto.Message) {
			if w.Forget != nil {
				for _, k := range w.Keys(obj) {
					c.queue.Forget(k)
					w.Forget(k)
				}
			}
			if w.Deleted != nil {
				add(w.Deleted(obj))
			}
		}
	}
	return h
}

// Map adapts f, which maps objects of type T to keys, to Watch.Keys; other types map to no key.
func Map[T proto.Message](f func(T) []string) func(proto.Message) []string {
	return func(obj proto.Message) []string {
		if t, ok := obj.(T); ok {
			return f(t)
		}
		return nil
	}
}

// Own is Watch.Keys for the controller's own kind T: an object maps to its key (hubobject.Key) when keep accepts it
// (nil keeps every object).
func Own[T hubobject.Object](keep func(T) bool) func(proto.Message) []string {
	return Map(func(t T) []string {
		if keep != nil && !keep(t) {
			return nil
		}
		return []string{hubobject.Key(t)}
	})
}

// Each is Map for a key per matching object of another kind: f returns the keys of the objects of T in the cache
// resource that match a changed object (for example the entries in a changed bucket).
func Each[T, O hubobject.Object](c *cache.Cache, resource string, match func(own T, changed O) bool) func(proto.Message) []string {
	return Map(func(changed O) []string {
		var keys []string
		for _, t := range cache.List[T](c, resource) {
			if match(t, changed) {
				keys = append(keys, hubobject.Key(t))
			}
		}
		return keys
	})
}
