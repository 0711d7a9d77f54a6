package hub

import (
	"context"
	"sync"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/leader"
	"github.com/trellis-dev/trellis/hub/scheduler"
	"github.com/trellis-dev/trellis/hub/store"
)

// startScheduler runs the shoot scheduler (package scheduler) on wg until ctx ends, in the replica that wins its
// election. The election is its own, as gardener-scheduler's lease is its own: the scheduler needs none of the agent
// link's controllers beside it. Its workers and strategy come from the SchedulerConfiguration's schedulers.shoot.
func (h *Hub) startScheduler(ctx context.Context, wg *sync.WaitGroup, st *store.Store, reg *api.Registry) {
	if h.cfg.DisableScheduler {
		return
	}
	cfg := scheduler.Config{Source: reg, Log: h.log.With("component", "scheduler")}
	if shoot := h.cfg.Components.Scheduler.Schedulers.Shoot; shoot != nil {
		if shoot.ConcurrentSyncs != nil {
			cfg.Workers = *shoot.ConcurrentSyncs
		}
		cfg.Strategy = shoot.CandidateDeterminationStrategy
	}
	sched, err := scheduler.New(cfg)
	if err != nil {
		h.log.Error("scheduler not started", "err", err)
		return
	}
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
