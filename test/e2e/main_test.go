package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/trellis-dev/trellis/test/binproc"
)

// The package runs its tests side by side and bounds them itself, by kind, instead of go test's -parallel (one test
// per core), which counts a test that waits as one that runs:
//   - a long node test (a landscape or shoots on local nodes) calls t.Parallel and, once it has built what it runs,
//     localnode.TakeTurn: the machine-wide bound on such tests, shared with test/shootcontrolplane;
//   - every other test calls lightTest: at most lightTests of them at once in this package.
//
// With -parallel bounding all of them, node tests waiting for a turn held the package's slots for up to 22 minutes
// (another package's node tests held the turns), and the other tests queued behind them (docs/testing.md).

// unboundedParallel is the -parallel that TestMain sets unless the command line gives one: more than the package
// has tests, so that only turns and lightTest bound them.
const unboundedParallel = 64

// lightTests is how many tests without nodes run at once in this package (lightTest).
const lightTests = 1

// lightTurns holds a token per light test that runs.
var lightTurns = make(chan struct{}, lightTests)

// lightTest marks t as a test without nodes: it runs beside the node tests, one of lightTests at a time, from the
// package's start. It returns once t may run; the token is given back after t's other cleanups.
func lightTest(t *testing.T) {
	t.Helper()
	t.Parallel()
	lightTurns <- struct{}{}
	t.Cleanup(func() { <-lightTurns })
}

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(unboundedParallel)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "trellis-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// binDir holds the binaries built for this test binary; TestMain removes it.
var binDir string

// builds are the binaries built for this test binary, by directory under binDir.
var builds sync.Map // name → *build

type build struct {
	once sync.Once
	err  error
}

// binaries builds the main packages pkgs into <binDir>/<name> once per test binary and returns that directory (go's
// build cache makes it quick when nothing changed).
func binaries(t *testing.T, name string, pkgs ...string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(name, &build{})
	b := v.(*build)
	dir := filepath.Join(binDir, name)
	b.once.Do(func() { b.err = binproc.Build(context.Background(), dir, pkgs...) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return dir
}

// hubBinary builds cmd/trellis-hub once per test binary.
func hubBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(binaries(t, "hub", "github.com/trellis-dev/trellis/cmd/trellis-hub"), "trellis-hub")
}
