package controller_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
)

// inLane runs a controller under a lane, as the hub runs its loops.
type inLane struct {
	c    *controller.Controller
	lane *controller.Lane
}

func (r inLane) Run(ctx context.Context) error { return r.c.Run(controller.WithLane(ctx, r.lane)) }

// TestLaneBoundsReconcilesAcrossControllers: two controllers with four workers each run under a lane of one seat:
// every key is reconciled, never two at once.
func TestLaneBoundsReconcilesAcrossControllers(t *testing.T) {
	lane, err := controller.NewLane(controller.LaneConfig{Seats: 1, QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	var mu sync.Mutex
	done := map[string]bool{}
	reconcile := controller.ReconcilerFunc(func(_ context.Context, key controller.Key) (controller.Result, error) {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // overlap, if the lane let it
		running.Add(-1)
		mu.Lock()
		done[key.Name] = true
		mu.Unlock()
		return controller.Result{}, nil
	})
	var ctrls []*controller.Controller
	for i := range 2 {
		c, err := controller.New(controller.Config{Name: fmt.Sprintf("c%d", i), Workers: 4, Reconciler: reconcile})
		if err != nil {
			t.Fatal(err)
		}
		controllertest.Start(t, inLane{c, lane})
		ctrls = append(ctrls, c)
	}
	for k := range 10 {
		for i, c := range ctrls {
			c.Enqueue(controller.Key{Name: fmt.Sprintf("c%d-%d", i, k)})
		}
	}
	controllertest.Eventually(t, "all 20 keys reconciled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 20
	})
	if m := most.Load(); m != 1 {
		t.Fatalf("%d reconciliations ran at once in a lane of one seat", m)
	}
}

// apiLoad is a Load switched by the test.
type apiLoad struct{ busy atomic.Bool }

func (l *apiLoad) Busy() bool { return l.busy.Load() }

// TestLaneYieldsToBusyAPI: while the API is busy the lane's writes wait for its busy rate as well, and get the whole
// rate back when it is idle. A limiter's Wait fails at once when the wait would pass the context's deadline, so the
// waits show without timing anything.
func TestLaneYieldsToBusyAPI(t *testing.T) {
	api := &apiLoad{}
	lane, err := controller.NewLane(controller.LaneConfig{Seats: 1, QPS: 1000, Burst: 1000, BusyQPS: 0.01, API: api})
	if err != nil {
		t.Fatal(err)
	}
	w := controller.LaneWrites(lane)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range 10 {
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("idle API, write %d: %v", i, err)
		}
	}
	api.busy.Store(true)
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("busy API, first write: %v", err)
	}
	if err := w.Wait(ctx); err == nil {
		t.Fatal("busy API: a second write did not wait for the busy rate (one write per 100 s)")
	}
	api.busy.Store(false)
	for i := range 10 {
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("idle API again, write %d: %v", i, err)
		}
	}
	// Without a load to yield to, BusyQPS binds nothing.
	free, err := controller.NewLane(controller.LaneConfig{Seats: 1, QPS: 1000, Burst: 1000, BusyQPS: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := controller.LaneWrites(free).Wait(ctx); err != nil {
			t.Fatalf("no load, write %d: %v", i, err)
		}
	}
}

func TestLaneConfigValidation(t *testing.T) {
	for _, c := range []controller.LaneConfig{{Seats: 0, QPS: 1, Burst: 1}, {Seats: 1, QPS: 0, Burst: 1}, {Seats: 1, QPS: 1, Burst: 0},
		{Seats: 1, QPS: 1, Burst: 1, BusyQPS: -1}, {Seats: 1, QPS: 1, Burst: 1, BusyQPS: 2}} {
		if _, err := controller.NewLane(c); err == nil {
			t.Errorf("NewLane(%+v) accepted", c)
		}
	}
}
