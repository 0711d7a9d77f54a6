package binproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build builds the main packages pkgs (import paths of this module, such as
// "github.com/trellis-dev/trellis/cmd/trellis-hub") into dir with the go command; go's build cache makes a rebuild
// of unchanged sources quick. The binaries are named after their packages' directories.
func Build(ctx context.Context, dir string, pkgs ...string) error {
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
