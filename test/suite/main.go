package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CacheEnv names the directory that keeps the test binaries: unset, "trellis/tests" under the user's cache directory;
// "off", a temporary directory removed when suite ends.
const CacheEnv = "TRELLIS_TEST_CACHE"

// killAfter is how long a test binary may run past its -test.timeout before it is sent SIGQUIT (go test's minute), and
// quitGrace how long it then has to print its goroutines and exit before it is killed.
const (
	killAfter = time.Minute
	quitGrace = 10 * time.Second
)

func main() {
	var cfg config
	flag.IntVar(&cfg.parallel, "p", 3, "test binaries run at once")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "each test binary's -test.timeout")
	flag.BoolVar(&cfg.race, "race", false, "build the test binaries with the race detector")
	flag.StringVar(&cfg.cache, "cache", os.Getenv(CacheEnv), "where the test binaries are kept (default \"trellis/tests\" under the user's cache directory; \"off\": a temporary directory)")
	flag.IntVar(&cfg.group, "group", 8, "packages per go test -c")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./test/suite [flags] packages... [-- test binary flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	for i, a := range patterns {
		if a == "--" {
			cfg.testArgs = patterns[i+1:]
			patterns = patterns[:i]
			break
		}
	}
	if len(patterns) == 0 || cfg.parallel < 1 || cfg.group < 1 || cfg.timeout <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg, patterns, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "suite: %v\n", err)
		os.Exit(2)
	}
	if !ok {
		fmt.Println("FAIL")
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	parallel int
	timeout  time.Duration
	race     bool
	cache    string
	group    int
	testArgs []string
}

// pkg is a package with tests: its import path, directory, and where its test binary is kept.
type pkg struct {
	path, dir string
	binDir    string // the directory go test -c -o writes its binary into
}

// binary is the path of the package's test binary, as go test -c -o DIR/ names it.
func (p pkg) binary() string { return filepath.Join(p.binDir, path.Base(p.path)+".test") }

// result is a package's outcome, printed when it ends.
type result struct {
	p       pkg
	ok      bool
	elapsed time.Duration
	output  []byte
	note    string // "[build failed]", "[no tests to run]"
}

