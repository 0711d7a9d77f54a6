package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/faultproxy"
	"github.com/trellis-dev/trellis/test/timescale"
)

// The agent link fault test's world: one project namespace holding, per seed, a credentials binding and its secret
// ("creds-<seed>"), shoots spread over the seeds, each with a backup entry it owns (of a bucket that does not exist),
// one cloud profile they all use; and per seed a backup secret in the garden namespace ("backup-<seed>").
const (
	faultSeeds         = 50
	faultShootsPerSeed = 4
	faultProject       = "e2e"
	faultNamespace     = "garden-e2e"
	faultProfile       = "e2e-local"
	faultHeartbeat     = 500 * time.Millisecond
	faultConverge      = 30 * time.Second // how long recovery may take before the test fails
	genLabel           = "e2e.trellis.dev/generation"
	backupNamespace    = "garden"
	faultBucket        = "e2e-bucket"
	// faultLateness is how long after a shoot stopped needing an object on a seed that seed's agent may still receive
	// it: the hub's watch and queue, and an agent slowed by a machine busy with 50 agents, a hub and a writer.
	faultLateness = 5 * time.Second
)

// Resources as the agent link names them.
const (
	resSeeds    = "seeds.core.gardener.cloud"
	resShoots   = "shoots.core.gardener.cloud"
	resBindings = "credentialsbindings.security.gardener.cloud"
	resEntries  = "backupentries.core.gardener.cloud"
	resSecrets  = "secrets"
	resProfiles = "cloudprofiles.core.gardener.cloud"
	resProjects = "projects.core.gardener.cloud"
)

func faultSeedName(i int) string  { return fmt.Sprintf("s%02d", i) }
func credsOf(seed string) string  { return "creds-" + seed }
func backupOf(seed string) string { return "backup-" + seed }

