package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Budgets from DESIGN.md (Budgets, 2 cores, loopback).
const (
	startupBudget    = 2 * time.Second
	rssBudget        = 1 << 30               // hub RSS with 10,000 agents
	ackBudget        = 5 * time.Millisecond  // heartbeat ack p99
	writesBudget     = 50.0                  // heartbeat-driven etcd writes per second
	assignBudget     = 10 * time.Millisecond // assignment latency p99 with 1,000 agents
	stormBudget      = 20 * time.Second      // all 10,000 agents resynced after a hub restart
	budgetAgentsRSS  = 10000
	budgetAgentsAsgn = 1000
)

type report struct {
	N                   int     `json:"n"`
	Started             string  `json:"started"`
	GoVersion           string  `json:"goVersion"`
	CPUs                int     `json:"cpus"`
	Hub                 string  `json:"hub"`
	AgentPort           string  `json:"agentPort"` // where the agents connected
	HeartbeatIntervalMs float64 `json:"heartbeatIntervalMs"`
	RampMs              float64 `json:"rampMs"`
	HubStartupMs        float64 `json:"hubStartupMs"`       // process start → /readyz 200 (fresh or reused data dir)
	HubLoggedStartupMs  float64 `json:"hubLoggedStartupMs"` // the startup the hub logged (process start → serving)
	FreshDataDir        bool    `json:"freshDataDir"`

	Setup   setupReport   `json:"setup"`
	Connect connectReport `json:"connect"`
	Steady  steadyReport  `json:"steady"`
	// SteadyAttempts are the windows measured; Steady is the one other processes disturbed least.
	SteadyAttempts []attemptSummary `json:"steadyAttempts"`
	Assign         assignReport     `json:"assign"`
	Storm          *stormReport     `json:"storm,omitempty"`

	HubPeakRSSBytes int64       `json:"hubPeakRSSBytes"` // VmHWM of the last hub process
	Profiles        []string    `json:"profiles,omitempty"`
	HubLogProblems  logProblems `json:"hubLogProblems"`
	Budgets         []budget    `json:"budgets"`
}

type setupReport struct {
	Reused           bool    `json:"reused"`
	ObjectsSec       float64 `json:"objectsSeconds"` // shared objects + N seeds + N shoots
	ObjectsPerSec    float64 `json:"objectsPerSecond"`
	Tokens           int     `json:"tokens"`
	TokensSec        float64 `json:"tokensSeconds"`
	Bootstrapped     int     `json:"bootstrapped"`
	BootstrapSec     float64 `json:"bootstrapSeconds"`
	BootstrapPerSec  float64 `json:"bootstrapPerSecond"`
	BootstrapP50Ms   float64 `json:"bootstrapP50Ms"`
	BootstrapP99Ms   float64 `json:"bootstrapP99Ms"`
	BootstrapConc    int     `json:"bootstrapConcurrency"`
	HubRSSBytesAfter int64   `json:"hubRSSBytesAfter"`
}

type connectReport struct {
	Synced            int     `json:"synced"`
	AllSyncedSec      float64 `json:"allSyncedSeconds"` // first agent start → last agent's first SyncComplete
	AgentSyncP50Ms    float64 `json:"agentSyncP50Ms"`   // one agent's start → its first SyncComplete
	AgentSyncP99Ms    float64 `json:"agentSyncP99Ms"`
	AgentSyncMaxMs    float64 `json:"agentSyncMaxMs"`
	HubCPUSec         float64 `json:"hubCPUSeconds"`
	BenchCPUSec       float64 `json:"benchCPUSeconds"`
	OtherCPUSec       float64 `json:"otherCPUSeconds"`
	HubRSSBytesAfter  int64   `json:"hubRSSBytesAfter"`
	SettleSec         float64 `json:"settleSeconds"`    // after sync, until the link's writes and queues were quiet
	LoopsIdleSec      float64 `json:"loopsIdleSeconds"` // then until the hub's own loops had no more writes to make
	LoopWrites        int64   `json:"loopWrites"`       // the etcd writes that were not the agent link's meanwhile
	SeedStatusWrites  float64 `json:"seedStatusWrites"`
	PresenceWrites    float64 `json:"presenceWrites"`
	SessionsStarted   float64 `json:"sessionsStarted"`
	AssignmentsToSync float64 `json:"assignmentsSent"`
	// Machine-wide TCP counters over the phase: connections accepted (≈ TLS handshakes the hub began) and listen queue
	// overflows/drops.
	TCPAccepted     int64 `json:"tcpAccepted"`
	ListenOverflows int64 `json:"listenOverflows"`
	ListenDrops     int64 `json:"listenDrops"`
}

