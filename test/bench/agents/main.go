package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/bench/benchcmd"
	"github.com/trellis-dev/trellis/test/binproc"
)

type config struct {
	n              int
	hubBin         string
	hubAddr        string
	hubPID         int
	dataDir        string
	out            string
	reuse          bool
	heartbeat      time.Duration
	ramp           time.Duration
	bootConc       int
	createConc     int
	syncTimeout    time.Duration
	settleMax      time.Duration
	loopsIdleMax   time.Duration
	window         time.Duration
	updates        int
	updateRate     float64
	kill9          bool
	forgetTickets  bool
	agentPort      bool
	hubMemLimit    string
	noStorm        bool
	stormTimeout   time.Duration
	profile        bool
	benchProfile   bool
	steadyAttempts int
	quietMax       time.Duration
	quietThreshold float64
	profileSec     int
	gogc           int
	timeout        time.Duration
	replicas       int
	etcdBin        string
	killReplica    string
}

func (c *config) validate() error {
	var errs []error
	if c.n < 1 || c.n > 50000 {
		errs = append(errs, errors.New("-n must be between 1 and 50000"))
	}
	if c.heartbeat < time.Second {
		errs = append(errs, errors.New("-heartbeat must be at least 1s (the hub's heartbeat interval is whole seconds)"))
	}
	if c.bootConc < 1 || c.createConc < 1 {
		errs = append(errs, errors.New("-bootstrap-concurrency and -create-concurrency must be positive"))
	}
	if c.window < time.Second {
		errs = append(errs, errors.New("-window must be at least 1s"))
	}
	if c.updates < 0 || c.updateRate <= 0 {
		errs = append(errs, errors.New("-updates must not be negative and -update-rate must be positive"))
	}
	if c.replicas < 0 || c.replicas == 1 || c.replicas > 9 {
		errs = append(errs, errors.New("-replicas must be 0 (one hub on its embedded etcd) or between 2 and 9"))
	}
	if c.replicas > 0 && (c.reuse || c.hubAddr != "" || c.kill9 || c.noStorm) {
		errs = append(errs, errReplicasReuse)
	}
	if c.hubAddr != "" && c.dataDir == "" {
		errs = append(errs, errors.New("-hub needs -data-dir: the hub's data dir, for pki/ca.crt and admin-token"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 1000, "number of agents (seeds, shoots)")
	flag.StringVar(&cfg.hubBin, "hub-bin", "bin/trellis-hub", "hub binary to start")
	flag.StringVar(&cfg.hubAddr, "hub", "", "use the running hub at this host:port instead of starting one (no reconnect storm)")
	flag.IntVar(&cfg.hubPID, "hub-pid", 0, "with -hub: the hub's pid, for its RSS and CPU")
	flag.StringVar(&cfg.dataDir, "data-dir", "", "the hub's data dir (default bin/bench/agents-<n>/data; emptied first unless -reuse)")
	flag.StringVar(&cfg.out, "out", "", "JSON results (default bin/bench/agents-<n>.json)")
	flag.BoolVar(&cfg.reuse, "reuse", false, "reuse the data dir of an earlier run: its objects and the agents' cached certificates")
	flag.DurationVar(&cfg.heartbeat, "heartbeat", 2*time.Second, "heartbeat interval of the agents and the hub")
	flag.DurationVar(&cfg.ramp, "ramp", -1, "spread the agents' starts over this long (default: 2 ms per agent, at least one heartbeat interval)")
	flag.IntVar(&cfg.bootConc, "bootstrap-concurrency", 64, "bootstraps in flight")
	flag.IntVar(&cfg.createConc, "create-concurrency", 32, "object creations in flight")
	flag.DurationVar(&cfg.syncTimeout, "sync-timeout", 10*time.Minute, "time limit for every agent to sync")
	flag.DurationVar(&cfg.settleMax, "settle-max", 90*time.Second, "longest wait after sync for the link's writes and queues to go quiet")
	flag.DurationVar(&cfg.loopsIdleMax, "loops-idle-max", 10*time.Minute, "then the longest wait for the hub's own loops to work off the fleet's arrival (0: measure at once)")
	flag.DurationVar(&cfg.window, "window", 30*time.Second, "steady-state measurement window")
	flag.IntVar(&cfg.steadyAttempts, "steady-attempts", 3, "steady-state windows at most, while other processes disturb them (the quietest is reported)")
	flag.IntVar(&cfg.updates, "updates", 1000, "shoot updates of the assignment latency phase (0 skips it)")
	flag.Float64Var(&cfg.updateRate, "update-rate", 100, "shoot updates per second")
	flag.StringVar(&cfg.hubMemLimit, "hub-gomemlimit", "", "GOMEMLIMIT of the hub process, e.g. 800MiB (Go's soft memory limit; unset by default)")
	flag.BoolVar(&cfg.agentPort, "grpc-port", true, "agents connect to the hub's gRPC-only listener (--grpc-listen); false: to the main port")
	flag.BoolVar(&cfg.kill9, "kill9", false, "kill the hub with SIGKILL instead of SIGTERM in the reconnect storm")
	flag.BoolVar(&cfg.forgetTickets, "forget-tickets", false, "the agents drop their TLS session tickets before the storm, so every reconnect is a full handshake (as after a CA rotation)")
	flag.BoolVar(&cfg.noStorm, "no-storm", false, "skip the reconnect storm")
	flag.DurationVar(&cfg.stormTimeout, "storm-timeout", 3*time.Minute, "time limit for every agent to resync after the restart")
	flag.DurationVar(&cfg.quietMax, "quiet-max", 3*time.Minute, "before each measured phase, wait at most this long for other processes to go quiet (0: do not wait)")
	flag.Float64Var(&cfg.quietThreshold, "quiet-threshold", 25, "quiet: other processes use less than this % of one core")
	flag.BoolVar(&cfg.profile, "profile", false, "save the hub's heap and CPU profiles at steady state next to the JSON")
	flag.BoolVar(&cfg.benchProfile, "bench-profile", false, "save this load generator's CPU profiles of the steady window and the storm next to the JSON")
	flag.IntVar(&cfg.profileSec, "profile-seconds", 20, "CPU profile duration")
	flag.IntVar(&cfg.gogc, "gogc", 400, "GOGC of this load generator (unless GOGC is set), to leave the CPUs to the hub")
	flag.DurationVar(&cfg.timeout, "timeout", 60*time.Minute, "time limit of the whole run")
	flag.IntVar(&cfg.replicas, "replicas", 0, "run this many hub replicas on a three-member etcd cluster (TLS) instead of one hub, spread the agents over them, write assignments through each and SIGKILL one (see -kill-replica)")
	flag.StringVar(&cfg.etcdBin, "etcd-bin", "bin/testbin/etcd", "with -replicas: the etcd binary (make testbin)")
	flag.StringVar(&cfg.killReplica, "kill-replica", "leader", "with -replicas: the replica to SIGKILL: leader, follower or its index")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.ramp < 0 {
		// 500 starts a second: 10,000 agents started within a few seconds overload the TLS handshakes of both
		// processes on 2 cores, and agents that give up on slow handshakes retry (see docs/benchmarks.md).
		cfg.ramp = max(cfg.heartbeat, time.Duration(cfg.n)*2*time.Millisecond)
	}
	if cfg.dataDir == "" {
		cfg.dataDir = filepath.Join("bin", "bench", fmt.Sprintf("agents-%d", cfg.n), "data")
	}
	outSet := cfg.out != ""
	if cfg.out == "" {
		cfg.out = filepath.Join("bin", "bench", fmt.Sprintf("agents-%d.json", cfg.n))
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.gogc)
	}

	if cfg.replicas > 0 {
		if !outSet {
			cfg.out = filepath.Join("bin", "bench", fmt.Sprintf("agents-%d-replicas-%d.json", cfg.n, cfg.replicas))
		}
		benchcmd.Main("bench-agents", cfg.timeout, cfg.out, func(ctx context.Context) (benchcmd.Report, bool, error) {
			rep, err := runReplicas(ctx, cfg)
			if rep == nil {
				return nil, false, err
			}
			return rep, rep.failed(), err
		})
		return
	}
	benchcmd.Main("bench-agents", cfg.timeout, cfg.out, func(ctx context.Context) (benchcmd.Report, bool, error) {
		rep, err := run(ctx, cfg)
		if rep == nil {
			return nil, false, err
		}
		return rep, false, err
	})
}

// lockDir takes an exclusive lock on dir/lock, so that two runs never share a data dir (the second hub would wait
// for etcd's lock and then take the data dir from under the first's restart).
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another bench-agents run uses %s (%w); wait for it or pass another -data-dir", dir, err)
	}
	return func() { f.Close() }, nil
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// run returns the report so far even when a phase fails.
func run(ctx context.Context, cfg config) (*report, error) {
	rep := &report{
		N: cfg.n, Started: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		HeartbeatIntervalMs: ms(cfg.heartbeat), RampMs: ms(cfg.ramp),
	}
	h := &hub{dataDir: cfg.dataDir, hbInt: cfg.heartbeat, memLimit: cfg.hubMemLimit}
	if cfg.hubAddr != "" {
		h.addr, h.pid = cfg.hubAddr, cfg.hubPID
		rep.Hub = "external " + cfg.hubAddr
		if err := h.loadCredentials(true); err != nil {
			return nil, err
		}
	} else {
		bin, err := filepath.Abs(cfg.hubBin)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("hub binary: %w (make build)", err)
		}
		h.bin, rep.Hub = bin, cfg.hubBin
		h.logPath = filepath.Join(filepath.Dir(cfg.dataDir), "hub.log")
		_, statErr := os.Stat(filepath.Join(cfg.dataDir, "admin-token"))
		rep.FreshDataDir = !cfg.reuse || statErr != nil
		if err := os.MkdirAll(filepath.Dir(cfg.dataDir), 0o755); err != nil {
			return nil, err
		}
		unlock, err := lockDir(filepath.Dir(cfg.dataDir))
		if err != nil {
			return nil, err
		}
		defer unlock()
		if !cfg.reuse {
			if err := os.RemoveAll(cfg.dataDir); err != nil {
				return nil, err
			}
			_ = os.Remove(h.logPath)
		}
		if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(h.logPath); err == nil {
			h.logStart = fi.Size()
		}
		addrs, err := binproc.FreeAddrs(2)
		if err != nil {
			return nil, err
		}
		h.addr = addrs[0]
		if cfg.agentPort {
			h.grpcAddr = addrs[1]
		}
		startup, err := h.start(ctx)
		defer func() { h.stop(syscall.SIGTERM) }()
		if err != nil {
			return nil, err
		}
		rep.HubStartupMs, rep.HubLoggedStartupMs = ms(startup), ms(h.loggedStartup())
		logf("hub %s (pid %d) on %s, data %s, log %s: ready after %s", bin, h.pid, h.addr, cfg.dataDir, h.logPath, startup.Round(time.Millisecond))
	}
	admin, err := dialAdmin(h, 4)
	if err != nil {
		return nil, err
	}
	defer admin.close()
	rssIdle, _ := h.rss()

	defer func() {
		if h.logPath != "" {
			rep.HubLogProblems = h.logProblems(5)
		}
	}()

	// ---- setup ----
	agentAddr := h.addr
	rep.AgentPort = "main port (gRPC through net/http's HTTP/2 server and grpc.Server.ServeHTTP)"
	if h.grpcAddr != "" {
		agentAddr = h.grpcAddr
		rep.AgentPort = "--grpc-listen (gRPC's own HTTP/2 transport)"
	}
	logf("agents connect to %s: %s", agentAddr, rep.AgentPort)
	dialer := agentsim.Dialer{Target: "passthrough:///" + agentAddr, CA: h.pool}
	certs, err := setupFleet(ctx, cfg, h, admin, dialer, &rep.Setup)
	rep.Setup.HubRSSBytesAfter, _ = h.rss()
	if err != nil {
		return rep, fmt.Errorf("setup: %w", err)
	}
	rssBefore, _ := h.rss()
	if rssIdle > 0 && rssBefore > rssIdle {
		logf("hub RSS %.1f MiB after setup (%.1f MiB idle)", mib(rssBefore), mib(rssIdle))
	}

	// ---- connect ----
	f := newFleet(dialer, certs, cfg.heartbeat)
	defer f.stop()
	m0, err := h.metrics(ctx)
	if err != nil {
		return rep, err
	}
	cpu0 := snapshot(h)
	logf("starting %d agents over %s", cfg.n, cfg.ramp)
	if cfg.profile && h.pid != 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			earlyProfile(ctx, cfg, "connect", h.addr, h.pool, h.token, rep, &profilesMu)
		}()
		defer func() { <-done }()
	}
	tcp0 := readTCPCounters()
	t0 := time.Now()
	f.start(ctx, cfg.ramp)
	progress := startProgress(ctx, "synced", cfg.n, f.countSynced)
	synced := f.waitSynced(ctx, cfg.syncTimeout)
	progress()
	rep.Connect.AllSyncedSec = secs(time.Since(t0))
	rep.Connect.Synced = synced
	tcp := readTCPCounters().sub(tcp0)
	rep.Connect.TCPAccepted, rep.Connect.ListenOverflows, rep.Connect.ListenDrops = tcp.passiveOpens, tcp.listenOverflows, tcp.listenDrops
	c := cpu0.delta(h)
	rep.Connect.HubCPUSec, rep.Connect.BenchCPUSec, rep.Connect.OtherCPUSec = c.hub, c.bench, c.other
	q := quantiles(f.syncTimes(), 0.5, 0.99, 1)
	rep.Connect.AgentSyncP50Ms, rep.Connect.AgentSyncP99Ms, rep.Connect.AgentSyncMaxMs = ms(q[0]), ms(q[1]), ms(q[2])
	rep.Connect.HubRSSBytesAfter, _ = h.rss()
	logf("%d/%d agents synced in %.2f s", synced, cfg.n, rep.Connect.AllSyncedSec)
	if synced < cfg.n {
		return rep, fmt.Errorf("only %d of %d agents synced within %s", synced, cfg.n, cfg.syncTimeout)
	}
	settleStart := time.Now()
	m1, err := settle(ctx, h, cfg.settleMax)
	if err != nil {
		return rep, err
	}
	rep.Connect.SettleSec = secs(time.Since(settleStart))
	w0, w1 := agentWrites(m0), agentWrites(m1)
	rep.Connect.SeedStatusWrites = w1["seed-status"] - w0["seed-status"]
	rep.Connect.PresenceWrites = w1["presence"] - w0["presence"]
	rep.Connect.SessionsStarted = m1["trellis_agentlink_sessions_started_total"] - m0["trellis_agentlink_sessions_started_total"]
	rep.Connect.AssignmentsToSync = m1["trellis_agentlink_assignments_total"] - m0["trellis_agentlink_assignments_total"]
	idleStart := time.Now()
	if rep.Connect.LoopWrites, err = loopsIdle(ctx, h, admin, cfg.loopsIdleMax); err != nil {
		return rep, err
	}
	rep.Connect.LoopsIdleSec = secs(time.Since(idleStart))

	// ---- steady state ----
	if err := steady(ctx, cfg, h, admin, f, rep, rssBefore); err != nil {
		return rep, err
	}
	if cfg.profile && h.pid != 0 {
		p := profile(ctx, cfg, h)
		profilesMu.Lock()
		rep.Profiles = append(rep.Profiles, p...)
		profilesMu.Unlock()
	}

	// ---- assignment latency ----
	if cfg.updates > 0 {
		if err := assign(ctx, cfg, h, admin, f, rep); err != nil {
			return rep, err
		}
	}

	// ---- reconnect storm ----
	if cfg.noStorm || h.proc == nil {
		logf("reconnect storm skipped")
	} else if err := storm(ctx, cfg, h, admin, f, rep); err != nil {
		return rep, err
	}
	_, rep.HubPeakRSSBytes = h.rss()
	f.stop()
	return rep, ctx.Err()
}

