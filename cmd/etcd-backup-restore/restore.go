package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/hub/backup"
)

// restoreOptions are the restore command's flags.
type restoreOptions struct {
	dataDir, store, name, peerURL string
	// uid and gid own the data directory and the store after the restore; -1 leaves the owners alone.
	uid, gid int
}

func parseRestore(args []string, stderr io.Writer) (*restoreOptions, error) {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &restoreOptions{uid: -1, gid: -1}
	var owner string
	fs.StringVar(&o.dataDir, "data-dir", "", "etcd's --data-dir (required)")
	fs.StringVar(&o.store, "store", "", "directory of the snapshots: the shoot's backup entry (required)")
	fs.StringVar(&o.name, "name", "etcd-main-0", "etcd's --name")
	fs.StringVar(&o.peerURL, "peer-url", "http://127.0.0.1:2380", "etcd's --initial-advertise-peer-urls")
	fs.StringVar(&owner, "owner", "", "UID:GID to own the data directory and the store afterwards (etcd's and the sidecar's user); empty: unchanged")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var errs []error
	if o.dataDir == "" {
		errs = append(errs, errors.New("--data-dir: required"))
	}
	if o.store == "" {
		errs = append(errs, errors.New("--store: required"))
	}
	if owner != "" {
		u, g, ok := strings.Cut(owner, ":")
		uid, uerr := strconv.Atoi(u)
		gid, gerr := strconv.Atoi(g)
		if !ok || uerr != nil || gerr != nil || uid < 0 || gid < 0 {
			errs = append(errs, fmt.Errorf("--owner: %q is not UID:GID", owner))
		}
		o.uid, o.gid = uid, gid
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError{err}
	}
	return o, nil
}

// action is what the restore command does with a data directory.
type action int

const (
	// keep: the data directory holds an etcd member; etcd starts on it.
	keep action = iota
	// fresh: no member and no snapshot; etcd starts a new cluster.
	fresh
	// restore the newest snapshot into the data directory.
	restore
)

func (a action) String() string { return [...]string{"keep", "fresh", "restore"}[a] }

// decide says what to do with a data directory that has (or lacks) an etcd member, given the store's snapshots
// (oldest first): an existing member always wins, even over a newer snapshot (etcd's own data is never older than
// its backups; a hibernated or restarted shoot keeps its volume); without one, the newest snapshot is restored.
func decide(hasMember bool, snapshots []backup.Object) (action, backup.Object) {
	switch {
	case hasMember:
		return keep, backup.Object{}
	case len(snapshots) == 0:
		return fresh, backup.Object{}
	}
	return restore, snapshots[len(snapshots)-1]
}

// hasMember reports whether dir holds an etcd member's database (member/snap/db).
func hasMember(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, "member", "snap", "db"))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("data directory: %w", err)
}

func (o *restoreOptions) run(log *slog.Logger) error {
	member, err := hasMember(o.dataDir)
	if err != nil {
		return err
	}
	snaps, err := backup.Dir(o.store).List(context.Background())
	if err != nil {
		return fmt.Errorf("store %s: %w", o.store, err)
	}
	act, snap := decide(member, snaps)
	log.Info("restore decision", "action", act.String(), "dataDir", o.dataDir, "snapshots", len(snaps), "snapshot", snap.Name)
	if act == restore {
		// A data directory without a member (a volume just provisioned, a restore that died half-way) is replaced.
		if err := os.RemoveAll(o.dataDir); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		start := time.Now()
		if err := backup.Restore(backup.RestoreConfig{Snapshot: filepath.Join(o.store, snap.Name), EtcdDir: o.dataDir,
			Name: o.name, PeerURL: o.peerURL, ClusterToken: "etcd-cluster"}); err != nil {
			return err
		}
		log.Info("restored", "snapshot", snap.Name, "bytes", snap.Size, "duration", time.Since(start).Round(time.Millisecond))
	}
	if o.uid < 0 {
		return nil
	}
	if err := os.MkdirAll(o.store, 0o700); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for _, dir := range []string{o.dataDir, o.store} {
		if err := chownTree(dir, o.uid, o.gid); err != nil {
			return err
		}
	}
	return nil
}

// chownTree gives dir and everything in it to uid:gid, when dir exists.
func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("chown %s: %w", dir, err)
	}
	return nil
}
