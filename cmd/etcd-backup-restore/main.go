// Command etcd-backup-restore is the backup side of a shoot's etcd, Gardener's etcd-backup-restore in small: the
// agent runs it beside each shoot's etcd-main when the shoot's seed has backups.
//
//	etcd-backup-restore restore --data-dir D --store S [--name N --peer-url U --owner UID:GID]
//
// runs as the etcd pod's init container: when D holds no etcd member and the store S (the shoot's BackupEntry
// directory in the seed's bucket) holds a snapshot, it restores the newest snapshot into D (etcdutl's snapshot
// restore), then hands D and S to the owner etcd and the sidecar run as. Otherwise it leaves D alone.
//
//	etcd-backup-restore server --store S --endpoints E --cacert C --cert F --key K [--interval I --keep N --listen A]
//
// runs as the sidecar: a full snapshot (etcd's Maintenance.Snapshot through clientv3) when the newest in S is older
// than I, then every I; on demand with POST /snapshot/full (what the agent asks for before a migration); GET
// /snapshot/latest names the newest; /healthz answers 200 once a snapshot was taken. Snapshots are named
// full-<UTC time>.db and the oldest beyond --keep are deleted (never the newest).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run runs a subcommand; it returns the exit code: 2 for a bad command line, 1 for a failure.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: etcd-backup-restore restore|server [flags]")
		return 2
	}
	var err error
	switch args[0] {
	case "restore":
		var o *restoreOptions
		if o, err = parseRestore(args[1:], stderr); err == nil {
			err = o.run(log)
		}
	case "server":
		var o *serverOptions
		if o, err = parseServer(args[1:], stderr); err == nil {
			err = o.run(ctx, log)
		}
	default:
		fmt.Fprintf(stderr, "unknown command %q: want restore or server\n", args[0])
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, err)
		return 2
	case err != nil:
		log.Error("etcd-backup-restore "+args[0]+" failed", "err", err)
		return 1
	}
	return 0
}

// usageError is a bad command line.
type usageError struct{ error }

// parseFlags parses a subcommand's flags, which take no arguments after them; a bad command line is a usageError,
// -h flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	return nil
}

// snapshotPrefix starts the names of the snapshots this command takes.
const snapshotPrefix = "full"
