package localnode

import (
	"strings"
	"testing"
	"time"
)

func TestTurnsBound(t *testing.T) {
	t.Setenv(TurnsEnv, "")
	if got := Turns(); got != DefaultTurns() || got < 2 {
		t.Errorf("unset: %d turns, want DefaultTurns %d (at least 2)", got, DefaultTurns())
	}
	t.Setenv(TurnsEnv, "1")
	if got := Turns(); got != 1 {
		t.Errorf("1: %d turns", got)
	}
	for _, bad := range []string{"0", "-1", "two", "65"} {
		t.Setenv(TurnsEnv, bad)
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), TurnsEnv) {
					t.Errorf("%q: want a panic naming %s, got %v", bad, TurnsEnv, r)
				}
			}()
			Turns()
		}()
	}
}

// With two turns held, a third waits until one is given back, and then gets it.
func TestWaitTurnBounds(t *testing.T) {
	turnDir = t.TempDir()
	defer func() { turnDir = lockDir }()
	first, err := waitTurn(2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	second, err := waitTurn(2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer first()  // again: a second close does nothing
	defer second() // and on a failure the waiter below gets its turn and ends
	third := make(chan func(), 1)
	go func() { // ends when it has a turn: the second's release below gives it one
		// Not t.Logf: after a failure above this may take its turn once the test has ended.
		release, err := waitTurn(2, func(string, ...any) {})
		if err != nil {
			t.Error(err)
			release = func() {}
		}
		third <- release
	}()
	select {
	case <-third:
		t.Fatal("a third turn was taken while two were held")
	case <-time.After(2 * time.Second):
	}
	second()
	select {
	case release := <-third:
		release()
	case <-time.After(10 * time.Second):
		t.Fatal("the third waiter did not get the turn given back")
	}
	first()
	// Both free again: two more at once, without waiting.
	a, err := waitTurn(2, func(string, ...any) { t.Error("waited for a free turn") })
	if err != nil {
		t.Fatal(err)
	}
	b, err := waitTurn(2, func(string, ...any) { t.Error("waited for a free turn") })
	if err != nil {
		t.Fatal(err)
	}
	a()
	b()
}
