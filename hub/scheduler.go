package hub

import (
	"context"
	"sync"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/leader"
	"github.com/trellis-dev/trellis/hub/scheduler"
	"github.com/trellis-dev/trellis/hub/store"
)

// startScheduler runs the interim shoot scheduler (package scheduler) on wg until ctx ends, in the replica that wins
// its election. The election is its own, as gardener-scheduler's lease is its own: the scheduler needs none of the
// agent link's controllers beside it.
func (h *Hub) startScheduler(ctx context.Context, wg *sync.WaitGroup, st *store.Store, reg *api.Registry) {
	if h.cfg.DisableScheduler {
		return
	}
	sched := scheduler.New(scheduler.Config{Source: reg, Log: h.log.With("component", "scheduler")})
	elector := leader.New(leader.Config{Client: st.Client(), Key: st.Prefix() + "/scheduler-leader", Log: h.log.With("component", "scheduler-leader")})
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = elector.Run(ctx, func(ctx context.Context) {
			if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
				h.log.Error("scheduler stopped", "err", err)
			}
		})
	}()
}