type steadyReport struct {
	WindowSec        float64 `json:"windowSeconds"`
	Sessions         float64 `json:"sessions"`
	HubRSSBytes      int64   `json:"hubRSSBytes"`    // at the end of the window
	HubRSSMaxBytes   int64   `json:"hubRSSMaxBytes"` // the highest of the per-second samples
	RSSPerAgentKiB   float64 `json:"rssPerAgentKiB"` // (RSS at the end − RSS before the agents connected) / N
	HubCPUPercent    float64 `json:"hubCPUPercentOfOneCore"`
	BenchCPUPercent  float64 `json:"benchCPUPercentOfOneCore"`
	OtherCPUPercent  float64 `json:"otherCPUPercentOfOneCore"`
	HeartbeatsPerSec float64 `json:"heartbeatsPerSecond"`
	Acks             int     `json:"acks"`
	AckP50Ms         float64 `json:"ackP50Ms"`
	AckP90Ms         float64 `json:"ackP90Ms"`
	AckP99Ms         float64 `json:"ackP99Ms"`
	AckP999Ms        float64 `json:"ackP999Ms"`
	// The p99 without the acks of the seconds around this load generator's own collections (AcksNoBenchGC acks
	// left), which the budget is checked against, and without those around either process's (AcksNoGC left).
	AckP99NoBenchGCMs float64            `json:"ackP99WithoutBenchGCMs"`
	AcksNoBenchGC     int                `json:"acksWithoutBenchGC"`
	AckP99NoGCMs      float64            `json:"ackP99WithoutGCMs"`
	AcksNoGC          int                `json:"acksWithoutGC"`
	AckMaxMs          float64            `json:"ackMaxMs"`
	EtcdWritesPerSec  float64            `json:"etcdWritesPerSecond"` // trellis_agentlink_etcd_writes_total
	EtcdWritesByPurp  map[string]float64 `json:"etcdWritesPerSecondByPurpose"`
	EtcdRevisionPerSc float64            `json:"etcdRevisionsPerSecond"` // every etcd write of the hub, as a cross-check
	HubGoroutines     float64            `json:"hubGoroutines"`
	HubHeapInuseBytes float64            `json:"hubHeapInuseBytes"`
	HubMem            map[string]float64 `json:"hubGoMemStats"` // go_memstats_* at the end of the window
	HubGCs            float64            `json:"hubGCs"`
	HubGCPauseMaxMs   float64            `json:"hubGCPauseMaxMs"` // the longest recent stop-the-world pause
	// What the hub allocated in the window (go_memstats_alloc_bytes_total, mallocs_total): the rate sets how often
	// it collects, and every collection's mark phase delays acks (mark assists).
	HubAllocBytesPerSec       float64  `json:"hubAllocBytesPerSecond"`
	HubAllocBytesPerHeartbeat float64  `json:"hubAllocBytesPerHeartbeat"` // everything the hub allocated ÷ heartbeats
	HubMallocsPerHeartbeat    float64  `json:"hubMallocsPerHeartbeat"`
	QuietWaitSec              float64  `json:"quietWaitSeconds"`
	Timeline                  []second `json:"timeline"` // per second of the window
}

type attemptSummary struct {
	OtherCPUPercent float64 `json:"otherCPUPercentOfOneCore"`
	HubCPUPercent   float64 `json:"hubCPUPercentOfOneCore"`
	AckP50Ms        float64 `json:"ackP50Ms"`
	AckP99Ms        float64 `json:"ackP99Ms"`
}

type second struct {
	S           int     `json:"s"`
	Acks        int     `json:"acks"`
	AckP50Ms    float64 `json:"ackP50Ms"`
	AckP99Ms    float64 `json:"ackP99Ms"`
	AckMaxMs    float64 `json:"ackMaxMs"`
	HubCPUPct   float64 `json:"hubCPUPercent"`
	BenchCPUPct float64 `json:"benchCPUPercent"`
	OtherCPUPct float64 `json:"otherCPUPercent"`
	HubGCs      int64   `json:"hubGCs"`   // collections the hub completed in this second
	BenchGCs    int64   `json:"benchGCs"` // collections this load generator completed in this second
}

