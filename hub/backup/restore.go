package backup

import (
	"errors"
	"fmt"
	"os"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// RevisionBump is added to the restored revision, and the revisions before it are marked compacted (etcdutl's
// --bump-revision and --mark-compacted, what etcd recommends when restoring a cluster clients watch): every
// resourceVersion a client holds from before the restore is either older than the restored history, so its watch
// gets 410 Expired and it re-lists, or it names a write the restore undid — and revisions are bumped past those, so no
// new write reuses a version a client has seen with another meaning. A billion is more writes than a garden makes
// between two snapshots.
const RevisionBump = 1_000_000_000

// RestoreConfig says what to restore where.
type RestoreConfig struct {
	// Snapshot is the snapshot file (from the backups, or etcdctl snapshot save).
	Snapshot string
	// EtcdDir is the new member's directory: the hub's <data-dir>/etcd for the embedded etcd. It must not exist.
	EtcdDir string
	// Name, PeerURL and ClusterToken are the member's; the defaults are the embedded etcd's.
	Name, PeerURL, ClusterToken string
	// SkipHashCheck restores a snapshot without its SHA-256 trailer (a copied member db file).
	SkipHashCheck bool
}

// Restore writes the snapshot's data into a new etcd member directory, with revisions bumped (RevisionBump).
func Restore(cfg RestoreConfig) error {
	if cfg.Snapshot == "" {
		return errors.New("snapshot: required")
	}
	if cfg.EtcdDir == "" {
		return errors.New("data-dir: required")
	}
	if _, err := os.Stat(cfg.Snapshot); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if _, err := os.Stat(cfg.EtcdDir); err == nil {
		return fmt.Errorf("data-dir: %s exists; restore into a data directory without etcd data (move it away first)", cfg.EtcdDir)
	}
	if cfg.Name == "" {
		cfg.Name = "trellis"
	}
	if cfg.PeerURL == "" {
		cfg.PeerURL = "http://127.0.0.1:0"
	}
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "etcd-cluster"
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: cfg.Snapshot, Name: cfg.Name, OutputDataDir: cfg.EtcdDir,
		PeerURLs: []string{cfg.PeerURL}, InitialCluster: cfg.Name + "=" + cfg.PeerURL, InitialClusterToken: cfg.ClusterToken,
		SkipHashCheck: cfg.SkipHashCheck, RevisionBump: RevisionBump, MarkCompacted: true,
	})
	if err != nil {
		return fmt.Errorf("restore %s: %w", cfg.Snapshot, err)
	}
	return nil
}