// setupFleet makes (or, with -reuse, finds) the objects and the agents' certificates.
func setupFleet(ctx context.Context, cfg config, h *hub, admin *client, dialer agentsim.Dialer, sr *setupReport) ([]tls.Certificate, error) {
	c := &cache{N: cfg.n}
	if cfg.reuse {
		if old, err := loadCache(cfg.dataDir); err == nil {
			c = old
			sr.Reused = true
		} else {
			logf("no reusable setup in %s (%v); setting up", cfg.dataDir, err)
		}
	}
	if !c.ObjectsMade || c.N < cfg.n {
		logf("creating shared objects, %d seeds and %d shoots", cfg.n, cfg.n)
		start := time.Now()
		if err := createShared(ctx, admin); err != nil {
			return nil, err
		}
		if err := createFleetObjects(ctx, admin, cfg.n, cfg.createConc); err != nil {
			return nil, err
		}
		d := time.Since(start)
		sr.ObjectsSec, sr.ObjectsPerSec = secs(d), round2(float64(2*cfg.n+5)/d.Seconds())
		c.ObjectsMade, c.N = true, max(c.N, cfg.n)
		if err := c.save(cfg.dataDir); err != nil {
			return nil, err
		}
		logf("objects created in %.1f s (%.0f/s)", d.Seconds(), sr.ObjectsPerSec)
	}
	// Agents ask for 1 h certificates and do not rotate here: a cached one must have 30 min left.
	certs, missing := c.certs(cfg.n, time.Now().Add(30*time.Minute))
	if len(missing) == 0 {
		logf("reusing %d cached agent certificates", cfg.n)
		return certs, nil
	}
	start := time.Now()
	tokens, err := createTokens(ctx, admin, missing, cfg.createConc)
	sr.Tokens, sr.TokensSec = len(missing), secs(time.Since(start))
	if err != nil {
		return nil, err
	}
	logf("%d bootstrap tokens created in %.1f s; bootstrapping %d agents, %d at a time", len(missing), sr.TokensSec, len(missing), cfg.bootConc)
	start = time.Now()
	var done atomic.Int64
	stopProgress := startProgress(ctx, "bootstrapped", len(missing), func() int { return int(done.Load()) })
	got, lat, err := bootstrap(ctx, dialer, missing, tokens, cfg.bootConc, func() { done.Add(1) })
	stopProgress()
	d := time.Since(start)
	sr.Bootstrapped, sr.BootstrapSec, sr.BootstrapConc = len(missing), secs(d), cfg.bootConc
	sr.BootstrapPerSec = round2(float64(len(missing)) / d.Seconds())
	q := quantiles(lat, 0.5, 0.99)
	sr.BootstrapP50Ms, sr.BootstrapP99Ms = ms(q[0]), ms(q[1])
	if err != nil {
		return nil, err
	}
	for k, i := range missing {
		certs[i] = got[k]
	}
	if err := c.setCerts(missing, got); err != nil {
		return nil, err
	}
	if err := c.save(cfg.dataDir); err != nil {
		return nil, err
	}
	logf("%d agents bootstrapped in %.1f s (%.0f/s); certificates cached in %s", len(missing), d.Seconds(), sr.BootstrapPerSec, filepath.Join(cfg.dataDir, cacheFile))
	return certs, nil
}

