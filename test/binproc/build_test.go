package binproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
)

// TestBuildLinksOnce: a second Build of the same package into another directory finds the cached binary up to date
// (not linked again, not rewritten), and each directory gets a copy of its own that runs: changing one changes
// neither the cache nor the other.
func TestBuildLinksOnce(t *testing.T) {
	const pkg = "github.com/trellis-dev/trellis/deploy/images/pause"
	cache := t.TempDir()
	t.Setenv(binproc.CacheEnv, cache)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	first, second := t.TempDir(), t.TempDir()
	if err := binproc.Build(ctx, first, pkg); err != nil {
		t.Fatal(err)
	}
	cached, err := filepath.Glob(filepath.Join(cache, "*", "pause"))
	if err != nil || len(cached) != 1 {
		t.Fatalf("cache holds %v (%v), want one pause binary", cached, err)
	}
	before, err := os.Stat(cached[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := binproc.Build(ctx, second, pkg); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(cached[0])
	if err != nil {
		t.Fatal(err)
	}
	// go build touches an up-to-date binary; linking again would have put a new file in its place.
	if !os.SameFile(before, after) {
		t.Error("the second build linked the cached binary again")
	}
	a, b := filepath.Join(first, "pause"), filepath.Join(second, "pause")
	for _, bin := range []string{a, b} {
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(fi, after) || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s: the cache's own file, or not executable (%v)", bin, fi.Mode())
		}
		// It runs: pause waits for a signal until it is killed. (Whether it exits 0 on SIGTERM depends on the signal
		// arriving after its handler is installed, which nothing outside it can tell: the Go runtime catches SIGTERM
		// from its start.)
		cmd := exec.CommandContext(ctx, bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Process.Kill()
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("%s: %v, want killed by SIGKILL", bin, err)
		}
	}
	if err := os.WriteFile(a, []byte("changed by the test"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{b, cached[0]} {
		if fi, err := os.Stat(bin); err != nil || fi.Size() == int64(len("changed by the test")) {
			t.Errorf("%s changed with %s (%v)", bin, a, err)
		}
	}
}

// TestBuildCacheOff: with the cache off, Build links into the directory itself and leaves no cache behind.
func TestBuildCacheOff(t *testing.T) {
	t.Setenv(binproc.CacheEnv, "off")
	// Go's own cache stays where it is; the user's cache directory (where Build's would go) is the test's.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	if err := binproc.Build(t.Context(), dir, "github.com/trellis-dev/trellis/deploy/images/pause"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pause")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(os.Getenv("XDG_CACHE_HOME")); len(ents) != 0 {
		t.Errorf("the cache is off, but the user's cache directory holds %v", ents)
	}
}
