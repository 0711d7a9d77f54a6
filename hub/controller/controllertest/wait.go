package controllertest

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/test/timescale"
)

// Bound is how long a test waits for controllers to react (they react at once; the bound leaves room for a loaded
// machine): 20 s, scaled by TRELLIS_TEST_TIMEOUT_SCALE (test/timescale; make test runs the race detector's run of these
// packages beside everything else).
var Bound = timescale.Scale(20 * time.Second)

// poll is how often the waits look at their condition.
const poll = 20 * time.Millisecond

// stepPause is how long StepUntil lets the controllers react to a step of the clock.
const stepPause = 50 * time.Millisecond

// Eventually waits until cond holds; the test fails when it does not within Bound.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", Bound, what)
		}
		time.Sleep(poll)
	}
}

// Consistently fails the test when cond turns false within d.
func Consistently(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(poll)
	}
}

// StepUntil moves the fake clock by step until cond holds, pausing after each step for the controllers to react
// (a controller's timer is set a moment after its reconciliation, so one step may come too early); the test fails
// when cond does not hold within Bound.
func StepUntil(t testing.TB, clk *clocktesting.FakeClock, what string, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (clock at %s)", Bound, what, clk.Now())
		}
		clk.Step(step)
		time.Sleep(stepPause)
	}
}
