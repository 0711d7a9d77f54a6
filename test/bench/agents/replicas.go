package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/etcdcluster"
)

// failoverBudget is how long the agents of a SIGKILLed replica may take to resync on the others (issue 21).
const failoverBudget = 20 * time.Second

// replicasReport is the result of -replicas: R hub replicas on a three-member etcd cluster, the fleet spread over them
// by a random pick per connection, assignments written through every replica, and one replica SIGKILLed.
type replicasReport struct {
	N                   int     `json:"n"`
	Replicas            int     `json:"replicas"`
	EtcdMembers         int     `json:"etcdMembers"`
	Started             string  `json:"started"`
	CPUs                int     `json:"cpus"`
	Spread              string  `json:"spread"` // how agents pick a replica
	HeartbeatIntervalMs float64 `json:"heartbeatIntervalMs"`
	RampMs              float64 `json:"rampMs"`
	LoadAverage         string  `json:"loadAverageAtStart"`

	Setup   setupReport `json:"setup"`
	Connect struct {
		Synced       int     `json:"synced"`
		AllSyncedSec float64 `json:"allSyncedSeconds"`
		TCPAccepted  int64   `json:"tcpAccepted"`
	} `json:"connect"`
	Steady struct {
		WindowSec       float64 `json:"windowSeconds"`
		Acks            int     `json:"acks"`
		AckP50Ms        float64 `json:"ackP50Ms"`
		AckP99Ms        float64 `json:"ackP99Ms"`
		OtherCPUPercent float64 `json:"otherCPUPercentOfOneCore"`
		LeaseWritesPerS float64 `json:"agentLinkEtcdWritesPerSecondAllReplicas"`
	} `json:"steady"`
	// Assign: shoot updates written through replica k mod R; Cross counts those whose agent was on another replica.
	Assign struct {
		Updates           int     `json:"updates"`
		Cross             int     `json:"crossReplica"`
		Received          int     `json:"received"`
		Missing           int     `json:"missing"`
		Errors            int     `json:"errors"`
		FirstError        string  `json:"firstError,omitempty"`
		CommitToRecvP50Ms float64 `json:"commitToReceiveP50Ms"`
		CommitToRecvP99Ms float64 `json:"commitToReceiveP99Ms"`
		CrossP99Ms        float64 `json:"crossReplicaCommitToReceiveP99Ms"`
	} `json:"assign"`
	Failover failoverReport `json:"failover"`
	Members  []replicaStat  `json:"replicaStats"`
	Budgets  []budget       `json:"budgets"`
}

type failoverReport struct {
	Killed        int     `json:"killedReplica"`
	KilledLeader  bool    `json:"killedLeader"`
	AgentsOnIt    int     `json:"agentsOnKilledReplica"`
	Resynced      int     `json:"resynced"`
	OthersResyncd int     `json:"agentsOfOtherReplicasThatResynced"`
	NewLeader     int     `json:"newLeader"` // -1: none
	Leaders       int     `json:"leadersAfter"`
	LeaderSec     float64 `json:"killToNewLeaderSeconds"`
	// KillToAllSec: SIGKILL → every agent of the killed replica has completed a SyncComplete on another replica.
	KillToAllSec     float64 `json:"killToAllResyncedSeconds"`
	AgentResyncP50Ms float64 `json:"agentResyncP50Ms"`
	AgentResyncP99Ms float64 `json:"agentResyncP99Ms"`
	TCPAccepted      int64   `json:"tcpAccepted"` // machine-wide, from the kill until all resynced
	// OutageUpdates are shoot updates of the killed replica's agents written through the survivors right after the
	// kill; OutageMissing of them had not reached their agent when the check ended.
	OutageUpdates  int    `json:"outageUpdates"`
	OutageMissing  int    `json:"outageMissing"`
	OutageErrors   int    `json:"outageErrors"`
	VerifiedAgents int    `json:"verifiedAgents"`
	Mismatches     int    `json:"verifyMismatches"`
	FirstProblem   string `json:"verifyFirstProblem,omitempty"`
	// EtcdSays compares, for the first agents whose Seed differs from a survivor's API, what etcd holds (a
	// linearizable read) with what the agent holds.
	EtcdSays []string `json:"etcdSays,omitempty"`
}

