package localnode

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TurnsEnv names how many long node tests (a landscape, or shoots, on local nodes) may run on the machine at once
// (TakeTurn): a number from 1 to Slots; unset, DefaultTurns.
const TurnsEnv = "TRELLIS_NODE_TESTS"

// turnDir holds the turns' lock files: the slots' directory (a test of TakeTurn uses its own).
var turnDir = lockDir

// DefaultTurns is the bound without TurnsEnv: one such test per core, and at least two.
func DefaultTurns() int { return max(2, runtime.NumCPU()) }

// Turns returns the bound TakeTurn keeps: TurnsEnv's value, or DefaultTurns. Anything else in TurnsEnv panics, naming
// the variable, so that a typo never runs the suite unbounded.
func Turns() int {
	v, ok := os.LookupEnv(TurnsEnv)
	if !ok || v == "" {
		return DefaultTurns()
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > Slots {
		panic(fmt.Sprintf("%s=%q: want a number of tests from 1 to %d", TurnsEnv, v, Slots))
	}
	return n
}

// TakeTurn waits until fewer than Turns tests on the machine hold a turn and takes one; it is given back once the
// test has ended and every cleanup registered after this call has run (cleanups run last first), so a test calls it
// before it starts anything. A turn is a lock file under /run/trellis-node, as a slot is: the bound holds across the
// test processes that go test runs side by side (test/e2e and test/shootcontrolplane), and a killed test's turn is
// free again at once.
//
// A shoot on a local node is a control plane of five processes and, with workers, a machine: several such tests at
// once on a small machine starve one another's probes and heartbeats (docs/testing.md), so they take turns. The wait
// comes before the test sets its own deadlines, which it would otherwise spend waiting.
func TakeTurn(t testing.TB) {
	t.Helper()
	release, err := waitTurn(Turns(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

// waitTurn waits for one of n turns, says on logf that it waits and when it got one, and returns its release.
func waitTurn(n int, logf func(format string, args ...any)) (func(), error) {
	if err := os.MkdirAll(turnDir, 0o755); err != nil {
		return nil, err
	}
	begin, waiting := time.Now(), false
	for {
		for i := range n {
			f, ok, err := tryLockFile(filepath.Join(turnDir, "turn-"+strconv.Itoa(i)+".lock"))
			if err != nil {
				return nil, err
			}
			if ok {
				if waiting {
					logf("took node test turn %d of %d after %v", i, n, time.Since(begin).Round(time.Second))
				}
				return func() { _ = f.Close() }, nil
			}
		}
		if !waiting {
			logf("waiting for a node test turn: %d long node tests hold all of them (%s)", n, TurnsEnv)
			waiting = true
		}
		time.Sleep(time.Second)
	}
}
