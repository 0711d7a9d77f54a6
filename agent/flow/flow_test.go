package flow

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder records the order tasks finished in.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) task(name string) TaskFn {
	return func(context.Context) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.order = append(r.order, name)
		return nil
	}
}

func (r *recorder) index(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, n := range r.order {
		if n == name {
			return i
		}
	}
	return -1
}

func TestDependenciesRunFirstAndProgressReachesAll(t *testing.T) {
	r := &recorder{}
	g := New("reconcile")
	ns := g.Add(Task{Name: "namespace", Fn: r.task("namespace")})
	infra := g.Add(Task{Name: "infrastructure", Fn: r.task("infrastructure"), Dependencies: []string{ns}})
	dns := g.Add(Task{Name: "dns", Fn: r.task("dns"), Dependencies: []string{ns}})
	cp := g.Add(Task{Name: "controlplane", Fn: r.task("controlplane"), Dependencies: []string{infra, dns}})
	skipped := g.Add(Task{Name: "skipped", Fn: r.task("skipped"), Skip: true, Dependencies: []string{cp}})
	g.Add(Task{Name: "worker", Fn: r.task("worker"), Dependencies: []string{skipped}})
	var progress []Progress
	if err := g.Run(context.Background(), Opts{OnProgress: func(p Progress) { progress = append(progress, p) }}); err != nil {
		t.Fatal(err)
	}
	for _, dep := range [][2]string{{"namespace", "infrastructure"}, {"namespace", "dns"}, {"infrastructure", "controlplane"}, {"dns", "controlplane"}, {"controlplane", "worker"}} {
		if a, b := r.index(dep[0]), r.index(dep[1]); a < 0 || b < 0 || a > b {
			t.Errorf("%s (at %d) must finish before %s (at %d): %v", dep[0], a, dep[1], b, r.order)
		}
	}
	if r.index("skipped") >= 0 {
		t.Errorf("skipped task ran")
	}
	if len(progress) != 5 {
		t.Fatalf("want a progress report per task that ran (5), got %d", len(progress))
	}
	last := progress[len(progress)-1]
	if last.Done != 6 || last.Total != 6 || last.Percent != 99 {
		t.Errorf("last progress %+v, want 6/6 at 99%%", last)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Percent < progress[i-1].Percent {
			t.Errorf("progress went back: %v", progress)
		}
	}
}

func TestIndependentTasksRunInParallel(t *testing.T) {
	g := New("parallel")
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) error {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		inFlight.Add(-1)
		return nil
	}
	for _, n := range []string{"a", "b", "c"} {
		g.Add(Task{Name: n, Fn: fn})
	}
	done := make(chan error)
	go func() { done <- g.Run(context.Background(), Opts{}) }()
	deadline := time.Now().Add(5 * time.Second)
	for peak.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 3 {
		t.Fatalf("peak parallelism %d, want 3", peak.Load())
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	g := New("retry")
	var calls atomic.Int32
	g.Add(Task{Name: "flaky", RetryInterval: time.Millisecond, Fn: func(context.Context) error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	}})
	if err := g.Run(context.Background(), Opts{}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("calls %d, want 3", calls.Load())
	}
}

func TestFailureStopsDependantsAndNamesTask(t *testing.T) {
	r := &recorder{}
	g := New("fail")
	boom := errors.New("boom")
	var calls atomic.Int32
	infra := g.Add(Task{Name: "infrastructure", Timeout: 50 * time.Millisecond, RetryInterval: 5 * time.Millisecond,
		Fn: func(context.Context) error { calls.Add(1); return boom }})
	g.Add(Task{Name: "controlplane", Fn: r.task("controlplane"), Dependencies: []string{infra}})
	err := g.Run(context.Background(), Opts{})
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("want *Error, got %v", err)
	}
	if got := fe.Tasks(); len(got) != 1 || got[0] != "infrastructure" {
		t.Fatalf("failed tasks %v", got)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("error does not wrap the task's error: %v", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("task was not retried within its timeout: %d calls", calls.Load())
	}
	if r.index("controlplane") >= 0 {
		t.Fatal("dependant of a failed task ran")
	}
}

func TestPermanentErrorIsNotRetried(t *testing.T) {
	g := New("permanent")
	var calls atomic.Int32
	g.Add(Task{Name: "validate", RetryInterval: time.Millisecond, Fn: func(context.Context) error {
		calls.Add(1)
		return Permanent(errors.New("invalid"))
	}})
	if err := g.Run(context.Background(), Opts{}); err == nil || !IsPermanent(err) {
		t.Fatalf("want permanent error, got %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("calls %d, want 1", calls.Load())
	}
}

func TestCancelledContextStopsTheRun(t *testing.T) {
	g := New("cancel")
	started := make(chan struct{})
	a := g.Add(Task{Name: "slow", Fn: func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() }})
	ran := false
	g.Add(Task{Name: "after", Dependencies: []string{a}, Fn: func(context.Context) error { ran = true; return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if err := g.Run(ctx, Opts{}); err == nil {
		t.Fatal("want an error after cancel")
	}
	if ran {
		t.Fatal("task after a cancelled one ran")
	}
}

func TestAddRejectsUnknownDependency(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("want panic")
		}
	}()
	New("bad").Add(Task{Name: "x", Dependencies: []string{"missing"}})
}
