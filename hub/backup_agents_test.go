package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// TestRestoreAgentsResync: a fleet of simulated agents, connected while the garden is snapshotted and then changed,
// reconnects to the hub restored from the snapshot and resyncs to the restored state — including the agent whose
// synced versions are newer than the snapshot, which must not resume from them.
func TestRestoreAgentsResync(t *testing.T) {
	dataDir, backupDir, copyDir := t.TempDir(), t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var agentsDone sync.WaitGroup
	t.Cleanup(func() { cancel(); agentsDone.Wait() })
	linkEnvOn := restartableLink(dataDir)
	const fleet = 24
	seeds := fleetSeeds(fleet)
	agents := map[string]*agentsim.Agent{}
	var snapshot string
	t.Run("before", func(t *testing.T) {
		e := linkEnvOn(t, func(c *hub.Config) { c.BackupDir, c.BackupInterval = backupDir, 300*time.Millisecond })
		e.fixtures(seeds...)
		for _, s := range seeds {
			a := e.agent(s)
			agents[s] = a
			agentsDone.Go(func() { _ = a.Run(ctx) })
		}
		for _, s := range seeds {
			waitSynced(t, agents[s], 1)
		}
		synced := time.Now()
		eventually(t, "a snapshot after the agents synced", func() bool {
			for _, n := range snapshots(t, backupDir) {
				if fi, err := os.Stat(n); err == nil && fi.ModTime().After(synced.Add(50*time.Millisecond)) {
					snapshot = filepath.Join(copyDir, "garden.db")
					copyFile(t, n, snapshot)
					return true
				}
			}
			return false
		})
		// A change after the snapshot, which s00's agent receives: the restore undoes it.
		e.label("shoot-s00", "after-snapshot")
		eventually(t, "s00 sees the change", func() bool { return reflect.DeepEqual(agents["s00"].Snapshot(), e.expected("s00")) })
	})
	if snapshot == "" {
		t.FailNow()
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "etcd")); err != nil {
		t.Fatal(err)
	}
	if err := hub.Restore(context.Background(), snapshot, dataDir); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	e := linkEnvOn(t, func(*hub.Config) {})
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range seeds {
		for !reflect.DeepEqual(agents[s].Snapshot(), e.expected(s)) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s not resynced to the restored state (syncs %d, resumed %v):\nhas  %v\nwant %v", s, agents[s].Syncs(), agents[s].Resumed(), agents[s].Snapshot(), e.expected(s))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("%d agents resynced %v after the restore", fleet, time.Since(restored).Round(time.Millisecond))
	if agents["s00"].Resumed() {
		t.Error("s00's agent resumed from versions the restore undid")
	}
}
