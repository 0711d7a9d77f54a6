package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
)

// landscapeBinaries are what a landscape runs from its BinDir, and the packages they are built from.
var landscapeBinaries = map[string]string{
	"trellis-hub":    "github.com/trellis-dev/trellis/cmd/trellis-hub",
	"trellis-agent":  "github.com/trellis-dev/trellis/cmd/trellis-agent",
	"provider-local": "github.com/trellis-dev/trellis/cmd/provider-local",
	"localseed":      "github.com/trellis-dev/trellis/test/localseed",
}

// seedBinaries are what each seed runs from the TestBinDir.
var seedBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// binaries are the directories the landscape takes its binaries from.
type binaries struct {
	dir, testDir string
	cleanup      func()
}

// prepareBinaries checks the seed binaries, then builds the landscape's into a temporary directory or checks
// -bin-dir. Missing binaries are an error that says how to get them.
func prepareBinaries(ctx context.Context, cfg benchConfig, rep *report) (*binaries, error) {
	root, err := binproc.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("%w: run from the repository", err)
	}
	b := &binaries{testDir: cfg.testBinDir, cleanup: func() {}}
	if b.testDir == "" {
		b.testDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if b.testDir == "" {
		b.testDir = filepath.Join(root, "bin", "testbin")
	}
	if b.testDir, err = filepath.Abs(b.testDir); err != nil {
		return nil, err
	}
	if missing := missingExecutables(b.testDir, seedBinaries); len(missing) > 0 {
		return nil, fmt.Errorf("missing %s: run `make testbin` (or pass -testbin-dir)", strings.Join(missing, ", "))
	}
	rep.TestBinDir = b.testDir

	if cfg.binDir != "" {
		if b.dir, err = filepath.Abs(cfg.binDir); err != nil {
			return nil, err
		}
		if missing := missingExecutables(b.dir, slices.Sorted(maps.Keys(landscapeBinaries))); len(missing) > 0 {
			return nil, fmt.Errorf("missing %s: run `go build -o %s/ ./cmd/trellis-hub ./cmd/trellis-agent "+
				"./cmd/provider-local ./test/localseed`, or leave out -bin-dir to build them into a temporary directory",
				strings.Join(missing, ", "), cfg.binDir)
		}
		rep.BinDir = b.dir
		return b, nil
	}

	dir, err := os.MkdirTemp("", "trellis-bench-shoots-bin-")
	if err != nil {
		return nil, err
	}
	b.dir, b.cleanup = dir, func() { _ = os.RemoveAll(dir) }
	var pkgs []string
	for _, name := range slices.Sorted(maps.Keys(landscapeBinaries)) {
		pkgs = append(pkgs, landscapeBinaries[name])
	}
	logf("building the landscape's binaries into %s", dir)
	begin := time.Now()
	if err := binproc.Build(ctx, dir, pkgs...); err != nil {
		b.cleanup()
		return nil, err
	}
	rep.BuildSec = time.Since(begin).Seconds()
	rep.BinDir = "built into a temporary directory"
	rep.Source = sourceVersion(ctx, root)
	logf("built in %s", time.Since(begin).Round(100*time.Millisecond))
	return b, nil
}

// missingExecutables returns the paths of names in dir that are not executable files.
func missingExecutables(dir string, names []string) []string {
	var missing []string
	for _, name := range names {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	return missing
}

// sourceVersion names what the binaries were built from: the commit, and whether tracked files differed from it
// (read without taking git's optional locks, so that it never gets in the way of other git commands).
func sourceVersion(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "--no-optional-locks", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += " with uncommitted changes"
	}
	return v
}