// run lists the packages, builds their test binaries in order and runs them, printing each package's result as it
// ends; ok is false if any failed.
func run(ctx context.Context, cfg config, patterns []string, out io.Writer) (ok bool, err error) {
	pkgs, err := listPackages(ctx, patterns)
	if err != nil {
		return false, err
	}
	root, cleanup, err := cacheDir(cfg.cache, cfg.race, out)
	if err != nil {
		return false, err
	}
	defer cleanup()
	assignDirs(pkgs, root)

	// A build takes one of the -p slots, as the test binaries do, and links one binary at a time: at most -p programs
	// run at once, as go test -p runs its builds and tests.
	slots := make(chan struct{}, cfg.parallel)
	built := make(chan result, len(pkgs)) // a package whose binary is ready (ok) or did not build
	go func() {
		defer close(built)
		for _, g := range groups(pkgs, cfg.group) {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			rs := buildGroup(ctx, g, cfg.race)
			<-slots
			for _, r := range rs {
				built <- r
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()

	var (
		mu     sync.Mutex
		failed bool
		wg     sync.WaitGroup
	)
	report := func(r result) {
		mu.Lock()
		defer mu.Unlock()
		if !r.ok {
			failed = true
			_, _ = out.Write(r.output)
			if len(r.output) > 0 && !bytes.HasSuffix(r.output, []byte("\n")) {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "FAIL\t%s\t%.3fs%s\n", r.p.path, r.elapsed.Seconds(), prefixed(r.note))
			return
		}
		fmt.Fprintf(out, "ok  \t%s\t%.3fs%s\n", r.p.path, r.elapsed.Seconds(), prefixed(r.note))
	}
	for r := range built {
		if !r.ok {
			report(r)
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue // drain what is built, start nothing more
		}
		wg.Go(func() {
			defer func() { <-slots }()
			report(runTest(ctx, r.p, cfg))
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return !failed, nil
}

func prefixed(note string) string {
	if note == "" {
		return ""
	}
	return " " + note
}

// listPackages is the packages the patterns match that have tests, in the patterns' order, each once.
func listPackages(ctx context.Context, patterns []string) ([]pkg, error) {
	args := append([]string{"list", "-e", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}\t{{if .Error}}{{.Error}}{{end}}"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(patterns, " "), err, stderr.Bytes())
	}
	seen := map[string]bool{}
	var pkgs []pkg
	for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		// A package that does not load is kept: go test -c reports its error, and it fails the run.
		if seen[f[0]] || (f[2] == "0" && f[3] == "0" && f[4] == "") {
			continue
		}
		seen[f[0]] = true
		pkgs = append(pkgs, pkg{path: f[0], dir: f[1]})
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages with tests match %s", strings.Join(patterns, " "))
	}
	return pkgs, nil
}

// cacheDir is the directory the binaries are kept in, locked for this run: the cache's (per mode) when its lock is
// free, a temporary one otherwise or when the cache is "off".
func cacheDir(cache string, race bool, out io.Writer) (dir string, cleanup func(), err error) {
	temp := func() (string, func(), error) {
		d, err := os.MkdirTemp("", "trellis-tests-")
		if err != nil {
			return "", nil, err
		}
		return d, func() { _ = os.RemoveAll(d) }, nil
	}
	if cache == "off" {
		return temp()
	}
	if cache == "" {
		user, err := os.UserCacheDir()
		if err != nil {
			return "", nil, fmt.Errorf("%s unset and no user cache directory: %w", CacheEnv, err)
		}
		cache = filepath.Join(user, "trellis", "tests")
	}
	mode := "test"
	if race {
		mode = "race"
	}
	dir = filepath.Join(cache, mode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return "", nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		fmt.Fprintf(out, "suite: another run holds %s; building into a temporary directory\n", dir)
		return temp()
	}
	return dir, func() { _ = lock.Close() }, nil
}

// assignDirs gives each package its binary's directory under root: the packages whose import paths end in the same
// element (their binaries' names) are numbered in the order of their import paths, and the n-th goes to root/n, so a
// package keeps its directory whatever else a run lists, unless a package of the same name is added before it.
func assignDirs(pkgs []pkg, root string) {
	byName := map[string][]string{}
	for _, p := range pkgs {
		byName[path.Base(p.path)] = append(byName[path.Base(p.path)], p.path)
	}
	for _, paths := range byName {
		sort.Strings(paths)
	}
	for i := range pkgs {
		n := sort.SearchStrings(byName[path.Base(pkgs[i].path)], pkgs[i].path)
		pkgs[i].binDir = filepath.Join(root, fmt.Sprint(n))
	}
}

// groups splits pkgs, in order, into runs of at most size packages that share a binary directory, one go test -c each.
func groups(pkgs []pkg, size int) [][]pkg {
	var gs [][]pkg
	for _, p := range pkgs {
		if n := len(gs); n > 0 && len(gs[n-1]) < size && gs[n-1][0].binDir == p.binDir {
			gs[n-1] = append(gs[n-1], p)
			continue
		}
		gs = append(gs, []pkg{p})
	}
	return gs
}

// buildGroup builds the test binaries of g with one go test -c; when that fails, each package alone, so that a build
// failure is its package's and the others still run.
func buildGroup(ctx context.Context, g []pkg, race bool) []result {
	if out, err := goTestC(ctx, g, race); err == nil {
		rs := make([]result, len(g))
		for i, p := range g {
			rs[i] = result{p: p, ok: true}
		}
		return rs
	} else if len(g) == 1 {
		return []result{{p: g[0], output: out, note: "[build failed]"}}
	}
	var rs []result
	for _, p := range g {
		rs = append(rs, buildGroup(ctx, []pkg{p}, race)...)
	}
	return rs
}

// goTestC runs go test -c for the packages of one binary directory; the go command takes its flags from GOFLAGS.
func goTestC(ctx context.Context, g []pkg, race bool) ([]byte, error) {
	if err := os.MkdirAll(g[0].binDir, 0o755); err != nil {
		return []byte(err.Error()), err
	}
	// go test -c runs go vet too (its results cached per package) unless told not to.
	args := []string{"test", "-c", "-vet=off", "-p", "1", "-o", g[0].binDir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	for _, p := range g {
		args = append(args, p.path)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		for _, p := range g {
			if _, serr := os.Stat(p.binary()); serr != nil {
				return append(out, fmt.Sprintf("go test -c wrote no %s\n", p.binary())...), serr
			}
		}
	}
	return out, err
}

// runTest runs a package's test binary in its directory, as go test does: a minute past its timeout it is sent SIGQUIT
// (an interrupted run: SIGINT), and killed quitGrace later.
func runTest(ctx context.Context, p pkg, cfg config) result {
	runCtx, cancel := context.WithTimeout(ctx, cfg.timeout+killAfter)
	defer cancel()
	args := append([]string{"-test.paniconexit0", "-test.count=1", "-test.timeout=" + cfg.timeout.String()}, cfg.testArgs...)
	cmd := exec.CommandContext(runCtx, p.binary(), args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "PWD="+p.dir)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	cmd.Cancel = func() error {
		if ctx.Err() != nil {
			return cmd.Process.Signal(os.Interrupt)
		}
		return cmd.Process.Signal(syscall.SIGQUIT)
	}
	cmd.WaitDelay = quitGrace
	begin := time.Now()
	err := cmd.Run()
	if ctx.Err() == nil && runCtx.Err() != nil {
		fmt.Fprintf(&buf, "*** Test killed with quit: ran too long (%v).\n", cfg.timeout+killAfter)
	}
	r := result{p: p, ok: err == nil, elapsed: time.Since(begin), output: buf.Bytes()}
	if r.ok && bytes.Contains(r.output, []byte("testing: warning: no tests to run")) {
		r.note = "[no tests to run]"
	}
	return r
}
