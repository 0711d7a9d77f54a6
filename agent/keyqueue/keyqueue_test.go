package keyqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// calls counts the syncs per key.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[key]++
	return c.n[key]
}

func (c *calls) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRetriesRequeuesAndStops: a failing key is retried with backoff until it succeeds, a key asking to be looked at
// again is, a key that succeeds is synced once, and Run returns when its context ends.
func TestRetriesRequeuesAndStops(t *testing.T) {
	c := &calls{n: map[string]int{}}
	q := New(Config{Name: "test", RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond,
		Sync: func(_ context.Context, key string) (time.Duration, error) {
			n := c.inc(key)
			switch key {
			case "fails-twice":
				if n <= 2 {
					return 0, errors.New("not yet")
				}
			case "again":
				if n < 3 {
					return time.Millisecond, nil
				}
			}
			return 0, nil
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, 2)
	}()
	for _, k := range []string{"fails-twice", "again", "once"} {
		q.Add(k)
	}
	eventually(t, "the failing key to succeed on its third sync", func() bool { return c.get("fails-twice") == 3 })
	eventually(t, "the requeued key to be synced three times", func() bool { return c.get("again") == 3 })
	time.Sleep(50 * time.Millisecond) // time for wrongly repeated syncs to show
	if n := c.get("once"); n != 1 {
		t.Errorf("a key that succeeded was synced %d times, want 1", n)
	}
	if n := c.get("fails-twice"); n != 3 {
		t.Errorf("the failing key was synced %d times after it succeeded, want 3", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	q.Add("after") // ignored by a shut-down queue
	if n := c.get("after"); n != 0 {
		t.Errorf("a key added after Run returned was synced %d times", n)
	}
}

// TestOneWorkerPerKey: a key added while it is being synced is synced again afterwards, never concurrently.
func TestOneWorkerPerKey(t *testing.T) {
	var (
		mu              sync.Mutex
		running, maxRun int
		total           int
	)
	release := make(chan struct{})
	q := New(Config{Name: "test", RetryMin: time.Millisecond, RetryMax: time.Millisecond,
		Sync: func(context.Context, string) (time.Duration, error) {
			mu.Lock()
			running++
			maxRun = max(maxRun, running)
			total++
			first := total == 1
			mu.Unlock()
			if first {
				<-release
			}
			mu.Lock()
			running--
			mu.Unlock()
			return 0, nil
		}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go q.Run(ctx, 4)
	q.Add("k")
	eventually(t, "the first sync to start", func() bool { mu.Lock(); defer mu.Unlock(); return total == 1 })
	q.Add("k")
	q.Add("k") // deduplicated with the previous one while it waits
	close(release)
	eventually(t, "the second sync", func() bool { mu.Lock(); defer mu.Unlock(); return total == 2 })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if maxRun != 1 || total != 2 {
		t.Errorf("syncs of one key: %d at once at most, %d in all; want 1 and 2", maxRun, total)
	}
}
