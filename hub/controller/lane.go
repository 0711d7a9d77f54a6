package controller

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/time/rate"

	"github.com/trellis-dev/trellis/hub/store"
)

// Lane is the share of the hub its own loops get: at most Seats reconciliations at once across every controller
// running under it, and their writes to the store at no more than QPS per second (Burst at once; reads come from the
// watch cache and are free, as a controller-runtime client's cached reads are). It plays the part kube-apiserver's
// API Priority and Fairness and client-go's rate limits play for Gardener's controllers: the loops call the store
// in-process, so their work is bounded there, and under a burst of user writes they fall behind (their queues
// deduplicate keys) instead of competing with the API for the CPU. A controller runs under the lane of its Run
// context (WithLane); without one it is unbounded.
type Lane struct {
	seats   chan struct{}
	limiter *rate.Limiter
}

// LaneConfig sizes a Lane.
type LaneConfig struct {
	// Seats is how many reconciliations run at once.
	Seats int
	// QPS and Burst bound how fast the reconciliations write to the store.
	QPS   float64
	Burst int
}

// Validate names what is wrong with c.
func (c LaneConfig) Validate() error {
	var errs []error
	if c.Seats < 1 {
		errs = append(errs, fmt.Errorf("seats must be positive, got %d", c.Seats))
	}
	if c.QPS <= 0 || c.Burst < 1 {
		errs = append(errs, fmt.Errorf("qps and burst must be positive, got %v and %d", c.QPS, c.Burst))
	}
	return errors.Join(errs...)
}

// NewLane returns a lane for c.
func NewLane(c LaneConfig) (*Lane, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("lane: %w", err)
	}
	return &Lane{seats: make(chan struct{}, c.Seats), limiter: rate.NewLimiter(rate.Limit(c.QPS), c.Burst)}, nil
}

type laneKey struct{}

// WithLane returns ctx under which controllers run in lane l.
func WithLane(ctx context.Context, l *Lane) context.Context {
	return context.WithValue(ctx, laneKey{}, l)
}

func laneOf(ctx context.Context) *Lane {
	l, _ := ctx.Value(laneKey{}).(*Lane)
	return l
}

// enter waits for a seat and returns the context the reconciliation runs in, whose store writes wait for the lane's
// rate, and the function giving the seat back. It fails only when ctx ends.
func (l *Lane) enter(ctx context.Context) (_ context.Context, leave func(), err error) {
	if l == nil {
		return ctx, func() {}, nil
	}
	select {
	case l.seats <- struct{}{}:
		return store.WithWriteLimiter(ctx, l.limiter), func() { <-l.seats }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}
