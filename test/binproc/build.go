package binproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// CacheEnv names the directory where Build links its binaries before copying them out: unset, "trellis/binproc"
// under the user's cache directory (os.UserCacheDir); "off" links every build anew in its own directory.
const CacheEnv = "TRELLIS_BINPROC_CACHE"

// Build builds the main packages pkgs (import paths of this module, such as
// "github.com/trellis-dev/trellis/cmd/trellis-hub") into dir with the go command. The binaries are named after their
// packages' directories.
//
// go build relinks a binary whenever its output is new, and linking is most of a build whose packages Go has cached
// (6–9 CPU-seconds for trellis-hub on a small machine): every test process that built its binaries into a fresh
// directory linked them again. So Build links into a directory of the machine's cache named for pkgs (CacheEnv), where
// go build finds the binary of the same sources and flags up to date and leaves it (other sources or flags: it links
// and replaces it), and copies the binaries from there into dir: dir's binaries are the test's own to change. A lock
// file in that directory serializes the processes that build the same packages.
func Build(ctx context.Context, dir string, pkgs ...string) error {
	cache, err := buildCache(pkgs)
	if err != nil {
		return err
	}
	if cache == "" {
		return goBuild(ctx, dir, pkgs)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	unlock, err := lockDir(ctx, cache)
	if err != nil {
		return err
	}
	defer unlock()
	if err := goBuild(ctx, cache, pkgs); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		if err := copyExecutable(filepath.Join(dir, name), filepath.Join(cache, name)); err != nil {
			return err
		}
	}
	return nil
}

// goBuild runs go build -o dir/ pkgs.
func goBuild(ctx context.Context, dir string, pkgs []string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, gobin, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	// Static, so that a landscape with nodes can put a binary (provider-local) into an image.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}

// buildCache is the directory Build links pkgs in, or "" when CacheEnv turns the cache off.
func buildCache(pkgs []string) (string, error) {
	root := os.Getenv(CacheEnv)
	switch root {
	case "off":
		return "", nil
	case "":
		user, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("binproc: no cache directory for builds (set %s, or %s=off): %w", CacheEnv, CacheEnv, err)
		}
		root = filepath.Join(user, "trellis", "binproc")
	}
	sum := sha256.Sum256([]byte(strings.Join(pkgs, "\n")))
	return filepath.Join(root, hex.EncodeToString(sum[:8])), nil
}

// lockDir takes an exclusive lock on dir/.lock, waiting for it while ctx lasts, and returns its release. The lock is
// the open file's: a killed process's goes with it.
func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			_ = f.Close()
			return nil, fmt.Errorf("binproc: lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// copyExecutable copies src to dst (replacing it) as an executable, through a temporary file in dst's directory, so
// that a process running the old dst keeps its file.
func copyExecutable(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(out.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(out.Name())
		return fmt.Errorf("binproc: copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// ModuleRoot is the first directory at or above the working directory that holds go.mod: where tests and
// benchmarks, which run in their package's directory or the repository's, find bin/ and bin/testbin.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above %s", wd)
		}
		dir = parent
	}
}