type replicaStat struct {
	Index          int     `json:"index"`
	GRPCAddr       string  `json:"grpcAddress"`
	LeaderAtStart  bool    `json:"leaderAtStart"`
	AgentsBefore   int     `json:"agentsBeforeFailover"`
	AgentsAfter    int     `json:"agentsAfterFailover"`
	SessionsBefore float64 `json:"sessionsMetricBefore"`
	SessionsAfter  float64 `json:"sessionsMetricAfter"`
	RSSBytes       int64   `json:"rssBytesSteady"`
	CPUPercent     float64 `json:"cpuPercentOfOneCoreSteady"`
	RSSAfterBytes  int64   `json:"rssBytesAfterFailover"`
	FailoverCPUSec float64 `json:"cpuSecondsFailover"`
	SessionsStart  float64 `json:"sessionsStartedDuringFailover"`
	Killed         bool    `json:"killed"`
}

// replicaSet is the etcd cluster and the hub replicas of -replicas, each also as a *hub for metrics and admin access.
type replicaSet struct {
	etcd  *etcdcluster.Cluster
	procs []*binproc.Hub
	hubs  []*hub
	grpc  []string
}

func (rs *replicaSet) stop() {
	for _, p := range rs.procs {
		_ = p.Stop(10 * time.Second)
	}
	if rs.etcd != nil {
		rs.etcd.Stop()
	}
}

func startReplicaSet(ctx context.Context, cfg config, dir string) (*replicaSet, error) {
	etcdBin, err := filepath.Abs(cfg.etcdBin)
	if err != nil {
		return nil, err
	}
	hubBin, err := filepath.Abs(cfg.hubBin)
	if err != nil {
		return nil, err
	}
	rs := &replicaSet{}
	logf("starting a %d-member etcd cluster (TLS) from %s in %s", 3, etcdBin, filepath.Join(dir, "etcd"))
	if rs.etcd, err = etcdcluster.Start(ctx, etcdcluster.Config{Bin: etcdBin, Dir: filepath.Join(dir, "etcd"), Members: 3}); err != nil {
		return nil, err
	}
	if rs.grpc, err = binproc.FreeAddrs(cfg.replicas); err != nil {
		rs.stop()
		return nil, err
	}
	var env []string
	if cfg.hubMemLimit != "" {
		env = []string{"GOMEMLIMIT=" + cfg.hubMemLimit}
	}
	rs.procs, err = binproc.StartReplicas(ctx, binproc.ReplicasConfig{
		Bin: hubBin, Dir: dir, Replicas: cfg.replicas, Env: env,
		Args:        append(rs.etcd.HubArgs(), "--heartbeat-interval", cfg.heartbeat.String()),
		ReplicaArgs: func(i int) []string { return []string{"--grpc-listen", rs.grpc[i]} },
		Hub:         binproc.HubConfig{ReadyTimeout: 60 * time.Second},
	})
	if err != nil {
		rs.stop()
		return nil, err
	}
	for i, p := range rs.procs {
		h := &hub{addr: p.Addr(), grpcAddr: rs.grpc[i], dataDir: p.DataDir(), pid: p.PID(), hbInt: cfg.heartbeat, logPath: p.LogPath()}
		if err := h.loadCredentials(true); err != nil {
			rs.stop()
			return nil, err
		}
		rs.hubs = append(rs.hubs, h)
	}
	return rs, nil
}

