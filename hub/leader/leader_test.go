package leader_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/leader"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

// Two replicas on one etcd: exactly one runs the leader's work at a time, and the other takes over when the first
// stops.
func TestOneLeaderAtATime(t *testing.T) {
	st := storetest.OpenEmbedded(t, store.Config{DataDir: t.TempDir()})
	cli := st.Client()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var running, maxRunning atomic.Int32
	var ran sync.Map
	work := func(name string) func(ctx context.Context) {
		return func(ctx context.Context) {
			n := running.Add(1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			ran.Store(name, true)
			<-ctx.Done()
			running.Add(-1)
		}
	}
	start := func(name string) (*leader.Elector, context.CancelFunc, chan struct{}) {
		e := leader.New(leader.Config{Client: cli, Key: "/test/leader", Identity: name, TTL: 2, Log: log})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx, work(name)) }()
		return e, cancel, done
	}
	a, stopA, doneA := start("a")
	waitFor(t, "a leads", a.IsLeader)
	b, stopB, doneB := start("b")
	defer func() { stopB(); <-doneB }()
	time.Sleep(500 * time.Millisecond)
	if b.IsLeader() {
		t.Fatal("two leaders")
	}
	stopA()
	<-doneA
	waitFor(t, "b takes over", b.IsLeader)
	if _, ok := ran.Load("b"); !ok {
		waitFor(t, "b's work starts", func() bool { _, ok := ran.Load("b"); return ok })
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d replicas ran the leader's work at once", maxRunning.Load())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