type assignReport struct {
	Updates           int      `json:"updates"`
	Errors            int      `json:"errors"`
	FirstError        string   `json:"firstError,omitempty"`
	RatePerSec        float64  `json:"ratePerSecond"`
	Received          int      `json:"received"`
	Missing           int      `json:"missing"`
	MissingExamples   []string `json:"missingExamples,omitempty"`
	CommitToRecvP50Ms float64  `json:"commitToReceiveP50Ms"` // Update returned → agent saw the resourceVersion
	CommitToRecvP90Ms float64  `json:"commitToReceiveP90Ms"`
	CommitToRecvP99Ms float64  `json:"commitToReceiveP99Ms"`
	CommitToRecvMaxMs float64  `json:"commitToReceiveMaxMs"`
	BeforeReturn      int      `json:"receivedBeforeUpdateReturned"` // negative commit → receive
	SentToRecvP50Ms   float64  `json:"sentToReceiveP50Ms"`           // Update called → agent saw it (an upper bound)
	SentToRecvP99Ms   float64  `json:"sentToReceiveP99Ms"`
	SentToRecvMaxMs   float64  `json:"sentToReceiveMaxMs"`
	UpdateP50Ms       float64  `json:"updateCallP50Ms"`
	UpdateP99Ms       float64  `json:"updateCallP99Ms"`
	HubCPUPercent     float64  `json:"hubCPUPercentOfOneCore"`
	BenchCPUPercent   float64  `json:"benchCPUPercentOfOneCore"`
	OtherCPUPercent   float64  `json:"otherCPUPercentOfOneCore"`
	QuietWaitSec      float64  `json:"quietWaitSeconds"`
}

type stormReport struct {
	Signal             string   `json:"signal"`
	ForgotTLSSessions  bool     `json:"forgotTLSSessions"`           // every agent's reconnect was a full TLS handshake
	StopSec            float64  `json:"stopSeconds"`                 // signal → hub exited
	RestartToReadySec  float64  `json:"restartToReadySeconds"`       // new process start → /readyz 200
	RestartLoggedSec   float64  `json:"restartLoggedStartupSeconds"` // the startup the new hub logged (→ serving)
	ReadyProbes        []string `json:"readyProbes,omitempty"`       // /readyz outcomes while it restarted
	RestartToAllSec    float64  `json:"restartToAllResyncedSeconds"`
	ReadyToAllSec      float64  `json:"readyToAllResyncedSeconds"`
	SignalToAllSec     float64  `json:"signalToAllResyncedSeconds"`
	AgentResyncP50Ms   float64  `json:"agentResyncP50MsFromRestart"`
	AgentResyncP99Ms   float64  `json:"agentResyncP99MsFromRestart"`
	Resynced           int      `json:"resynced"`
	Resumed            int      `json:"resumed"`
	HubCPUSec          float64  `json:"hubCPUSecondsUntilAllResynced"`
	BenchCPUSec        float64  `json:"benchCPUSeconds"`
	OtherCPUSec        float64  `json:"otherCPUSeconds"`
	HubRSSBytesAfter   int64    `json:"hubRSSBytesAfter"`
	VerifiedAgents     int      `json:"verifiedAgents"` // hold the latest resourceVersion of their Seed and Shoot
	VerifyMismatches   int      `json:"verifyMismatches"`
	VerifyFirstProblem string   `json:"verifyFirstProblem,omitempty"`
	VerifySec          float64  `json:"verifySeconds"`
	QuietWaitSec       float64  `json:"quietWaitSeconds"`
	TCPAccepted        int64    `json:"tcpAccepted"` // machine-wide, signal → all resynced
	ListenOverflows    int64    `json:"listenOverflows"`
	ListenDrops        int64    `json:"listenDrops"`
}

type logProblems struct {
	Count int      `json:"count"`
	First []string `json:"first,omitempty"`
}

