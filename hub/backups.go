package hub

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-dev/trellis/hub/backup"
	"github.com/trellis-dev/trellis/hub/store"
)

// addBackups adds the scheduled etcd snapshots (package backup) to the leader's loops, so that one replica takes
// them; none without Config.BackupDir.
func (h *Hub) addBackups(l *leaderLoops, st *store.Store, reg prometheus.Registerer) error {
	if h.cfg.BackupDir == "" {
		return nil
	}
	b, err := backup.New(backup.Config{
		Etcd: st.Client(), Store: backup.Dir(h.cfg.BackupDir), Interval: h.cfg.BackupInterval, Keep: h.cfg.BackupKeep,
		MaxAge: h.cfg.BackupMaxAge, Registerer: reg, Log: h.log.With("component", "backup"),
	})
	if err != nil {
		return err
	}
	l.loops = append(l.loops, b.Run)
	return nil
}

// Restore writes a snapshot (a backup, or etcdctl snapshot save of an external etcd) into dataDir as the embedded
// etcd's data, for a hub to start from: `trellis-hub restore --snapshot F --data-dir D`. dataDir must hold no etcd
// data; its encryption-keys must be the ones the snapshot was written with (they are not in the snapshot).
//
// The restored revision is recorded as the restore floor (restoreFloorKey): agents resuming from versions at or below
// it get a full sync instead (agentlink.Config.ResumeFloor), as watch clients get 410.
func Restore(ctx context.Context, snapshot, dataDir string) error {
	dir, name, peerURL := store.EmbeddedMember(dataDir)
	if err := backup.Restore(backup.RestoreConfig{Snapshot: snapshot, EtcdDir: dir, Name: name, PeerURL: peerURL}); err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("open the restored store: %w", err)
	}
	defer st.Close()
	cur, err := st.Client().Get(ctx, st.Prefix()+restoreFloorKey)
	if err != nil {
		return fmt.Errorf("record the restore: %w", err)
	}
	if _, err := st.Client().Put(ctx, st.Prefix()+restoreFloorKey, strconv.FormatInt(cur.Header.Revision, 10)); err != nil {
		return fmt.Errorf("record the restore: %w", err)
	}
	return nil
}

// restoreFloorKey (under the store's prefix) holds the revision of the last restore.
const restoreFloorKey = "/backup/restore-floor"

// restoreFloor reads the revision of the last restore (0: none).
func restoreFloor(ctx context.Context, st *store.Store) (int64, error) {
	resp, err := st.Client().Get(ctx, st.Prefix()+restoreFloorKey)
	if err != nil {
		return 0, fmt.Errorf("read the restore floor: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	floor, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("restore floor %q: %w", resp.Kvs[0].Value, err)
	}
	return floor, nil
}