// startProgress prints what count reports every 5 s until the returned function is called.
func startProgress(ctx context.Context, what string, total int, count func() int) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				logf("  %d/%d %s", count(), total, what)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// cpuSnapshot is the CPU time of the hub, this process and the machine at a point in time.
type cpuSnapshot struct {
	at                  time.Time
	hub, bench, machine time.Duration
}

func snapshot(h *hub) cpuSnapshot {
	return cpuSnapshot{at: time.Now(), hub: h.cpu(), bench: procCPU("self"), machine: machineCPU()}
}

type cpuDelta struct {
	wall                       time.Duration
	hub, bench, other          float64 // seconds
	hubPct, benchPct, otherPct float64 // % of one core
}

func (s cpuSnapshot) delta(h *hub) cpuDelta {
	n := snapshot(h)
	d := cpuDelta{wall: n.at.Sub(s.at)}
	hub, bench := n.hub-s.hub, n.bench-s.bench
	other := max(0, n.machine-s.machine-hub-bench)
	d.hub, d.bench, d.other = round2(hub.Seconds()), round2(bench.Seconds()), round2(other.Seconds())
	w := d.wall.Seconds()
	d.hubPct, d.benchPct, d.otherPct = round2(100*hub.Seconds()/w), round2(100*bench.Seconds()/w), round2(100*other.Seconds()/w)
	return d
}

