package hub_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/resources"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/faultproxy"
)

// TestRestoreAgentsResync: a fleet of simulated agents and one real agent (agent.Agent on a seed cluster), connected
// while the garden is snapshotted and then changed, reconnect to the hub restored from the snapshot and resync to the
// restored state — including the agent whose synced versions are newer than the snapshot, which must not resume from
// them; the real agent's cache holds the restored state again.
func TestRestoreAgentsResync(t *testing.T) {
	dataDir, backupDir, copyDir := t.TempDir(), t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var agentsDone sync.WaitGroup
	t.Cleanup(func() { cancel(); agentsDone.Wait() })
	proxy, err := faultproxy.Listen("127.0.0.1:1") // the real agent's way to the running hub
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	linkEnvOn := restartableLink(dataDir, proxy)
	var realAgent *agenttest.Agent
	outer := t // the real agent and its seed cluster run until the test ends, across the hub's restart
	const fleet = 24
	seeds := fleetSeeds(fleet)
	agents := map[string]*agentsim.Agent{}
	var snapshot string
	t.Run("before", func(t *testing.T) {
		e := linkEnvOn(t, func(c *hub.Config) { c.BackupDir, c.BackupInterval = backupDir, 300*time.Millisecond })
		e.fixtures(seeds...)
		maps.Copy(agents, e.startFleet(ctx, &agentsDone, seeds))
		realAgent = startRealAgent(outer, e, proxy.Addr())
		e.create("core.gardener.cloud", "shoots", agentsim.Shoot("garden-dev", "shoot-real", "real", "creds-s00", "local"))
		agenttest.Eventually(t, "the real agent has its shoot", func() bool { return realShootLabel(realAgent) != "missing" })
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
		// Changes after the snapshot, which s00's agent and the real agent receive: the restore undoes them.
		e.label("shoot-s00", "after-snapshot")
		eventually(t, "s00 sees the change", func() bool { return reflect.DeepEqual(agents["s00"].Snapshot(), e.expected("s00")) })
		e.label("shoot-real", "after-snapshot")
		agenttest.Eventually(t, "the real agent sees the change", func() bool { return realShootLabel(realAgent) == "after-snapshot" })
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
	agenttest.Eventually(t, "the real agent reconnected and holds the restored shoot", func() bool {
		return realAgent.Status().Connected && realShootLabel(realAgent) == "" && realAgent.Cache().HasSynced()
	})
	t.Logf("the real agent reconnected and resynced %v after the restore (%d sessions)", time.Since(restored).Round(time.Millisecond), realAgent.Status().Sessions)
	if agents["s00"].Resumed() {
		t.Error("s00's agent resumed from versions the restore undid")
	}
}

// realShootLabel is the label "v" of shoot-real in the real agent's cache, or "missing" when the cache lacks it.
func realShootLabel(a *agenttest.Agent) string {
	s, ok := cache.Get[*corev1beta1.Shoot](a.Cache(), resources.Shoots, "garden-dev", "shoot-real")
	if !ok {
		return "missing"
	}
	return s.GetMetadata().GetLabels()["v"]
}
