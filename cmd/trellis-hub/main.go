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
	if len(os.Args) > 1 && os.Args[1] == "restore" {
		os.Exit(restore(os.Args[2:]))
	}
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

// restore is `trellis-hub restore --snapshot F --data-dir D`: it writes the snapshot into D as the embedded etcd's
// data (docs/operations.md, Backups).
func restore(args []string) int {
	fs := flag.NewFlagSet("trellis-hub restore", flag.ExitOnError)
	snapshot := fs.String("snapshot", "", "snapshot file to restore (from --backup-dir, or etcdctl snapshot save)")
	dataDir := fs.String("data-dir", "trellis-data", "data directory to restore into; it must hold no etcd data")
	_ = fs.Parse(args)
	if err := hub.Restore(context.Background(), *snapshot, *dataDir); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-hub restore: %v\n", err)
		return 1
	}
	fmt.Printf("restored %s into %s; start trellis-hub --data-dir %s (with the same encryption-keys)\n", *snapshot, *dataDir, *dataDir)
	return 0
}