// waitQuiet waits, at most -quiet-max, until other processes have used less than -quiet-threshold % of one core for
// 3 s: the machine is shared, and a build next door would be measured as the hub's latency. It returns the wait.
func waitQuiet(ctx context.Context, cfg config, h *hub) time.Duration {
	if cfg.quietMax <= 0 {
		return 0
	}
	start := time.Now()
	logged := false
	for {
		s := snapshot(h)
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(3 * time.Second):
		}
		d := s.delta(h)
		if d.otherPct < cfg.quietThreshold || time.Since(start) > cfg.quietMax {
			if d.otherPct >= cfg.quietThreshold {
				logf("other processes still use %.0f %% of a core after %s; measuring anyway", d.otherPct, cfg.quietMax)
			}
			return time.Since(start)
		}
		if !logged {
			logf("other processes use %.0f %% of a core; waiting up to %s for a quieter machine", d.otherPct, cfg.quietMax)
			logged = true
		}
	}
}

// settle waits until the agent link's writes other than the rate-bounded Lease renewals (presence, seed status) and
// its queues have been quiet for 3 s, at most max; it returns the last metrics.
func settle(ctx context.Context, h *hub, maxWait time.Duration) (map[string]float64, error) {
	deadline := time.Now().Add(maxWait)
	var last float64 = -1
	quiet := 0
	for {
		m, err := h.metrics(ctx)
		if err != nil {
			return nil, err
		}
		w := agentWrites(m)
		cur := w["presence"] + w["seed-status"]
		if cur == last && m["trellis_agentlink_queued_assignments"] == 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = cur
		if quiet >= 3 || time.Now().After(deadline) {
			if quiet < 3 {
				logf("the agent link did not settle within %s; measuring anyway", maxWait)
			}
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// loopsIdle waits until the hub's own loops (scheduler, controller-manager) have worked off what the fleet's arrival
// gave them — a ControllerInstallation and the ExtensionsReady condition per Seed, the status label per Shoot, … at
// the loops' lane rate (--loop-qps) — so that the steady window measures the agent link and not that backlog: until
// the etcd revisions of 5 s are at most the agent link's own writes plus one, twice in a row, at most maxWait. It
// returns the revisions written meanwhile that were not the agent link's.
func loopsIdle(ctx context.Context, h *hub, admin *client, maxWait time.Duration) (int64, error) {
	if maxWait <= 0 {
		return 0, nil
	}
	// sample returns the etcd revision and the agent link's writes so far.
	sample := func() (int64, float64, error) {
		rev, err := revision(ctx, admin)
		if err != nil {
			return 0, 0, err
		}
		m, err := h.metrics(ctx)
		if err != nil {
			return 0, 0, err
		}
		return rev, sum(agentWrites(m)), nil
	}
	deadline := time.Now().Add(maxWait)
	first, w0, err := sample()
	if err != nil {
		return 0, err
	}
	prevRev, prevW, quiet := first, w0, 0
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Second):
		}
		rev, w, err := sample()
		if err != nil {
			return 0, err
		}
		if float64(rev-prevRev) <= w-prevW+1 {
			quiet++
		} else {
			quiet = 0
		}
		prevRev, prevW = rev, w
		other := rev - first - int64(w-w0)
		if quiet >= 2 {
			logf("the hub's loops are idle (%d writes of theirs since the sync)", other)
			return other, nil
		}
		if time.Now().After(deadline) {
			logf("the hub's loops were not idle within %s (%d writes of theirs since the sync); measuring anyway", maxWait, other)
			return other, nil
		}
	}
}