// leaders returns the indexes of the running replicas that lead the controllers' election.
func (rs *replicaSet) leaders() []int {
	var out []int
	for i, p := range rs.procs {
		if p.IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// onReplica counts the agents whose last session went to each replica.
func (rs *replicaSet) onReplica(f *fleet) ([]int, []int) {
	counts := make([]int, len(rs.grpc))
	which := make([]int, len(f.agents))
	for i, a := range f.agents {
		which[i] = -1
		for r, addr := range rs.grpc {
			if a.Remote() == addr {
				counts[r]++
				which[i] = r
			}
		}
	}
	return counts, which
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// runReplicas is the -replicas mode: a fresh etcd cluster and fresh replicas every run.
func runReplicas(ctx context.Context, cfg config) (*replicasReport, error) {
	rep := &replicasReport{N: cfg.n, Replicas: cfg.replicas, EtcdMembers: 3, Started: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(),
		HeartbeatIntervalMs: ms(cfg.heartbeat), RampMs: ms(cfg.ramp), LoadAverage: loadAverage(),
		Spread: "every connection tries the replicas' --grpc-listen addresses in a random order and takes the first that accepts a TCP connection (hubdial.DialFirst), as agents whose hub address is a DNS name with one address per replica (a headless Service)"}
	dir := filepath.Join("bin", "bench", fmt.Sprintf("agents-%d-replicas-%d", cfg.n, cfg.replicas))
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockDir(filepath.Dir(dir))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	rs, err := startReplicaSet(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	defer rs.stop()
	for i, h := range rs.hubs {
		logf("replica %d: pid %d, main %s, agents %s, log %s", i, h.pid, h.addr, h.grpcAddr, h.logPath)
	}
	admins := make([]*client, len(rs.hubs))
	for i, h := range rs.hubs {
		if admins[i], err = dialAdmin(h, 2); err != nil {
			return nil, err
		}
		defer admins[i].close()
	}
	rep.Members = make([]replicaStat, len(rs.hubs))
	for i := range rep.Members {
		rep.Members[i] = replicaStat{Index: i, GRPCAddr: rs.grpc[i]}
	}

	// ---- setup, through replica 0; bootstraps spread over all replicas ----
	dialer := agentsim.Dialer{Addresses: rs.grpc, CA: rs.hubs[0].pool}
	scfg := cfg
	scfg.reuse, scfg.dataDir = false, rs.hubs[0].dataDir
	certs, err := setupFleet(ctx, scfg, rs.hubs[0], admins[0], dialer, &rep.Setup)
	if err != nil {
		return rep, fmt.Errorf("setup: %w", err)
	}

	// ---- connect ----
	f := newFleet(dialer, certs, cfg.heartbeat)
	defer f.stop()
	logf("starting %d agents over %s, spread over %d replicas", cfg.n, cfg.ramp, cfg.replicas)
	tcp0 := readTCPCounters()
	t0 := time.Now()
	f.start(ctx, cfg.ramp)
	progress := startProgress(ctx, "synced", cfg.n, f.countSynced)
	rep.Connect.Synced = f.waitSynced(ctx, cfg.syncTimeout)
	progress()
	rep.Connect.AllSyncedSec = secs(time.Since(t0))
	rep.Connect.TCPAccepted = readTCPCounters().sub(tcp0).passiveOpens
	logf("%d/%d agents synced in %.2f s", rep.Connect.Synced, cfg.n, rep.Connect.AllSyncedSec)
	if rep.Connect.Synced < cfg.n {
		return rep, fmt.Errorf("only %d of %d agents synced within %s", rep.Connect.Synced, cfg.n, cfg.syncTimeout)
	}
	for _, h := range rs.hubs {
		if _, err := settle(ctx, h, cfg.settleMax); err != nil {
			return rep, err
		}
	}
	counts, _ := rs.onReplica(f)
	leaders := rs.leaders()
	for i := range rep.Members {
		rep.Members[i].AgentsBefore = counts[i]
		rep.Members[i].LeaderAtStart = len(leaders) == 1 && leaders[0] == i
	}
	logf("agents per replica %v; leader(s) %v", counts, leaders)
	if len(leaders) != 1 {
		return rep, fmt.Errorf("%d replicas lead the controllers' election (%v), want 1", len(leaders), leaders)
	}

	// ---- steady: per-replica RSS and CPU, acks ----
	if err := replicasSteady(ctx, cfg, rs, f, rep); err != nil {
		return rep, err
	}

	// ---- assignments written through every replica ----
	if cfg.updates > 0 {
		replicasAssign(ctx, cfg, rs, admins, f, rep)
	}

	// ---- failover: SIGKILL one replica ----
	victim := leaders[0]
	switch cfg.killReplica {
	case "leader":
	case "follower":
		victim = (leaders[0] + 1) % cfg.replicas
	default:
		v, err := strconv.Atoi(cfg.killReplica)
		if err != nil || v < 0 || v >= cfg.replicas {
			return rep, fmt.Errorf("-kill-replica %q: want leader, follower or an index below %d", cfg.killReplica, cfg.replicas)
		}
		victim = v
	}
	if err := replicasFailover(ctx, cfg, rs, admins, f, victim, rep); err != nil {
		return rep, err
	}
	rep.budgets()
	return rep, nil
}

func replicasSteady(ctx context.Context, cfg config, rs *replicaSet, f *fleet, rep *replicasReport) error {
	waitQuiet(ctx, cfg, rs.hubs[0])
	logf("steady state: measuring %d replicas for %s", len(rs.hubs), cfg.window)
	m0 := make([]map[string]float64, len(rs.hubs))
	cpu0 := make([]time.Duration, len(rs.hubs))
	for i, h := range rs.hubs {
		var err error
		if m0[i], err = h.metrics(ctx); err != nil {
			return err
		}
		cpu0[i] = h.cpu()
	}
	all0 := snapshot(rs.hubs[0])
	f.startAcks()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.window):
	}
	acks, _ := f.stopAcks()
	d := all0.delta(rs.hubs[0])
	w := d.wall.Seconds()
	var hubsCPU, writes float64
	for i, h := range rs.hubs {
		m1, err := h.metrics(ctx)
		if err != nil {
			return err
		}
		c := (h.cpu() - cpu0[i]).Seconds()
		hubsCPU += c
		rep.Members[i].CPUPercent = round2(100 * c / w)
		rep.Members[i].RSSBytes, _ = h.rss()
		rep.Members[i].SessionsBefore = m1["trellis_agentlink_sessions"]
		writes += sum(agentWrites(m1)) - sum(agentWrites(m0[i]))
	}
	s := &rep.Steady
	s.WindowSec, s.Acks = secs(d.wall), len(acks)
	// d counts replica 0 as "the hub": the other replicas are in its "other".
	s.OtherCPUPercent = round2(max(0, d.other+d.hub-hubsCPU) * 100 / w)
	s.LeaseWritesPerS = round2(writes / w)
	q := quantiles(acks, 0.5, 0.99)
	s.AckP50Ms, s.AckP99Ms = ms(q[0]), ms(q[1])
	for i, m := range rep.Members {
		logf("  replica %d: %d agents, RSS %.1f MiB, CPU %.1f %%", i, m.AgentsBefore, mib(m.RSSBytes), m.CPUPercent)
	}
	logf("steady: ack p50 %.2f ms, p99 %.2f ms; agent link etcd writes %.2f/s (all replicas)", s.AckP50Ms, s.AckP99Ms, s.LeaseWritesPerS)
	return nil
}

// replicasAssign updates shoots through replica k mod R and times their arrival at the owning agents, wherever those
// are connected.
func replicasAssign(ctx context.Context, cfg config, rs *replicaSet, admins []*client, f *fleet, rep *replicasReport) {
	m := min(cfg.updates, cfg.n)
	logf("assignments: %d shoot updates at %.0f/s, written through the replicas in turn", m, cfg.updateRate)
	_, which := rs.onReplica(f)
	f.assignOn.Store(true)
	defer f.assignOn.Store(false)
	results := make([]updateResult, m)
	writer := make([]int, m)
	t := time.NewTicker(time.Duration(float64(time.Second) / cfg.updateRate))
	defer t.Stop()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for k := range m {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			i := k * cfg.n / m
			writer[k] = k % len(admins)
			results[k] = updateShoot(ctx, admins[writer[k]], i, k)
		})
	}
	wg.Wait()
	a := &rep.Assign
	a.Updates = m
	var all, cross []time.Duration
	waitArrivals(f, results, 10*time.Second)
	for k, r := range results {
		if r.err != nil {
			a.Errors++
			if a.FirstError == "" {
				a.FirstError = r.err.Error()
			}
			continue
		}
		isCross := which[r.agent] != writer[k]
		if isCross {
			a.Cross++
		}
		at, ok := f.received(r.agent, r.rv)
		if !ok {
			a.Missing++
			continue
		}
		a.Received++
		all = append(all, at.Sub(r.returned))
		if isCross {
			cross = append(cross, at.Sub(r.returned))
		}
	}
	q := quantiles(all, 0.5, 0.99)
	a.CommitToRecvP50Ms, a.CommitToRecvP99Ms = ms(q[0]), ms(q[1])
	a.CrossP99Ms = ms(quantiles(cross, 0.99)[0])
	logf("assignments: %d received (%d written through another replica than the agent's), %d missing, %d errors; p50 %.2f ms, p99 %.2f ms",
		a.Received, a.Cross, a.Missing, a.Errors, a.CommitToRecvP50Ms, a.CommitToRecvP99Ms)
}

