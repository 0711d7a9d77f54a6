package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/test/bench/benchcmd"
	"github.com/trellis-dev/trellis/test/landscape"
)

// benchConfig is the run's configuration, from the flags.
type benchConfig struct {
	n               int
	seeds           int
	parallel        int
	solo            bool
	idle            time.Duration
	binDir          string
	testBinDir      string
	out             string
	keep            bool
	sample          time.Duration
	phaseTimeout    time.Duration
	timeout         time.Duration
	concurrentSyncs int
	providerWorkers int
	errorThreshold  time.Duration
	agentLogLevel   string
	verbose         bool
}

func (c *benchConfig) validate() error {
	var errs []error
	if c.n < 1 || c.n > 999 {
		errs = append(errs, errors.New("-n must be between 1 and 999"))
	}
	if c.seeds < 1 || c.seeds > 10 {
		errs = append(errs, errors.New("-seeds must be between 1 and 10"))
	}
	if c.parallel < 0 {
		errs = append(errs, errors.New("-parallel must not be negative"))
	}
	if c.sample < 10*time.Millisecond {
		errs = append(errs, errors.New("-sample must be at least 10ms"))
	}
	if c.phaseTimeout < time.Second || c.timeout < c.phaseTimeout {
		errs = append(errs, errors.New("-phase-timeout must be at least 1s and -timeout at least -phase-timeout"))
	}
	if c.idle < 0 {
		errs = append(errs, errors.New("-idle must not be negative"))
	}
	if c.concurrentSyncs < 0 || c.concurrentSyncs > 100 {
		errs = append(errs, errors.New("-concurrent-syncs must be between 0 (the agent's default) and 100"))
	}
	if c.providerWorkers < 0 {
		errs = append(errs, errors.New("-provider-workers must not be negative"))
	}
	if c.errorThreshold < 0 {
		errs = append(errs, errors.New("-extension-error-threshold must not be negative"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg benchConfig
	flag.IntVar(&cfg.n, "n", 20, "number of shoots")
	flag.IntVar(&cfg.seeds, "seeds", 1, "number of seeds, each with its agent and provider-local")
	flag.IntVar(&cfg.parallel, "parallel", 0, "API calls in flight per phase (0: all -n at once)")
	flag.BoolVar(&cfg.solo, "solo", true, "first run one shoot alone through create, update and delete")
	flag.DurationVar(&cfg.idle, "idle", 5*time.Second, "measure the landscape at rest this long before the shoots (0 skips it)")
	flag.StringVar(&cfg.binDir, "bin-dir", "", "directory with trellis-hub, trellis-agent, provider-local and localseed (default: go build them into a temporary directory)")
	flag.StringVar(&cfg.testBinDir, "testbin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default $KUBEBUILDER_ASSETS, else bin/testbin)")
	flag.StringVar(&cfg.out, "out", "", "JSON results (default bin/bench/shoots-<n>.json)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the landscape's directory (data and logs); it is always kept when the run fails")
	flag.DurationVar(&cfg.sample, "sample", 500*time.Millisecond, "RSS sampling interval")
	flag.DurationVar(&cfg.phaseTimeout, "phase-timeout", 5*time.Minute, "time limit for every shoot of a phase to get there")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "time limit of the whole run")
	flag.IntVar(&cfg.concurrentSyncs, "concurrent-syncs", 0, "the agents' controllers.shoot.concurrentSyncs (0: the agent's default)")
	flag.IntVar(&cfg.providerWorkers, "provider-workers", 0, "provider-local's --max-concurrent-reconciles (0: its default)")
	flag.DurationVar(&cfg.errorThreshold, "extension-error-threshold", 0, "the agents' controllers.shoot.extensionErrorThreshold (0: the landscape's default)")
	flag.StringVar(&cfg.agentLogLevel, "agent-log-level", "debug", "the agents' log level; debug logs every flow task with its duration, for the table of the slowest tasks (\"\": the agent's default)")
	flag.BoolVar(&cfg.verbose, "v", false, "print the landscape's steps")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.parallel == 0 || cfg.parallel > cfg.n {
		cfg.parallel = cfg.n
	}
	if cfg.out == "" {
		cfg.out = filepath.Join("bin", "bench", fmt.Sprintf("shoots-%d.json", cfg.n))
	}

	benchcmd.Main("bench-shoots", cfg.timeout, cfg.out, func(ctx context.Context) (benchcmd.Report, bool, error) {
		rep, err := run(ctx, cfg)
		if rep == nil {
			return nil, false, err
		}
		return rep, rep.Failed, err
	})
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// seedNames are the seeds of a run: local, local-2, local-3, …
func seedNames(n int) []string {
	out := []string{landscape.DefaultSeedName}
	for i := 2; i <= n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", landscape.DefaultSeedName, i))
	}
	return out
}

// run brings the landscape up, runs the phases and stops the landscape. It returns the report so far even when a
// phase fails; err when the run could not go on.
func run(ctx context.Context, cfg benchConfig) (rep *report, err error) {
	rep = &report{
		N: cfg.n, Seeds: cfg.seeds, Parallel: cfg.parallel, Started: time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), SampleMs: ms(cfg.sample),
		ConcurrentSyncs: cfg.concurrentSyncs, ProviderWorkers: cfg.providerWorkers,
	}
	if rep.ConcurrentSyncs == 0 {
		rep.ConcurrentSyncs = config.DefaultShootConcurrentSyncs
	}
	bins, err := prepareBinaries(ctx, cfg, rep)
	if err != nil {
		return nil, err
	}
	defer bins.cleanup()

	dir, err := os.MkdirTemp("", "trellis-bench-shoots-")
	if err != nil {
		return nil, err
	}
	keep := cfg.keep
	defer func() {
		if keep || err != nil || rep.Failed {
			fmt.Printf("the landscape's files (data, logs) are kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	lcfg := landscape.Config{
		Dir: dir, BinDir: bins.dir, TestBinDir: bins.testDir, RequireProviderLocal: true,
		ExtensionErrorThreshold: cfg.errorThreshold,
		AgentMutate: func(_ string, c *config.AgentConfiguration) {
			if cfg.concurrentSyncs > 0 {
				n := int32(cfg.concurrentSyncs)
				c.Controllers.Shoot.ConcurrentSyncs = &n
			}
			if cfg.agentLogLevel != "" {
				c.LogLevel = cfg.agentLogLevel
			}
		},
	}
	for _, s := range seedNames(cfg.seeds) {
		lcfg.Seeds = append(lcfg.Seeds, landscape.SeedConfig{Name: s})
	}
	if cfg.providerWorkers > 0 {
		lcfg.ProviderLocalArgs = []string{fmt.Sprintf("--max-concurrent-reconciles=%d", cfg.providerWorkers)}
	}
	if cfg.verbose {
		lcfg.Log = os.Stdout
	}
	rep.ExtensionErrorThresholdMs = ms(landscape.DefaultExtensionErrorThreshold)
	if cfg.errorThreshold > 0 {
		rep.ExtensionErrorThresholdMs = ms(cfg.errorThreshold)
	}
	logf("starting a landscape with %d seed(s) in %s", cfg.seeds, dir)
	begin := time.Now()
	l, err := landscape.Start(ctx, lcfg)
	if err != nil {
		return rep, err
	}
	rep.LandscapeStartSec = time.Since(begin).Seconds()
	logf("landscape ready in %s: hub %s, pids %v", time.Since(begin).Round(100*time.Millisecond), l.HubURL, l.Pids())
	defer func() {
		logf("stopping the landscape")
		rep.LogProblems = logProblems(l.LogDir, 3)
		if serr := l.Stop(); serr != nil {
			fmt.Fprintln(os.Stderr, "bench-shoots: stopping the landscape:", serr)
		}
	}()

	b, err := newBench(ctx, cfg, l, rep)
	if err != nil {
		return rep, err
	}
	defer b.close()
	return rep, b.run(ctx)
}