// steady measures the steady state; when other processes took more than twice -quiet-threshold of a core during the
// window, it measures again (up to -steady-attempts windows) and keeps the quietest window.
func steady(ctx context.Context, cfg config, h *hub, admin *client, f *fleet, rep *report, rssBefore int64) error {
	var best *steadyReport
	for attempt := 1; attempt <= cfg.steadyAttempts; attempt++ {
		s := &steadyReport{}
		if err := steadyOnce(ctx, cfg, h, admin, f, s, rssBefore); err != nil {
			return err
		}
		rep.SteadyAttempts = append(rep.SteadyAttempts, attemptSummary{OtherCPUPercent: s.OtherCPUPercent, AckP50Ms: s.AckP50Ms, AckP99Ms: s.AckP99Ms, HubCPUPercent: s.HubCPUPercent})
		if best == nil || s.OtherCPUPercent < best.OtherCPUPercent {
			best = s
		}
		if s.OtherCPUPercent <= 2*cfg.quietThreshold {
			break
		}
		if attempt < cfg.steadyAttempts {
			logf("other processes took %.0f %% of a core during the window; measuring again", s.OtherCPUPercent)
		}
	}
	rep.Steady = *best
	return nil
}

func steadyOnce(ctx context.Context, cfg config, h *hub, admin *client, f *fleet, s *steadyReport, rssBefore int64) error {
	s.QuietWaitSec = secs(waitQuiet(ctx, cfg, h))
	logf("steady state: measuring for %s", cfg.window)
	m0, err := h.metrics(ctx)
	if err != nil {
		return err
	}
	rev0, err := revision(ctx, admin)
	if err != nil {
		return err
	}
	stopBenchProfile := benchProfile(cfg, "steady")
	cpu0 := snapshot(h)
	f.startAcks()
	var rssMax int64
	end := time.Now().Add(cfg.window)
	var seconds []cpuDelta // per second of the window
	var gcs []gcCount      // the collections each process completed in each second
	prev, prevGC := cpu0, countGCs(ctx, h)
	for time.Now().Before(end) {
		if r, _ := h.rss(); r > rssMax {
			rssMax = r
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Second, time.Until(end))):
		}
		seconds = append(seconds, prev.delta(h))
		gc := countGCs(ctx, h)
		gcs = append(gcs, gcCount{hub: gc.hub - prevGC.hub, bench: gc.bench - prevGC.bench})
		prev, prevGC = snapshot(h), gc
	}
	acks, ackAt := f.stopAcks()
	c := cpu0.delta(h)
	stopBenchProfile()
	rev1, err := revision(ctx, admin)
	if err != nil {
		return err
	}
	m1, err := h.metrics(ctx)
	if err != nil {
		return err
	}
	rss, _ := h.rss()
	rssMax = max(rssMax, rss)
	w := c.wall.Seconds()
	s.WindowSec = secs(c.wall)
	s.Sessions = m1["trellis_agentlink_sessions"]
	s.HubRSSBytes, s.HubRSSMaxBytes = rss, rssMax
	if rssBefore > 0 {
		s.RSSPerAgentKiB = round2(float64(rss-rssBefore) / 1024 / float64(cfg.n))
	}
	s.HubCPUPercent, s.BenchCPUPercent, s.OtherCPUPercent = c.hubPct, c.benchPct, c.otherPct
	s.HeartbeatsPerSec = round2((m1["trellis_agentlink_heartbeats_total"] - m0["trellis_agentlink_heartbeats_total"]) / w)
	s.Acks = len(acks)
	s.Timeline = timeline(cpu0.at, seconds, gcs, acks, ackAt)
	s.AckP99NoBenchGCMs, s.AcksNoBenchGC = p99Without(cpu0.at, gcs, acks, ackAt, func(g gcCount) bool { return g.bench > 0 })
	s.AckP99NoGCMs, s.AcksNoGC = p99Without(cpu0.at, gcs, acks, ackAt, func(g gcCount) bool { return g.bench > 0 || g.hub > 0 })
	q := quantiles(acks, 0.5, 0.9, 0.99, 0.999, 1)
	s.AckP50Ms, s.AckP90Ms, s.AckP99Ms, s.AckP999Ms, s.AckMaxMs = ms(q[0]), ms(q[1]), ms(q[2]), ms(q[3]), ms(q[4])
	w0, w1 := agentWrites(m0), agentWrites(m1)
	s.EtcdWritesByPurp = map[string]float64{}
	for p, v := range w1 {
		s.EtcdWritesByPurp[p] = round2((v - w0[p]) / w)
	}
	s.EtcdWritesPerSec = round2((sum(w1) - sum(w0)) / w)
	s.EtcdRevisionPerSc = round2(float64(rev1-rev0) / w)
	s.HubGoroutines = m1["go_goroutines"]
	s.HubHeapInuseBytes = m1["go_memstats_heap_inuse_bytes"]
	s.HubGCs = m1["go_gc_duration_seconds_count"] - m0["go_gc_duration_seconds_count"]
	s.HubAllocBytesPerSec = round2((m1["go_memstats_alloc_bytes_total"] - m0["go_memstats_alloc_bytes_total"]) / w)
	if hb := m1["trellis_agentlink_heartbeats_total"] - m0["trellis_agentlink_heartbeats_total"]; hb > 0 {
		s.HubAllocBytesPerHeartbeat = round2((m1["go_memstats_alloc_bytes_total"] - m0["go_memstats_alloc_bytes_total"]) / hb)
		s.HubMallocsPerHeartbeat = round2((m1["go_memstats_mallocs_total"] - m0["go_memstats_mallocs_total"]) / hb)
	}
	s.HubGCPauseMaxMs = round2(1000 * m1[`go_gc_duration_seconds{quantile="1"}`])
	s.HubMem = map[string]float64{}
	for k, v := range m1 {
		if strings.HasPrefix(k, "go_memstats_") && strings.HasSuffix(k, "_bytes") {
			s.HubMem[k] = v
		}
	}
	logf("steady: RSS %.1f MiB, CPU %.1f %%, ack p99 %.2f ms, writes %.2f/s", mib(rss), s.HubCPUPercent, s.AckP99Ms, s.EtcdWritesPerSec)
	return nil
}

