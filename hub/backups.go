package hub

import (
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
func Restore(snapshot, dataDir string) error {
	dir, name, peerURL := store.EmbeddedMember(dataDir)
	return backup.Restore(backup.RestoreConfig{Snapshot: snapshot, EtcdDir: dir, Name: name, PeerURL: peerURL})
}