type budget struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
	OK     bool    `json:"ok"`
	Note   string  `json:"note,omitempty"`
	Absent bool    `json:"notMeasured,omitempty"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// quantiles sorts lat and returns the asked quantiles (q = 1 is the maximum).
func quantiles(lat []time.Duration, qs ...float64) []time.Duration {
	slices.Sort(lat)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		out[i] = quantile(lat, q)
	}
	return out
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "OVER BUDGET"
}

func (r *report) budgets() {
	add := func(what string, value, limit float64, unit string, ok bool, note string) {
		r.Budgets = append(r.Budgets, budget{What: what, Value: value, Limit: limit, Unit: unit, OK: ok, Note: note})
	}
	if r.FreshDataDir {
		add("hub start to ready (embedded etcd, fresh)", r.HubStartupMs, ms(startupBudget), "ms", r.HubStartupMs < ms(startupBudget), "")
	}
	note := ""
	if r.N != budgetAgentsRSS {
		note = fmt.Sprintf("budget stated for %d agents", budgetAgentsRSS)
	}
	if r.Steady.WindowSec == 0 {
		return // the later phases did not run
	}
	add("hub RSS at steady state (max sample)", round2(mib(r.Steady.HubRSSMaxBytes)), mib(rssBudget), "MiB", r.Steady.HubRSSMaxBytes < rssBudget, note)
	add("heartbeat ack p99 (not while the bench collects)", r.Steady.AckP99NoBenchGCMs, ms(ackBudget), "ms", r.Steady.AckP99NoBenchGCMs < ms(ackBudget), note)
	add("heartbeat-driven etcd writes", r.Steady.EtcdWritesPerSec, writesBudget, "/s", r.Steady.EtcdWritesPerSec <= writesBudget, note)
	if r.Assign.Updates > 0 {
		n := ""
		if r.N != budgetAgentsAsgn {
			n = fmt.Sprintf("budget stated for %d agents", budgetAgentsAsgn)
		}
		ok := r.Assign.Missing == 0 && r.Assign.Errors == 0 && r.Assign.CommitToRecvP99Ms < ms(assignBudget)
		add("assignment latency p99 (commit → agent)", r.Assign.CommitToRecvP99Ms, ms(assignBudget), "ms", ok, n)
	}
	if s := r.Storm; s != nil {
		n := ""
		if r.N != budgetAgentsRSS {
			n = fmt.Sprintf("budget stated for %d agents", budgetAgentsRSS)
		}
		ok := s.Resynced == r.N && s.VerifyMismatches == 0 && s.RestartToAllSec < stormBudget.Seconds()
		add("reconnect storm: restart → all resynced", s.RestartToAllSec, stormBudget.Seconds(), "s", ok, n)
	}
}

// Print checks the budgets and prints the report.
func (r *report) Print() {
	r.budgets()
	r.print()
}

func (r *report) print() {
	fmt.Println()
	fmt.Printf("bench-agents: %d agents, heartbeat %.0f ms, %d CPUs, %s, hub %s; agents connect to the %s\n", r.N, r.HeartbeatIntervalMs, r.CPUs, r.GoVersion, r.Hub, r.AgentPort)
	fmt.Printf("hub start → /readyz 200: %.1f ms (%s data dir; the hub logged %.1f ms to serving)\n", r.HubStartupMs, map[bool]string{true: "fresh", false: "reused"}[r.FreshDataDir], r.HubLoggedStartupMs)
	s := r.Setup
	if s.Reused && s.Bootstrapped == 0 {
		fmt.Println("setup: reused the data dir's objects and certificates")
	} else {
		fmt.Printf("setup: objects %.1f s (%.0f/s); %d tokens %.1f s; %d bootstraps %.1f s (%.0f/s, concurrency %d, p50 %.1f ms, p99 %.1f ms)\n",
			s.ObjectsSec, s.ObjectsPerSec, s.Tokens, s.TokensSec, s.Bootstrapped, s.BootstrapSec, s.BootstrapPerSec, s.BootstrapConc, s.BootstrapP50Ms, s.BootstrapP99Ms)
	}
	c := r.Connect
	fmt.Printf("connect: %d TCP connections accepted on the machine for %d agents, %.2f per agent (%d listen queue overflows, %d drops)\n", c.TCPAccepted, r.N, float64(c.TCPAccepted)/float64(r.N), c.ListenOverflows, c.ListenDrops)
	fmt.Printf("connect: %d/%d synced in %.2f s (starts spread over %.1f s; per agent start → synced p50 %.0f ms, p99 %.0f ms, max %.0f ms); hub CPU %.1f s, bench CPU %.1f s, other CPU %.1f s; settled after %.1f s more; the hub's loops idle after %.1f s more (%d writes of theirs)\n",
		c.Synced, r.N, c.AllSyncedSec, r.RampMs/1000, c.AgentSyncP50Ms, c.AgentSyncP99Ms, c.AgentSyncMaxMs, c.HubCPUSec, c.BenchCPUSec, c.OtherCPUSec, c.SettleSec, c.LoopsIdleSec, c.LoopWrites)

	if r.Steady.WindowSec > 0 {
		r.printPhases()
	}
	r.printBudgets()
}

// printPhases prints the steady state, assignment and storm results.
func (r *report) printPhases() {
	st := r.Steady
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	if len(r.SteadyAttempts) > 1 {
		var a []string
		for _, at := range r.SteadyAttempts {
			a = append(a, fmt.Sprintf("other %.0f %% → ack p50 %.1f ms, p99 %.1f ms", at.OtherCPUPercent, at.AckP50Ms, at.AckP99Ms))
		}
		fmt.Printf("steady-state windows measured (the quietest is shown): %s\n", strings.Join(a, "; "))
	}
	fmt.Fprintln(tw, "\nsteady state\tvalue\t")
	fmt.Fprintf(tw, "window\t%.1f s, %.0f sessions, %.0f heartbeats/s\t\n", st.WindowSec, st.Sessions, st.HeartbeatsPerSec)
	fmt.Fprintf(tw, "hub RSS\t%.1f MiB at the end, %.1f MiB max (%.1f KiB per agent)\t\n", mib(st.HubRSSBytes), mib(st.HubRSSMaxBytes), st.RSSPerAgentKiB)
	fmt.Fprintf(tw, "hub Go memory\theap in use %.1f MiB (live after last GC ≈ next GC target %.1f MiB / 2), stacks %.1f MiB, runtime sys %.1f MiB; %.0f goroutines\t\n",
		st.HubHeapInuseBytes/(1<<20), st.HubMem["go_memstats_next_gc_bytes"]/(1<<20), st.HubMem["go_memstats_stack_inuse_bytes"]/(1<<20), st.HubMem["go_memstats_sys_bytes"]/(1<<20), st.HubGoroutines)
	fmt.Fprintf(tw, "hub GC\t%.0f cycles in the window, longest recent pause %.2f ms; allocated %.1f MiB/s (%.0f bytes, %.1f objects per heartbeat)\t\n",
		st.HubGCs, st.HubGCPauseMaxMs, st.HubAllocBytesPerSec/(1<<20), st.HubAllocBytesPerHeartbeat, st.HubMallocsPerHeartbeat)
	fmt.Fprintf(tw, "CPU (%% of one core)\thub %.1f %%, bench %.1f %%, other processes %.1f %% (waited %.0f s for a quiet machine)\t\n", st.HubCPUPercent, st.BenchCPUPercent, st.OtherCPUPercent, st.QuietWaitSec)
	if len(st.Timeline) > 0 {
		var p99s []string
		for _, sec := range st.Timeline {
			p99s = append(p99s, fmt.Sprintf("%.0f", sec.AckP99Ms))
		}
		fmt.Fprintf(tw, "ack p99 per second (ms)\t%s\t\n", strings.Join(p99s, " "))
		var others []string
		for _, sec := range st.Timeline {
			others = append(others, fmt.Sprintf("%.0f", sec.OtherCPUPct))
		}
		fmt.Fprintf(tw, "other processes' CPU per second (%%)\t%s\t\n", strings.Join(others, " "))
		var gcs []string
		for _, sec := range st.Timeline {
			switch {
			case sec.HubGCs > 0 && sec.BenchGCs > 0:
				gcs = append(gcs, "HB")
			case sec.HubGCs > 0:
				gcs = append(gcs, "H")
			case sec.BenchGCs > 0:
				gcs = append(gcs, "B")
			default:
				gcs = append(gcs, ".")
			}
		}
		fmt.Fprintf(tw, "collections per second (H hub, B bench)\t%s\t\n", strings.Join(gcs, " "))
	}
	fmt.Fprintf(tw, "heartbeat ack round trip\t%d acks: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\t\n", st.Acks, st.AckP50Ms, st.AckP90Ms, st.AckP99Ms, st.AckP999Ms, st.AckMaxMs)
	fmt.Fprintf(tw, "… p99 without the seconds around collections\t%.2f ms without the load generator's (%d acks), %.2f ms without either process's (%d acks)\t\n",
		st.AckP99NoBenchGCMs, st.AcksNoBenchGC, st.AckP99NoGCMs, st.AcksNoGC)
	var purposes []string
	for p, v := range st.EtcdWritesByPurp {
		purposes = append(purposes, fmt.Sprintf("%s %.2f", p, v))
	}
	slices.Sort(purposes)
	fmt.Fprintf(tw, "agent link etcd writes\t%.2f /s (%s); etcd revisions %.2f /s\t\n", st.EtcdWritesPerSec, strings.Join(purposes, ", "), st.EtcdRevisionPerSc)
	tw.Flush()

	if a := r.Assign; a.Updates > 0 {
		fmt.Printf("\nassignment: %d updates at %.0f/s, %d errors, %d received, %d missing\n", a.Updates, a.RatePerSec, a.Errors, a.Received, a.Missing)
		fmt.Printf("  Update returned → agent received: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d received before Update returned)\n",
			a.CommitToRecvP50Ms, a.CommitToRecvP90Ms, a.CommitToRecvP99Ms, a.CommitToRecvMaxMs, a.BeforeReturn)
		fmt.Printf("  Update sent → agent received:     p50 %.2f ms, p99 %.2f ms, max %.2f ms; Update call p50 %.2f ms, p99 %.2f ms\n",
			a.SentToRecvP50Ms, a.SentToRecvP99Ms, a.SentToRecvMaxMs, a.UpdateP50Ms, a.UpdateP99Ms)
		fmt.Printf("  CPU (%% of one core): hub %.1f %%, bench %.1f %%, other processes %.1f %% (waited %.0f s for a quiet machine)\n", a.HubCPUPercent, a.BenchCPUPercent, a.OtherCPUPercent, a.QuietWaitSec)
		if a.FirstError != "" {
			fmt.Printf("  first error: %s\n", a.FirstError)
		}
		for _, m := range a.MissingExamples {
			fmt.Printf("  missing: %s\n", m)
		}
	}
	if s := r.Storm; s != nil {
		tickets := ""
		if s.ForgotTLSSessions {
			tickets = ", TLS sessions forgotten"
		}
		fmt.Printf("\nreconnect storm (%s%s): hub exited %.2f s after the signal; restart → serving %.2f s (hub's log), → /readyz 200 %.2f s; restart → all resynced %.2f s (ready → all %.2f s, signal → all %.2f s)\n",
			s.Signal, tickets, s.StopSec, s.RestartLoggedSec, s.RestartToReadySec, s.RestartToAllSec, s.ReadyToAllSec, s.SignalToAllSec)
		if len(s.ReadyProbes) > 1 && s.RestartToReadySec > 1 {
			fmt.Printf("  /readyz while restarting: %s\n", strings.Join(s.ReadyProbes, "; "))
		}
		fmt.Printf("  %d/%d resynced (per agent from restart p50 %.0f ms, p99 %.0f ms), %d resumed from their versions; hub CPU %.1f s, bench CPU %.1f s, other %.1f s (waited %.0f s for a quiet machine); hub RSS after %.1f MiB\n",
			s.Resynced, r.N, s.AgentResyncP50Ms, s.AgentResyncP99Ms, s.Resumed, s.HubCPUSec, s.BenchCPUSec, s.OtherCPUSec, s.QuietWaitSec, mib(s.HubRSSBytesAfter))
		fmt.Printf("  %d TCP connections accepted on the machine for %d agents, %.2f per agent (%d listen queue overflows, %d drops)\n", s.TCPAccepted, r.N, float64(s.TCPAccepted)/float64(r.N), s.ListenOverflows, s.ListenDrops)
		if s.VerifySec > 0 {
			fmt.Printf("  nothing lost: %d/%d agents hold the latest version of their Seed and Shoot (%d mismatches)", s.VerifiedAgents, r.N, s.VerifyMismatches)
			if s.VerifyFirstProblem != "" {
				fmt.Printf("; first: %s", s.VerifyFirstProblem)
			}
			fmt.Println()
		}
	}

}

func (r *report) printBudgets() {
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "budget\tmeasured\tlimit\tverdict\t")
	for _, b := range r.Budgets {
		note := ""
		if b.Note != "" {
			note = " (" + b.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%.2f %s\t%.2f %s\t%s%s\t\n", b.What, b.Value, b.Unit, b.Limit, b.Unit, verdict(b.OK), note)
	}
	tw.Flush()
	fmt.Printf("hub log: %d warning/error lines\n", r.HubLogProblems.Count)
	for _, l := range r.HubLogProblems.First {
		fmt.Printf("  %.300s\n", l)
	}
}