// gcCount counts garbage collections of the hub (go_gc_duration_seconds_count) and of this process.
type gcCount struct{ hub, bench int64 }

// countGCs returns the collections so far; the hub's count stays 0 when its metrics cannot be read. Every
// collection's mark phase delays the acks of the process that collects (mark assists), so the timeline shows in which
// second each process collected.
func countGCs(ctx context.Context, h *hub) gcCount {
	var c gcCount
	if m, err := h.metrics(ctx); err == nil {
		c.hub = int64(m["go_gc_duration_seconds_count"])
	}
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		c.bench = int64(sample[0].Value.Uint64())
	}
	return c
}

// p99Without returns the p99 of the acks that arrived outside the seconds around the collections skip picks (the
// second before a completed collection, its own and the next: its mark phase and the acks it held up) and how many
// acks that left. This process's own collections delay its agents' receipt of acks as the hub's delay the hub's
// answers (mark assists park the goroutines that allocate), which says nothing of the hub.
func p99Without(start time.Time, gcs []gcCount, rtt []time.Duration, at []time.Time, skip func(gcCount) bool) (float64, int) {
	out := make([]bool, len(gcs)+1)
	for k, g := range gcs {
		if skip(g) {
			for j := max(0, k-1); j <= k+1 && j < len(out); j++ {
				out[j] = true
			}
		}
	}
	var kept []time.Duration
	for i, t := range at {
		if k := int(t.Sub(start) / time.Second); k < 0 || k >= len(out) || !out[k] {
			kept = append(kept, rtt[i])
		}
	}
	return ms(quantiles(kept, 0.99)[0]), len(kept)
}

// timeline puts the window's acks (by arrival) next to the CPU use of each second.
func timeline(start time.Time, seconds []cpuDelta, gcs []gcCount, rtt []time.Duration, at []time.Time) []second {
	out := make([]second, len(seconds))
	byS := make([][]time.Duration, len(seconds))
	for i, t := range at {
		k := int(t.Sub(start) / time.Second)
		if k >= 0 && k < len(byS) {
			byS[k] = append(byS[k], rtt[i])
		}
	}
	for k, d := range seconds {
		q := quantiles(byS[k], 0.5, 0.99, 1)
		out[k] = second{S: k, Acks: len(byS[k]), AckP50Ms: ms(q[0]), AckP99Ms: ms(q[1]), AckMaxMs: ms(q[2]),
			HubCPUPct: d.hubPct, BenchCPUPct: d.benchPct, OtherCPUPct: d.otherPct, HubGCs: gcs[k].hub, BenchGCs: gcs[k].bench}
	}
	return out
}

// profile saves the hub's heap profile and a CPU profile at steady state, and a heap profile after it.
func profile(ctx context.Context, cfg config, h *hub) []string {
	base := cfg.out[:len(cfg.out)-len(filepath.Ext(cfg.out))]
	var out []string
	for _, p := range []struct{ name, query, path string }{
		{"heap", "?gc=1", base + "-heap.pprof"},
		{"goroutine", "", base + "-goroutine.pprof"},
		{"profile", "?seconds=" + strconv.Itoa(cfg.profileSec), base + "-cpu.pprof"},
		// A second heap profile after the CPU profile: its allocations less the first's are the steady state's
		// (go tool pprof -sample_index=alloc_space -diff_base <out>-heap.pprof <out>-heap-end.pprof).
		{"heap", "?gc=1", base + "-heap-end.pprof"},
	} {
		logf("saving the hub's %s profile to %s", p.name, p.path)
		if err := h.saveProfile(ctx, p.name, p.query, p.path); err != nil {
			logf("profile %s: %v", p.name, err)
			continue
		}
		out = append(out, p.path)
	}
	return out
}

// runID makes this run's label values unique.
var runID = time.Now().Unix()

// benchProfile writes this process's CPU profile (the load generator's) until the returned function is called, with
// -bench-profile; the function may be called more than once.
func benchProfile(cfg config, phase string) func() {
	if !cfg.benchProfile {
		return func() {}
	}
	path := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + "-bench-" + phase + "-cpu.pprof"
	f, err := os.Create(path)
	if err != nil {
		logf("bench profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		logf("bench profile: %v", err)
		f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			logf("the load generator's CPU profile (%s) is in %s", phase, path)
		})
	}
}

// earlyProfile takes the hub's CPU profile for the first 30 s of a phase (connect, storm), retrying while the hub does
// not answer yet; it saves it as <out>-<phase>-cpu.pprof.
func earlyProfile(ctx context.Context, cfg config, phase, addr string, pool *x509.CertPool, token string, rep *report, mu *sync.Mutex) {
	path := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + "-" + phase + "-cpu.pprof"
	hc := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/debug/pprof/profile?seconds=30", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK && os.WriteFile(path, body, 0o644) == nil {
			logf("the hub's CPU profile of the first 30 s of the %s is in %s", phase, path)
			mu.Lock()
			rep.Profiles = append(rep.Profiles, path)
			mu.Unlock()
		}
		return
	}
}

var profilesMu sync.Mutex // rep.Profiles, appended to by earlyProfile

type updateResult struct {
	agent          int
	rv             int64
	sent, returned time.Time
	err            error
}