// waitArrivals waits up to limit until every successful update has reached its agent.
func waitArrivals(f *fleet, results []updateResult, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		missing := 0
		for _, r := range results {
			if r.err == nil {
				if _, ok := f.received(r.agent, r.rv); !ok {
					missing++
				}
			}
		}
		if missing == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicasFailover SIGKILLs replica victim, writes an update of each of its agents' shoots through the survivors
// while they are away, and waits until every one of them has synced again on another replica.
func replicasFailover(ctx context.Context, cfg config, rs *replicaSet, admins []*client, f *fleet, victim int, rep *replicasReport) error {
	fo := &rep.Failover
	fo.Killed, fo.KilledLeader, fo.NewLeader = victim, rs.procs[victim].IsLeader(), -1
	_, which := rs.onReplica(f)
	var mine []int
	for i, r := range which {
		if r == victim {
			mine = append(mine, i)
		}
	}
	fo.AgentsOnIt = len(mine)
	var survivors []int
	for i := range rs.hubs {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	base := f.syncs()
	cpu0 := make([]time.Duration, len(rs.hubs))
	started0 := make([]float64, len(rs.hubs))
	for _, i := range survivors {
		cpu0[i] = rs.hubs[i].cpu()
		if m, err := rs.hubs[i].metrics(ctx); err == nil {
			started0[i] = m["trellis_agentlink_sessions_started_total"]
		}
	}
	f.assignOn.Store(true)
	defer f.assignOn.Store(false)
	logf("failover: SIGKILL of replica %d (leader: %v), which serves %d agents", victim, fo.KilledLeader, len(mine))
	tcp0 := readTCPCounters()
	tKill := time.Now()
	if err := rs.procs[victim].Kill(); err != nil {
		return err
	}
	rep.Members[victim].Killed = true

	// Updates of the victim's agents' shoots through the survivors, while those agents are away.
	outage := make([]updateResult, len(mine))
	var writers sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		writers.Go(func() {
			for k := int(next.Add(1) - 1); k < len(mine); k = int(next.Add(1) - 1) {
				outage[k] = updateShoot(ctx, admins[survivors[k%len(survivors)]], mine[k], cfg.updates+k)
			}
		})
	}

	resync := make([]time.Duration, len(mine))
	left := len(mine)
	deadline := time.Now().Add(cfg.stormTimeout)
	lastLog := time.Now()
	for left > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		now := time.Now()
		for k, i := range mine {
			if resync[k] == 0 && f.agents[i].Syncs() > base[i] {
				resync[k] = now.Sub(tKill)
				left--
			}
		}
		if fo.NewLeader < 0 {
			if l := rs.leaders(); len(l) == 1 {
				fo.NewLeader, fo.LeaderSec = l[0], secs(now.Sub(tKill))
			}
		}
		if time.Since(lastLog) > 5*time.Second {
			logf("  %d/%d resynced", len(mine)-left, len(mine))
			lastLog = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	tAll := time.Now()
	fo.TCPAccepted = readTCPCounters().sub(tcp0).passiveOpens
	fo.Resynced, fo.KillToAllSec = len(mine)-left, secs(tAll.Sub(tKill))
	q := quantiles(resync, 0.5, 0.99)
	fo.AgentResyncP50Ms, fo.AgentResyncP99Ms = ms(q[0]), ms(q[1])
	for i, n := range f.syncs() {
		if which[i] != victim && n > base[i] {
			fo.OthersResyncd++
		}
	}
	writers.Wait()
	logf("failover: %d/%d agents resynced %.2f s after the kill (p99 %.2f ms); %d of other replicas' agents resynced too",
		fo.Resynced, len(mine), fo.KillToAllSec, fo.AgentResyncP99Ms, fo.OthersResyncd)

	// A new leader: the election's session lease (15 s) must run out first when the leader was killed.
	for fo.NewLeader < 0 && time.Since(tKill) < 40*time.Second && ctx.Err() == nil {
		if l := rs.leaders(); len(l) == 1 {
			fo.NewLeader, fo.LeaderSec = l[0], secs(time.Since(tKill))
		}
		time.Sleep(100 * time.Millisecond)
	}
	fo.Leaders = len(rs.leaders())
	fo.OutageUpdates = len(outage)
	waitArrivals(f, outage, 10*time.Second)
	for _, r := range outage {
		if r.err != nil {
			fo.OutageErrors++
		} else if _, ok := f.received(r.agent, r.rv); !ok {
			fo.OutageMissing++
		}
	}
	counts, _ := rs.onReplica(f)
	for _, i := range survivors {
		h := rs.hubs[i]
		rep.Members[i].AgentsAfter = counts[i]
		rep.Members[i].RSSAfterBytes, _ = h.rss()
		rep.Members[i].FailoverCPUSec = round2((h.cpu() - cpu0[i]).Seconds())
		if m, err := h.metrics(ctx); err == nil {
			rep.Members[i].SessionsAfter = m["trellis_agentlink_sessions"]
			rep.Members[i].SessionsStart = m["trellis_agentlink_sessions_started_total"] - started0[i]
		}
	}
	// Every survivor's API must show what the agents hold (each serves reads from its own watch cache).
	for _, r := range survivors {
		s := &stormReport{}
		verify(ctx, admins[r], f, s)
		if r == survivors[0] {
			fo.VerifiedAgents = s.VerifiedAgents
		}
		fo.Mismatches += s.VerifyMismatches
		if s.VerifyFirstProblem != "" && fo.FirstProblem == "" {
			fo.FirstProblem = fmt.Sprintf("replica %d: %s", r, s.VerifyFirstProblem)
		}
	}
	if fo.Mismatches > 0 {
		fo.EtcdSays = etcdSeeds(ctx, rs.etcd, f)
	}
	logf("failover: new leader %d after %.1f s (%d leaders); outage updates %d, %d missing, %d errors; verified %d agents, %d mismatches",
		fo.NewLeader, fo.LeaderSec, fo.Leaders, fo.OutageUpdates, fo.OutageMissing, fo.OutageErrors, fo.VerifiedAgents, fo.Mismatches)
	if left > 0 {
		return fmt.Errorf("%d agents of the killed replica did not resync within %s", left, cfg.stormTimeout)
	}
	return nil
}

// etcdSeeds reads, for up to 5 agents, their Seed's key from etcd and reports its mod revision beside the agent's.
func etcdSeeds(ctx context.Context, c *etcdcluster.Cluster, f *fleet) []string {
	cli, err := c.Client()
	if err != nil {
		return []string{err.Error()}
	}
	defer cli.Close()
	var out []string
	for i, a := range f.agents {
		held := a.Snapshot()[seedsResource][seedName(i)]
		resp, err := cli.Get(ctx, "/trellis/core.gardener.cloud/seeds/"+seedName(i))
		if err != nil || len(resp.Kvs) != 1 {
			out = append(out, fmt.Sprintf("%s: %v", seedName(i), err))
		} else if resp.Kvs[0].ModRevision != held {
			out = append(out, fmt.Sprintf("%s: etcd mod revision %d, the agent (on %s) holds %d", seedName(i), resp.Kvs[0].ModRevision, a.Remote(), held))
		}
		if len(out) == 5 {
			break
		}
	}
	return out
}

func (r *replicasReport) budgets() {
	fo := r.Failover
	lost := fo.OutageMissing + fo.OutageErrors + r.Assign.Missing + fo.Mismatches + (fo.AgentsOnIt - fo.Resynced)
	r.Budgets = []budget{
		{What: "agents of the killed replica resynced on the others", Value: fo.KillToAllSec, Limit: failoverBudget.Seconds(), Unit: "s",
			OK: fo.Resynced == fo.AgentsOnIt && fo.KillToAllSec < failoverBudget.Seconds()},
		{What: "lost: updates not received, agents not at the latest seed and shoot", Value: float64(lost), Limit: 0, Unit: "",
			OK: lost == 0, Note: fmt.Sprintf("%d outage updates missing, %d failed, %d assignments missing, %d mismatches", fo.OutageMissing, fo.OutageErrors, r.Assign.Missing, fo.Mismatches)},
		{What: "replicas leading the loops after the failover", Value: float64(fo.Leaders), Limit: 1, Unit: "", OK: fo.Leaders == 1},
	}
}

// Print prints the report.
func (r *replicasReport) Print() {
	fmt.Printf("\nbench-agents -replicas %d: %d agents, %d etcd members (TLS), %d CPUs, load average %s at start\n", r.Replicas, r.N, r.EtcdMembers, r.CPUs, r.LoadAverage)
	fmt.Printf("spread: %s\n", r.Spread)
	fmt.Printf("connect: %d synced in %.2f s, %d TCP connections accepted\n", r.Connect.Synced, r.Connect.AllSyncedSec, r.Connect.TCPAccepted)
	fmt.Printf("steady (%.0f s): ack p50 %.2f ms, p99 %.2f ms; agent link etcd writes %.2f/s over all replicas; other processes %.0f %% of a core\n",
		r.Steady.WindowSec, r.Steady.AckP50Ms, r.Steady.AckP99Ms, r.Steady.LeaseWritesPerS, r.Steady.OtherCPUPercent)
	a := r.Assign
	fmt.Printf("assignments: %d updates through the replicas in turn, %d of them for agents on another replica: %d received, %d missing; commit→receive p50 %.2f ms, p99 %.2f ms (cross-replica p99 %.2f ms)\n",
		a.Updates, a.Cross, a.Received, a.Missing, a.CommitToRecvP50Ms, a.CommitToRecvP99Ms, a.CrossP99Ms)
	fo := r.Failover
	fmt.Printf("failover: SIGKILL of replica %d (leader %v) with %d agents: %d resynced elsewhere %.2f s after the kill (agent p50 %.0f ms, p99 %.0f ms), %d TCP connections accepted, %d agents of other replicas resynced; new leader %d after %.1f s\n",
		fo.Killed, fo.KilledLeader, fo.AgentsOnIt, fo.Resynced, fo.KillToAllSec, fo.AgentResyncP50Ms, fo.AgentResyncP99Ms, fo.TCPAccepted, fo.OthersResyncd, fo.NewLeader, fo.LeaderSec)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replica\tleader\tagents\tRSS MiB\tCPU %\tafter kill: agents\tRSS MiB\tCPU s\tsessions started")
	for _, m := range r.Members {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%.0f\t%.1f\t%s\n", m.Index, m.LeaderAtStart, m.AgentsBefore, mib(m.RSSBytes), m.CPUPercent,
			map[bool]string{true: "killed", false: fmt.Sprintf("%d\t%.0f\t%.2f\t%.0f", m.AgentsAfter, mib(m.RSSAfterBytes), m.FailoverCPUSec, m.SessionsStart)}[m.Killed])
	}
	_ = tw.Flush()
	for _, b := range r.Budgets {
		fmt.Printf("  %-70s %8.2f %-2s (limit %g) %s %s\n", b.What, b.Value, b.Unit, b.Limit, verdict(b.OK), b.Note)
	}
}

// failed reports whether a budget was missed.
func (r *replicasReport) failed() bool {
	for _, b := range r.Budgets {
		if !b.OK {
			return true
		}
	}
	return false
}

var errReplicasReuse = errors.New("-replicas runs on a fresh etcd cluster every time: -reuse, -hub and -kill9 do not apply")
