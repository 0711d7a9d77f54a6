package leader

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Config configures an election.
type Config struct {
	Client *clientv3.Client
	// Key is the election prefix in etcd.
	Key string
	// Identity names this replica in the election (default: host name and process id).
	Identity string
	// TTL is the session lease in seconds: how long a dead leader keeps leadership (default 15).
	TTL int
	Log *slog.Logger
}

// Elector runs leader-only work.
type Elector struct {
	cfg    Config
	leader atomic.Bool
}

// New returns an elector.
func New(cfg Config) *Elector {
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = host + "-" + time.Now().Format("150405.000000")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 15
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Elector{cfg: cfg}
}

// IsLeader reports whether this replica leads now.
func (e *Elector) IsLeader() bool { return e.leader.Load() }

// Run campaigns until ctx ends; each time this replica wins, it runs every fn in its own goroutine with a context
// that ends when leadership is lost, and waits for them to return before campaigning again.
func (e *Elector) Run(ctx context.Context, fns ...func(ctx context.Context)) error {
	for ctx.Err() == nil {
		if err := e.term(ctx, fns); err != nil && ctx.Err() == nil {
			e.cfg.Log.Warn("leader election failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

func (e *Elector) term(ctx context.Context, fns []func(context.Context)) error {
	sess, err := concurrency.NewSession(e.cfg.Client, concurrency.WithTTL(e.cfg.TTL), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, e.cfg.Key)
	if err := el.Campaign(ctx, e.cfg.Identity); err != nil {
		return err
	}
	e.cfg.Log.Info("became leader", "identity", e.cfg.Identity)
	lctx, cancel := context.WithCancel(ctx)
	e.leader.Store(true)
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); fn(lctx) }()
	}
	select {
	case <-ctx.Done():
	case <-sess.Done():
		e.cfg.Log.Warn("lost leadership", "identity", e.cfg.Identity)
	}
	e.leader.Store(false)
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		// Step down at once so another replica need not wait for the lease to expire.
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = el.Resign(rctx)
		rcancel()
	}
	return nil
}