// assign updates shoots at a steady rate and times each update's arrival at the owning agent.
func assign(ctx context.Context, cfg config, h *hub, admin *client, f *fleet, rep *report) error {
	m := cfg.updates
	rep.Assign.QuietWaitSec = secs(waitQuiet(ctx, cfg, h))
	logf("assignment latency: %d shoot updates at %.0f/s", m, cfg.updateRate)
	results := make([]updateResult, m)
	f.assignMu.Lock()
	clear(f.assigned)
	f.assignMu.Unlock()
	f.assignOn.Store(true)
	defer f.assignOn.Store(false)
	cpu0 := snapshot(h)
	t := time.NewTicker(time.Duration(float64(time.Second) / cfg.updateRate))
	defer t.Stop()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for k := range m {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// Shoots in a stride over the fleet; one update per shoot while m <= n.
			i := int((int64(k) * int64(cfg.n) / int64(max(m, 1)))) % cfg.n
			if m > cfg.n {
				i = k % cfg.n
			}
			results[k] = updateShoot(ctx, admin, i, k)
		}()
	}
	wg.Wait()
	c := cpu0.delta(h)
	waitArrivals(f, results, 10*time.Second) // the last arrivals
	a := &rep.Assign
	a.Updates, a.RatePerSec, a.HubCPUPercent, a.BenchCPUPercent, a.OtherCPUPercent = m, cfg.updateRate, c.hubPct, c.benchPct, c.otherPct
	var commit, sent, call []time.Duration
	for _, r := range results {
		if r.err != nil {
			a.Errors++
			if a.FirstError == "" {
				a.FirstError = r.err.Error()
			}
			continue
		}
		call = append(call, r.returned.Sub(r.sent))
		at, ok := f.received(r.agent, r.rv)
		if !ok {
			a.Missing++
			if len(a.MissingExamples) < 5 {
				held := f.agents[r.agent].Snapshot()[shootsResource][namespace+"/"+shootName(r.agent)]
				a.MissingExamples = append(a.MissingExamples, fmt.Sprintf("%s rv %d (updated at %s, returned after %s): the agent holds rv %d, %d sessions synced",
					shootName(r.agent), r.rv, r.sent.Format("15:04:05.000"), r.returned.Sub(r.sent).Round(time.Microsecond), held, f.agents[r.agent].Syncs()))
			}
			continue
		}
		a.Received++
		d := at.Sub(r.returned)
		if d < 0 {
			a.BeforeReturn++
		}
		commit = append(commit, d)
		sent = append(sent, at.Sub(r.sent))
	}
	q := quantiles(commit, 0.5, 0.9, 0.99, 1)
	a.CommitToRecvP50Ms, a.CommitToRecvP90Ms, a.CommitToRecvP99Ms, a.CommitToRecvMaxMs = ms(q[0]), ms(q[1]), ms(q[2]), ms(q[3])
	q = quantiles(sent, 0.5, 0.99, 1)
	a.SentToRecvP50Ms, a.SentToRecvP99Ms, a.SentToRecvMaxMs = ms(q[0]), ms(q[1]), ms(q[2])
	q = quantiles(call, 0.5, 0.99)
	a.UpdateP50Ms, a.UpdateP99Ms = ms(q[0]), ms(q[1])
	logf("assignment: p50 %.2f ms, p99 %.2f ms (%d received, %d missing, %d errors)", a.CommitToRecvP50Ms, a.CommitToRecvP99Ms, a.Received, a.Missing, a.Errors)
	return nil
}

func updateShoot(ctx context.Context, admin *client, i, k int) updateResult {
	r := updateResult{agent: i}
	shoots := corev1beta1.NewShootServiceClient(admin.conn())
	cur, err := shoots.Get(ctx, &metav1.GetRequest{Namespace: namespace, Name: shootName(i)})
	if err != nil {
		r.err = fmt.Errorf("get %s: %w", shootName(i), err)
		return r
	}
	if cur.Metadata.Labels == nil {
		cur.Metadata.Labels = map[string]string{}
	}
	// Unique per run: an update that changes nothing is a no-op and keeps the resourceVersion (as in Kubernetes).
	cur.Metadata.Labels[updateLabel] = fmt.Sprintf("%d-%d", runID, k+1)
	before := cur.GetMetadata().GetResourceVersion()
	r.sent = time.Now()
	out, err := shoots.Update(ctx, cur)
	r.returned = time.Now()
	if err != nil {
		r.err = fmt.Errorf("update %s: %w", shootName(i), err)
		return r
	}
	r.rv, err = strconv.ParseInt(out.GetMetadata().GetResourceVersion(), 10, 64)
	if err != nil {
		r.err = fmt.Errorf("update %s: resourceVersion %q: %w", shootName(i), out.GetMetadata().GetResourceVersion(), err)
	} else if out.GetMetadata().GetResourceVersion() == before {
		r.err = fmt.Errorf("update %s: a no-op (resourceVersion stayed %s)", shootName(i), before)
	}
	return r
}