// TestAgentLinkSurvivesFaults runs a hub process with 50 simulated agents connected through a TCP fault proxy and,
// while a writer keeps relabelling shoots and moving them between seeds (as control-plane migrations: bound to the new
// seed through the binding subresource, restored there, switched to its credentials), cuts every connection,
// blackholes the network for 4 s and then for 2 s, SIGKILLs and restarts the hub, cuts connections repeatedly, and
// SIGKILLs the hub while agents resync after a cut. After each fault it waits until every agent holds exactly its
// seed's objects at the versions the hub's API reports, computed from the API without the hub's seed graph;
// throughout, it checks every assignment an agent receives against the seed the agent serves and, at the end, against
// the writer's log of what each seed needed when.
func TestAgentLinkSurvivesFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a hub process with 50 agents through fault injection (~1 min)")
	}
	lightTest(t)
	testStart := time.Now()
	bin := hubBinary(t)
	tmp := t.TempDir()
	dataDir, logPath := filepath.Join(tmp, "data"), filepath.Join(tmp, "hub.log")
	addr, grpcAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	// Agents connect to the gRPC-only listener, as deployed agents do. The world's backup entries name a bucket that
	// does not exist (this test follows the link, not the backups), which only a hub without Gardener's
	// ExtensionValidator admits, as an API-only hub runs it.
	hubArgs := []string{"--heartbeat-interval", faultHeartbeat.String(), "--grpc-listen", grpcAddr, "--allow-unregistered-extensions"}
	h := startHubAt(t, bin, dataDir, logPath, addr, hubArgs...)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TRELLIS_E2E_KEEP_LOGS") != "" {
			keepLog(t, logPath)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(3*time.Minute))
	defer cancel()
	w := newFaultWorld(t, addr, dataDir, h.Token)
	setupStart := time.Now()
	w.createFixtures(ctx)
	t.Logf("created %d seeds with backup secrets, %d credentials secrets and bindings, %d shoots with backup entries, 1 cloud profile in %s",
		faultSeeds, faultSeeds, faultSeeds*faultShootsPerSeed, time.Since(setupStart).Round(time.Millisecond))

	proxy, err := faultproxy.Listen(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	agents := w.startAgents(ctx, proxy.Addr())
	// What agents received is checked also when a phase fails the test: it tells a leak from a loss.
	checked := false
	defer func() {
		if !checked {
			w.checkAssignments(agents)
		}
	}()

	initial := w.converge(ctx, agents, nil, time.Now(), "the agents started")
	t.Logf("initial sync: all %d agents hold their seed's objects %s after they started", len(agents), initial.Round(time.Millisecond))

	var results []faultResult
	// phase runs the writer, injects a fault, stops the writer a second after the fault ends and waits for
	// recovery: every agent synced in a new session and holds exactly its seed's state. inject may call mark at the
	// moment from which every agent must sync anew (by default, the start of the fault). Recovery includes the
	// agents' full-jitter reconnect backoff, which failed attempts during a fault grow: after the hub's 1 s
	// outage, agents come back spread over up to ~4 s.
	phase := func(name string, inject func(mark func()) (healedAt time.Time)) {
		if t.Failed() {
			return
		}
		before := make([]int, len(agents))
		mark := func() {
			for i, a := range agents {
				before[i] = a.Syncs()
			}
		}
		mark()
		wr := w.startWriter(ctx)
		time.Sleep(1500 * time.Millisecond)
		faultAt := time.Now()
		healedAt := inject(mark)
		resynced := watchResync(agents, before, healedAt)
		time.Sleep(time.Second) // changes while the agents reconnect
		stats := wr.stop()
		stoppedAt := time.Now()
		if stats.rejected != nil {
			t.Errorf("%s: the hub refused a change of the writer: %v", name, stats.rejected)
		}
		r := faultResult{name: name, faultFor: healedAt.Sub(faultAt), writes: stats}
		r.fromHeal = w.converge(ctx, agents, before, healedAt, "the end of fault "+name)
		r.fromStop = time.Since(stoppedAt)
		r.resync = <-resynced
		for _, a := range agents {
			if a.Resumed() {
				r.resumed++
			}
		}
		// Stable: a second later nothing has drifted (no late, stale assignment).
		time.Sleep(time.Second)
		w.checkAll(ctx, agents, "one second after recovery from "+name)
		results = append(results, r)
		t.Logf("%s: fault lasted %s; writer: %s; every agent had a new session synced %s after the fault ended; all held exactly their seed's state %s after the fault ended (%s after the writer stopped); %d of %d sessions resumed, the others resynced in full",
			name, r.faultFor.Round(time.Millisecond), stats, r.resync.Round(time.Millisecond), r.fromHeal.Round(time.Millisecond),
			r.fromStop.Round(time.Millisecond), r.resumed, len(agents))
	}
	kill := func() {
		if err := h.Kill(); err != nil {
			t.Fatal(err)
		}
	}

	phase("cut every connection", func(func()) time.Time {
		n := proxy.CutAll()
		t.Logf("cut %d connections", n)
		return time.Now()
	})
	blackhole := func(d time.Duration) func(func()) time.Time {
		return func(func()) time.Time {
			dropped := proxy.Dropped()
			proxy.Blackhole(true)
			time.Sleep(d)
			proxy.Blackhole(false)
			t.Logf("the %s blackhole swallowed %d bytes", d, proxy.Dropped()-dropped)
			return time.Now()
		}
	}
	// Longer than both sides' liveness checks (the hub ends a session after 3 silent heartbeat intervals, agentsim
	// after 3 intervals + 1 s): both give up, and new connections hang in the hole until it heals.
	phase("blackhole 4s", blackhole(4*time.Second))
	// Between the two: the hub ends the sessions, the agents still hold them when the network heals.
	phase("blackhole 2s", blackhole(2*time.Second))
	phase("SIGKILL and restart the hub", func(func()) time.Time {
		kill()
		time.Sleep(time.Second) // the writer fails, agents back off
		h = startHubAt(t, bin, dataDir, logPath, addr, hubArgs...)
		proxy.SetTarget(addr)
		if h.Token != w.token {
			t.Fatalf("the admin token changed across the restart")
		}
		return time.Now()
	})
	// Beyond the three: connections cut again and again while agents resync, and the hub killed while agents
	// resync after a cut.
	phase("flapping: 12 cuts in ~2.5s", func(mark func()) time.Time {
		for range 12 {
			proxy.CutAll()
			time.Sleep(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		}
		mark()
		proxy.CutAll()
		return time.Now()
	})
	phase("cut, SIGKILL during resync", func(func()) time.Time {
		proxy.CutAll()
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
		kill()
		h = startHubAt(t, bin, dataDir, logPath, addr, hubArgs...)
		return time.Now()
	})

	checked = true
	w.checkAssignments(agents)
	if len(results) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "recovery of %d agents (the writer runs on for 1s after each fault ends):\n", len(agents))
		fmt.Fprintf(&b, "  %-28s %8s %18s %18s %18s %8s\n", "fault", "lasted", "all resynced", "all exact", "exact after", "resumed")
		fmt.Fprintf(&b, "  %-28s %8s %18s %18s %18s %8s\n", "", "", "(after fault end)", "(after fault end)", "writer stopped", "")
		for _, r := range results {
			fmt.Fprintf(&b, "  %-28s %8s %18s %18s %18s %5d/%d\n", r.name, r.faultFor.Round(time.Millisecond), r.resync.Round(time.Millisecond),
				r.fromHeal.Round(time.Millisecond), r.fromStop.Round(time.Millisecond), r.resumed, len(agents))
		}
		t.Log(b.String())
	}
	logSummary(t, logPath)
	t.Logf("whole test took %s", time.Since(testStart).Round(time.Millisecond))
}

