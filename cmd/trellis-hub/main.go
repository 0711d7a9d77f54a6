// Command trellis-hub serves Gardener's API (core.gardener.cloud and friends) over gRPC and REST on one TLS port,
// stored in etcd. With no flags it serves on 127.0.0.1:8443 with an embedded etcd under ./trellis-data, and writes
// the CA certificate to ./trellis-data/pki/ca.crt and an admin token to ./trellis-data/admin-token on first start.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/trellis-dev/trellis/hub"
)

func main() {
	var cfg hub.Config
	fs := flag.NewFlagSet("trellis-hub", flag.ExitOnError)
	cfg.AddFlags(fs)
	tc := tracing.Config{ServiceName: "trellis-hub"}
	tc.AddFlags(fs)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	_ = fs.Parse(os.Args[1:])

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "log-level: %v\n", err)
		os.Exit(2)
	}
	opts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, opts)
	}
	cfg.Logger = slog.New(handler)

	stopTracing, err := tracing.Setup(context.Background(), tc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trellis-hub: %v\n", err)
		os.Exit(2)
	}
	defer func() { _ = stopTracing(context.Background()) }()
	h, err := hub.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trellis-hub: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := h.Run(ctx); err != nil {
		cfg.Logger.Error("trellis-hub stopped", "err", err)
		os.Exit(1)
	}
}