// storm restarts the hub and times until every agent has synced again.
func storm(ctx context.Context, cfg config, h *hub, admin *client, f *fleet, rep *report) error {
	sig, name := syscall.SIGTERM, "SIGTERM"
	if cfg.kill9 {
		sig, name = syscall.SIGKILL, "SIGKILL"
	}
	s := &stormReport{Signal: name, ForgotTLSSessions: cfg.forgetTickets}
	rep.Storm = s
	s.QuietWaitSec = secs(waitQuiet(ctx, cfg, h))
	if cfg.forgetTickets {
		for _, a := range f.agents {
			a.ForgetTLSSessions()
		}
	}
	base := f.syncs()
	logf("reconnect storm: stopping the hub with %s", name)
	tcp0 := readTCPCounters()
	tSignal := time.Now()
	stopDur := h.stop(sig)
	s.StopSec = secs(stopDur)
	tRestart := time.Now()
	// Other processes' CPU from here on; the new hub's CPU starts at zero.
	bench0, machine0 := procCPU("self"), machineCPU()
	stopBenchProfile := benchProfile(cfg, "storm")
	defer stopBenchProfile()
	if cfg.profile {
		done := make(chan struct{})
		go func() { defer close(done); earlyProfile(ctx, cfg, "storm", h.addr, h.pool, h.token, rep, &profilesMu) }()
		// The report is written after the storm: the profile must be in it.
		defer func() { <-done }()
	}
	readyDur, err := h.start(ctx)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	s.RestartToReadySec, s.RestartLoggedSec, s.ReadyProbes = secs(readyDur), secs(h.loggedStartup()), append([]string(nil), h.probes...)
	tReady := tRestart.Add(readyDur)
	logf("hub restarted (pid %d), ready after %s; waiting for %d agents to resync", h.pid, readyDur.Round(time.Millisecond), cfg.n)

	resync := make([]time.Duration, cfg.n)
	left := cfg.n
	deadline := time.Now().Add(cfg.stormTimeout)
	lastLog := time.Now()
	for left > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		now := time.Now()
		for i, a := range f.agents {
			if resync[i] == 0 && a.Syncs() > base[i] {
				resync[i] = now.Sub(tRestart)
				left--
			}
		}
		if left == 0 {
			break
		}
		if time.Since(lastLog) > 5*time.Second {
			logf("  %d/%d resynced", cfg.n-left, cfg.n)
			lastLog = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	tAll := time.Now()
	tcp := readTCPCounters().sub(tcp0)
	s.TCPAccepted, s.ListenOverflows, s.ListenDrops = tcp.passiveOpens, tcp.listenOverflows, tcp.listenDrops
	stopBenchProfile()
	hubCPU, bench, machine := h.cpu(), procCPU("self")-bench0, machineCPU()-machine0
	s.HubCPUSec, s.BenchCPUSec = round2(hubCPU.Seconds()), round2(bench.Seconds())
	s.OtherCPUSec = round2(max(0, machine-hubCPU-bench).Seconds())
	s.Resynced = cfg.n - left
	var times []time.Duration
	for i, a := range f.agents {
		if resync[i] > 0 {
			times = append(times, resync[i])
			if a.Resumed() {
				s.Resumed++
			}
		}
	}
	q := quantiles(times, 0.5, 0.99)
	s.AgentResyncP50Ms, s.AgentResyncP99Ms = ms(q[0]), ms(q[1])
	s.RestartToAllSec, s.ReadyToAllSec, s.SignalToAllSec = secs(tAll.Sub(tRestart)), secs(tAll.Sub(tReady)), secs(tAll.Sub(tSignal))
	s.HubRSSBytesAfter, _ = h.rss()
	logf("%d/%d agents resynced %.2f s after the restart (%d resumed)", s.Resynced, cfg.n, s.RestartToAllSec, s.Resumed)
	if left > 0 {
		return fmt.Errorf("%d agents did not resync within %s", left, cfg.stormTimeout)
	}
	verify(ctx, admin, f, s)
	return nil
}

// verify checks that every agent holds the current resourceVersion of its Seed and its Shoot (waiting up to 20 s for
// changes in flight, such as status writes of the new sessions).
//
// Writes go on while it checks (the sessions' throttled Seed status writes trickle in for many seconds after a
// failover), so a list and the agents' state are never one snapshot: a list taken a moment before an agent received a
// write shows the older version without anything being wrong. Each round therefore reads the agents first, lists
// from a hub state not older than the newest version an agent holds ("not older than" resourceVersion), and then
// reads the agents again. An agent is wrong when the hub shows an older version than the agent held before the list
// (the hub's cache lacks a write it claims to include), or when the agent, after the list, still holds an older
// version than the hub shows (the agent lacks a write; in flight at first, so only a mismatch that outlasts the
// rounds counts).
func verify(ctx context.Context, admin *client, f *fleet, s *stormReport) {
	start := time.Now()
	defer func() { s.VerifySec = secs(time.Since(start)) }()
	key := func(i int) [2]string { return [2]string{seedName(i), namespace + "/" + shootName(i)} }
	for attempt := 0; ; attempt++ {
		before := make([]map[string]map[string]int64, len(f.agents))
		var newest int64
		for i, a := range f.agents {
			before[i] = a.Snapshot()
			k := key(i)
			newest = max(newest, before[i][seedsResource][k[0]], before[i][shootsResource][k[1]])
		}
		seeds, seedsRev, err := listVersions(ctx, admin, seedsResource, newest)
		if err == nil {
			var shoots map[string]int64
			shoots, _, err = listVersions(ctx, admin, shootsResource, newest)
			if err == nil {
				ok, bad, first := 0, 0, ""
				for i, a := range f.agents {
					after, k := a.Snapshot(), key(i)
					hubSeed, hubShoot := seeds[k[0]], shoots[k[1]]
					heldSeed, heldShoot := before[i][seedsResource][k[0]], before[i][shootsResource][k[1]]
					nowSeed, nowShoot := after[seedsResource][k[0]], after[shootsResource][k[1]]
					hubStale := hubSeed < heldSeed || hubShoot < heldShoot
					agentBehind := nowSeed < hubSeed || nowShoot < hubShoot
					if !hubStale && !agentBehind && hubSeed > 0 && hubShoot > 0 {
						ok++
						continue
					}
					bad++
					if first == "" || hubStale && !strings.Contains(first, "hub behind") {
						what := "agent behind"
						if hubStale {
							what = "hub behind"
						}
						first = fmt.Sprintf("%s: agent %s: seed rv %d (hub %d in a list at revision %d, not older than %d), shoot rv %d (hub %d)",
							what, k[0], nowSeed, hubSeed, seedsRev, newest, nowShoot, hubShoot)
					}
				}
				s.VerifiedAgents, s.VerifyMismatches, s.VerifyFirstProblem = ok, bad, first
				if bad == 0 || time.Since(start) > 20*time.Second {
					return
				}
			}
		}
		if err != nil {
			s.VerifyFirstProblem = "list: " + err.Error()
			if time.Since(start) > 20*time.Second {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