// watchResync reports how long after from every agent had completed a sync beyond before.
func watchResync(agents []*agentsim.Agent, before []int, from time.Time) <-chan time.Duration {
	ch := make(chan time.Duration, 1)
	go func() {
		deadline := from.Add(faultConverge)
		for time.Now().Before(deadline) {
			all := true
			for i, a := range agents {
				if a.Syncs() <= before[i] {
					all = false
					break
				}
			}
			if all {
				ch <- time.Since(from)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		ch <- -1
	}()
	return ch
}

// logSummary reports the hub's warnings and errors by message.
func logSummary(t *testing.T, logPath string) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return
	}
	counts, ends := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `msg="agent session ended"`) {
			cause := line[strings.Index(line, `msg="agent session ended"`):]
			if i := strings.Index(cause, "cause="); i >= 0 {
				cause = cause[i+len("cause="):]
			}
			// "no heartbeat for 1.702s (interval 500ms)" → one bucket
			if i := strings.Index(cause, "no heartbeat for "); i >= 0 {
				cause = cause[:i] + "no heartbeat for …"
			}
			ends[cause]++
		}
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		msg := line
		if i := strings.Index(line, "msg="); i >= 0 {
			msg = line[i:]
			if j := strings.Index(msg, " "); j > 0 && !strings.HasPrefix(msg, `msg="`) {
				msg = msg[:j]
			} else if strings.HasPrefix(msg, `msg="`) {
				if j := strings.Index(msg[5:], `"`); j >= 0 {
					msg = msg[:j+6]
				}
			}
		}
		lvl := "WARN"
		if strings.Contains(line, "level=ERROR") {
			lvl = "ERROR"
		}
		counts[lvl+" "+msg]++
	}
	var endLines []string
	for c, n := range ends {
		endLines = append(endLines, fmt.Sprintf("%5d × %s", n, c))
	}
	sort.Strings(endLines)
	t.Logf("hub log: agent sessions ended, by cause:\n  %s", strings.Join(endLines, "\n  "))
	if len(counts) == 0 {
		t.Log("hub log: no warnings or errors")
		return
	}
	var lines []string
	for m, n := range counts {
		lines = append(lines, fmt.Sprintf("%5d × %s", n, m))
	}
	sort.Strings(lines)
	t.Logf("hub log warnings and errors:\n  %s", strings.Join(lines, "\n  "))
}

type faultResult struct {
	name               string
	faultFor           time.Duration
	resync             time.Duration
	fromHeal, fromStop time.Duration
	resumed            int
	writes             writerStats
}

// ---- the hub process ----

// freeLoopbackAddr returns a free loopback address for the hub, below the kernel's ephemeral port range: the hub
// is restarted on the same port, which an outgoing connection (the proxy dials 50 of them) must not have taken
// as its source port meanwhile.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				low = v
			}
		}
	}
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// keepLog copies the hub's log out of the test's temporary directory so that it survives a failure.
func keepLog(t *testing.T, logPath string) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return
	}
	f, err := os.CreateTemp("", "trellis-agentlink-faults-*.log")
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(data)
	t.Logf("hub log kept at %s", f.Name())
}

// fastReconnect makes a gRPC channel retry quickly and give up a connection attempt (TCP and TLS handshake) after
// 2 s: an attempt whose handshake fell into the black hole would otherwise hang for grpc's default 20 s.
var fastReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
})

type bearerToken string

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearerToken) RequireTransportSecurity() bool { return true }
