package backoff

import (
	"testing"
	"time"
)

func TestNextGrowsToMaxWithFullJitter(t *testing.T) {
	one := func() float64 { return 0.999999 }
	b := &Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second, ResetAfter: time.Minute, Rand: one}
	now := time.Unix(1000, 0)
	want := []time.Duration{200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000}
	for i, w := range want {
		w *= time.Millisecond
		if c := b.Ceiling(); c != w {
			t.Fatalf("attempt %d: ceiling %v, want %v", i, c, w)
		}
		d := b.Next(now)
		if d >= w || d < w*99/100 {
			t.Fatalf("attempt %d: delay %v, want just under %v", i, d, w)
		}
		now = now.Add(d + time.Second) // the attempt fails after a second
	}
}

func TestNextIsUniformBelowCeiling(t *testing.T) {
	b := &Backoff{Initial: time.Second, Max: time.Second, ResetAfter: time.Hour}
	now := time.Unix(0, 0)
	var low, high int
	for range 10000 {
		d := b.Next(now)
		if d < 0 || d >= time.Second {
			t.Fatalf("delay %v outside [0, 1s)", d)
		}
		if d < 100*time.Millisecond {
			low++
		}
		if d >= 900*time.Millisecond {
			high++
		}
	}
	// Full jitter: both ends of the window are used (about 1,000 each).
	if low < 700 || high < 700 {
		t.Fatalf("delays not spread over the window: %d below 100ms, %d above 900ms", low, high)
	}
}

func TestNextResetsAfterQuietPeriod(t *testing.T) {
	b := &Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, ResetAfter: time.Minute, Rand: func() float64 { return 0.5 }}
	now := time.Unix(0, 0)
	for range 5 {
		now = now.Add(b.Next(now) + time.Second)
	}
	if c := b.Ceiling(); c != 3200*time.Millisecond {
		t.Fatalf("ceiling after 5 failures %v, want 3.2s", c)
	}
	// An attempt that ran for 59s (plus the delay before it) does not reset ...
	d := b.Next(now)
	now = now.Add(d + 59*time.Second)
	if got := b.Next(now); got != 3200*time.Millisecond {
		t.Fatalf("delay after a 59s attempt %v, want 3.2s (no reset)", got)
	}
	// ... one that stayed up for a minute does.
	b.Next(now)
	now = now.Add(10*time.Second + time.Minute)
	if got := b.Next(now); got != 50*time.Millisecond {
		t.Fatalf("delay after a quiet minute %v, want 50ms (reset to Initial)", got)
	}
}

func TestReset(t *testing.T) {
	b := &Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Minute}
	for range 4 {
		b.Next(time.Unix(0, 0))
	}
	b.Reset()
	if c := b.Ceiling(); c != time.Second {
		t.Fatalf("ceiling after Reset %v, want 1s", c)
	}
}
