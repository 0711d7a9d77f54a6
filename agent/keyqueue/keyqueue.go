package keyqueue

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// SyncFunc brings the object key names in line and says when to look at it again (0: only on a change).
type SyncFunc func(ctx context.Context, key string) (requeueAfter time.Duration, err error)

// Config configures a Queue.
type Config struct {
	// Name names the queue in client-go's metrics and the key in logs (for example "backupEntry").
	Name string
	// Sync is called for every key.
	Sync SyncFunc
	// RetryMin and RetryMax bound the per-key exponential backoff after errors.
	RetryMin, RetryMax time.Duration
	// Log receives a debug line per sync and an error line per failed sync.
	Log *slog.Logger
}

// Queue is a controller's queue of keys and its workers. Create it with New; Run it once, or ShutDown it when the
// controller stops before running it.
type Queue struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
}

// New returns a queue for cfg.
func New(cfg Config) *Queue {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Queue{cfg: cfg, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.RetryMin, cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name})}
}

// Add asks for a sync of key.
func (q *Queue) Add(key string) { q.queue.Add(key) }

// Forget drops key's backoff history (for a key whose object is gone).
func (q *Queue) Forget(key string) { q.queue.Forget(key) }

// ShutDown stops the queue; keys added afterwards are ignored.
func (q *Queue) ShutDown() { q.queue.ShutDown() }

// Run works with workers workers until ctx ends, then shuts the queue down and waits for the keys in progress.
func (q *Queue) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for q.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
}

func (q *Queue) processNext(ctx context.Context) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	after, err := q.cfg.Sync(ctx, key)
	q.cfg.Log.Debug("synced", q.cfg.Name, key, "requeueAfter", after, "err", err)
	switch {
	case ctx.Err() != nil: // stopping: the key is looked at again after the next start
	case err != nil:
		q.cfg.Log.Error("sync failed", q.cfg.Name, key, "err", err)
		q.queue.AddRateLimited(key)
	case after > 0:
		q.queue.Forget(key)
		q.queue.AddAfter(key, after)
	default:
		q.queue.Forget(key)
	}
	return true
}
