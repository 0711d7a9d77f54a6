package main

import (
	"math"
	"testing"
)

// TestSpeedRatio checks which target speedRatio compares with which, for rates and latencies: the hub over the peer
// and over an earlier build, a target with its loops on over its loops-off twin (the hub where the twin lacks the
// value), and no ratio where a value is missing or the divisor is not positive.
func TestSpeedRatio(t *testing.T) {
	values := map[string]float64{"hub": 100, "peer": 10, "hub+loops": 80, "before": 50, "before+loops": 25, "zero": 0}
	benches := []*bench{}
	for _, name := range []string{"hub", "peer", "hub+loops", "before", "before+loops", "zero", "missing"} {
		benches = append(benches, &bench{t: &target{name: name, loops: name == "hub+loops" || name == "before+loops"}})
	}
	value := func(b *bench) (float64, bool) { v, ok := values[b.t.name]; return v, ok }
	byName := func(name string) *bench {
		for _, b := range benches {
			if b.t.name == name {
				return b
			}
		}
		t.Fatalf("no target %s", name)
		return nil
	}
	for _, c := range []struct {
		target         string
		higherIsBetter bool
		want           float64 // NaN: no ratio
	}{
		{"peer", true, 10},            // hub ÷ peer
		{"peer", false, 0.1},          // a latency: peer ÷ hub
		{"before", true, 2},           // hub ÷ before
		{"hub+loops", true, 0.8},      // hub+loops ÷ hub
		{"hub+loops", false, 1.25},    // hub ÷ hub+loops
		{"before+loops", true, 0.5},   // before+loops ÷ before, not ÷ hub
		{"before+loops", false, 2},    // before ÷ before+loops
		{"zero", true, math.NaN()},    // a rate of 0 divides
		{"missing", true, math.NaN()}, // the target lacks the value
	} {
		got, ok := speedRatio(benches, byName(c.target), value, c.higherIsBetter)
		if math.IsNaN(c.want) {
			if ok {
				t.Errorf("%s (higher is better %v): ratio %v, want none", c.target, c.higherIsBetter, got)
			}
			continue
		}
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s (higher is better %v): ratio %v (%v), want %v", c.target, c.higherIsBetter, got, ok, c.want)
		}
	}

	// Without its loops-off twin, a loops target is compared with the hub.
	delete(values, "before")
	if got, ok := speedRatio(benches, byName("before+loops"), value, true); !ok || got != 0.25 {
		t.Errorf("before+loops without before: ratio %v (%v), want 0.25 (÷ hub)", got, ok)
	}
	// Without the base's value there is no ratio at all.
	delete(values, "hub")
	if got, ok := speedRatio(benches, byName("peer"), value, true); ok {
		t.Errorf("peer without the hub's value: ratio %v, want none", got)
	}
}
