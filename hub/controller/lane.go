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
// deduplicate keys) instead of competing with the API for the CPU. While the API serves requests (LaneConfig.API),
// the writes wait for a lower rate as well (BusyQPS): the loops yield to the API's clients and take the full rate
// back when it is idle, as API Priority and Fairness lets a priority level borrow the seats others leave unused. A
// controller runs under the lane of its Run context (WithLane); without one it is unbounded.
type Lane struct {
	seats   chan struct{}
	limiter *rate.Limiter
	busy    *rate.Limiter // nil: no bound while the API is busy
	api     Load
}

// Load tells a lane whether the API is serving requests.
type Load interface {
	Busy() bool
}

// LaneConfig sizes a Lane.
type LaneConfig struct {
	// Seats is how many reconciliations run at once.
	Seats int
	// QPS and Burst bound how fast the reconciliations write to the store.
	QPS   float64
	Burst int
	// BusyQPS bounds the writes further, one at a time, while API.Busy(): the loops' share when the API has work.
	// Zero: no further bound.
	BusyQPS float64
	// API is the load the lane yields to; nil: never busy.
	API Load
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
	if c.BusyQPS < 0 || c.BusyQPS > c.QPS {
		errs = append(errs, fmt.Errorf("busy qps must be between 0 and qps (%v), got %v", c.QPS, c.BusyQPS))
	}
	return errors.Join(errs...)
}

// NewLane returns a lane for c.
func NewLane(c LaneConfig) (*Lane, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("lane: %w", err)
	}
	l := &Lane{seats: make(chan struct{}, c.Seats), limiter: rate.NewLimiter(rate.Limit(c.QPS), c.Burst), api: c.API}
	if c.BusyQPS > 0 && c.API != nil {
		l.busy = rate.NewLimiter(rate.Limit(c.BusyQPS), 1)
	}
	return l, nil
}

// laneWrites is the write limiter of a lane's reconciliations.
type laneWrites struct{ l *Lane }

// Wait waits for the lane's rate and, while the API is busy, for its busy rate too.
func (w laneWrites) Wait(ctx context.Context) error {
	if err := w.l.limiter.Wait(ctx); err != nil {
		return err
	}
	if w.l.busy != nil && w.l.api.Busy() {
		return w.l.busy.Wait(ctx)
	}
	return nil
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
		return store.WithWriteLimiter(ctx, laneWrites{l}), func() { <-l.seats }, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}
