// Command trellis-agent is the seed agent (the gardenlet's role): it runs in a seed cluster, dials out to the hub,
// bootstraps its client certificate with a bootstrap token, registers its Seed, heartbeats and keeps a local copy of
// what the hub assigns to its seed. docs/agent.md describes the configuration file given with --config.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/tracing"
)

// version is the agent's build version; release builds set it with -ldflags "-X main.version=...".
var version = ""

// init turns heap profiling off: the agent serves no profiles, and the profile's bucket table alone is 1.4 MiB. The
// packages initialized before main's have sampled a few allocations already; nothing is sampled after.
func init() { runtime.MemProfileRate = 0 }

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("trellis-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the AgentConfiguration file (required)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides logLevel of the configuration)")
	logFormat := fs.String("log-format", "", "json or text (overrides logFormat of the configuration)")
	healthAddr := fs.String("health-probes-address", "", "host:port of /healthz and /readyz (overrides server.healthProbes; default 127.0.0.1:2728)")
	metricsAddr := fs.String("metrics-address", "", "host:port of /metrics (overrides server.metrics; default 127.0.0.1:2729)")
	var tc tracing.Config
	tc.AddFlags(fs)
	printVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *printVersion {
		fmt.Fprintln(stderr, buildVersion())
		return 0
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "trellis-agent: --config is required")
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "trellis-agent: %v\n", err)
		return 2
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	if *logFormat != "" {
		cfg.LogFormat = *logFormat
	}
	// Tracing: the configuration's tracing section, the flags given on the command line win.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	t := cfg.Tracing
	if given["tracing"] {
		t.Enabled = tc.Enabled
	}
	if given["tracing-endpoint"] {
		t.Endpoint = tc.Endpoint
	}
	if given["tracing-insecure"] {
		t.Insecure = tc.Insecure
	}
	if given["tracing-sampling-ratio"] {
		t.SamplingRatio = &tc.SamplingRatio
	}
	tc = tracing.Config{ServiceName: "trellis-agent", Enabled: t.Enabled, Endpoint: t.Endpoint, Insecure: t.Insecure, SamplingRatio: 1}
	if t.SamplingRatio != nil {
		tc.SamplingRatio = *t.SamplingRatio
	}
	if *healthAddr != "" {
		cfg.Server.HealthProbes = *healthAddr
	}
	if *metricsAddr != "" {
		cfg.Server.Metrics = *metricsAddr
	}
	logger, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "trellis-agent: %v\n", err)
		return 2
	}

	// The seed's informers (client-go reflectors under controller-runtime's cache) log through controller-runtime's
	// global logger: their list and watch failures go to the agent's log.
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
	a, err := agent.New(agent.Config{Configuration: cfg, Logger: logger, Version: buildVersion()})
	if err != nil {
		fmt.Fprintf(stderr, "trellis-agent: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.Setup(ctx, tc)
	if err != nil {
		fmt.Fprintf(stderr, "trellis-agent: %v\n", err)
		return 2
	}
	defer func() { _ = stopTracing(context.Background()) }()
	if err := a.Run(ctx); err != nil {
		logger.Error("trellis-agent stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want json or text", format)
}

// buildVersion is version, else the module version the binary was built from.
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
