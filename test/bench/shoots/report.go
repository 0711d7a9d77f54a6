package main

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// createBudget is DESIGN.md's "shoot create → Succeeded with provider-local" (Budgets, 2 cores, loopback).
const createBudget = 10 * time.Second

// report is the JSON of a run.
type report struct {
	N        int    `json:"n"`
	Seeds    int    `json:"seeds"`
	Parallel int    `json:"parallel"` // API calls in flight per phase
	Started  string `json:"started"`
	// Machine and build.
	GoVersion  string  `json:"goVersion"`
	CPUs       int     `json:"cpus"`
	BinDir     string  `json:"binDir"`
	Source     string  `json:"source,omitempty"` // the commit the binaries were built from
	TestBinDir string  `json:"testBinDir"`
	BuildSec   float64 `json:"buildSeconds,omitempty"`
	// The landscape's settings that bound the throughput.
	ConcurrentSyncs           int     `json:"concurrentSyncs"`           // per agent
	ProviderWorkers           int     `json:"providerWorkers,omitempty"` // 0: provider-local's default
	ExtensionErrorThresholdMs float64 `json:"extensionErrorThresholdMs"`
	SampleMs                  float64 `json:"sampleMs"`

	LandscapeStartSec float64 `json:"landscapeStartSeconds"`
	// SettleSec is the time after the landscape was ready until every Seed had ExtensionsReady (the agent's
	// controllers run); the phases start after it.
	SettleSec float64        `json:"settleSeconds"`
	Idle      *usage         `json:"idle,omitempty"`
	Phases    []*phaseReport `json:"phases"`
	// Placement counts the shoots by seed after the last create phase.
	Placement   map[string]int        `json:"placement"`
	Watch       watchStats            `json:"watch"`
	LogProblems map[string]logProblem `json:"logProblems,omitempty"`
	Budgets     []budget              `json:"budgets"`
	// Failed is set when a shoot did not get where a phase wanted it.
	Failed bool `json:"failed"`
}

// phaseReport is one phase: per-shoot latencies (operation sent → its goal seen on the watch), the time from the
// phase's start until the last shoot got there, the API calls' own latencies, and the processes' usage.
type phaseReport struct {
	Name       string  `json:"name"`
	Shoots     int     `json:"shoots"`
	Done       int     `json:"done"`
	CallErrors int     `json:"callErrors"`
	MinMs      float64 `json:"minMs"`
	P50Ms      float64 `json:"p50Ms"`
	P90Ms      float64 `json:"p90Ms"`
	P99Ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
	TotalSec   float64 `json:"totalSeconds"` // phase start → the last shoot there
	CallP50Ms  float64 `json:"callP50Ms"`    // the phase's API calls per shoot (POST; PATCH; PATCH + DELETE)
	CallMaxMs  float64 `json:"callMaxMs"`
	// Where the time went, from the watch: sent → the shoot had a seed (create only), sent → the agent's operation
	// was Processing, Processing → the goal; StartedSeen counts the shoots whose Processing state was seen.
	ScheduledP50Ms float64 `json:"scheduledP50Ms,omitempty"`
	ScheduledMaxMs float64 `json:"scheduledMaxMs,omitempty"`
	StartedP50Ms   float64 `json:"startedP50Ms"`
	StartedMaxMs   float64 `json:"startedMaxMs"`
	FlowP50Ms      float64 `json:"flowP50Ms"`
	FlowMaxMs      float64 `json:"flowMaxMs"`
	StartedSeen    int     `json:"startedSeen"`
	// SeedRequests and SeedWrites are the requests the seeds' kube-apiservers served in the phase (all clients:
	// agent, provider-local, kube-controller-manager; apiserver_request_total).
	SeedRequests       float64 `json:"seedRequests"`
	SeedWrites         float64 `json:"seedWrites"`
	SeedRequestsPerSec float64 `json:"seedRequestsPerSecond"`
	Usage              usage   `json:"usage"`
	// Tasks are the agents' slowest flow tasks of the phase (with -agent-log-level debug).
	Tasks    []taskStat `json:"tasks,omitempty"`
	Note     string     `json:"note,omitempty"`
	Failures []string   `json:"failures,omitempty"`
}

// usage is what the processes used in a phase: CPU seconds in it and the peak of the RSS samples.
type usage struct {
	WallSec       float64     `json:"wallSeconds"`
	Procs         []procUsage `json:"procs"`
	MachineCPUSec float64     `json:"machineCPUSeconds"` // busy CPU of the whole machine
	OtherCPUSec   float64     `json:"otherCPUSeconds"`   // of that, what neither the landscape nor the benchmark took
}

// procUsage is one process (or, for a seed, process tree) in a phase.
type procUsage struct {
	Name         string  `json:"name"`
	Pids         []int   `json:"pids"`
	CPUSec       float64 `json:"cpuSeconds"`
	CPUPercent   float64 `json:"cpuPercent"` // of one core, over the phase
	PeakRSSBytes int64   `json:"peakRSSBytes,omitempty"`
}

type budget struct {
	What   string  `json:"what"`
	Budget string  `json:"budget"`
	Value  float64 `json:"valueMs"`
	OK     bool    `json:"ok"`
	Note   string  `json:"note,omitempty"`
}

type logProblem struct {
	Count int      `json:"count"` // level=WARN and level=ERROR lines
	First []string `json:"first,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile of sorted (nearest rank); 0 of an empty slice.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (r *report) phase(name string) *phaseReport {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// budgets checks DESIGN.md's create budget: for one shoot alone, and for every shoot of the batch.
func (r *report) budgets() {
	r.Budgets = nil
	if p := r.phase("solo create"); p != nil && p.Done == p.Shoots {
		r.Budgets = append(r.Budgets, budget{What: "shoot create → Succeeded, one shoot alone", Budget: "< 10 s",
			Value: p.MaxMs, OK: p.MaxMs < ms(createBudget)})
	}
	if p := r.phase("create"); p != nil {
		r.Budgets = append(r.Budgets, budget{What: fmt.Sprintf("shoot create → Succeeded, max of %d created at once", p.Shoots),
			Budget: "< 10 s", Value: p.MaxMs, OK: p.Done == p.Shoots && p.MaxMs < ms(createBudget),
			Note: fmt.Sprintf("%d seed(s), %d shoot reconciles at a time per agent", r.Seeds, r.ConcurrentSyncs)})
	}
}

func secs(msv float64) string { return fmt.Sprintf("%.2fs", msv/1000) }

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

// print writes the tables.
// Print checks the budgets and prints the report.
func (r *report) Print() {
	r.budgets()
	r.print()
}

func (r *report) print() {
	fmt.Printf("\nbench-shoots: %d shoots, %d seed(s), %d API calls at a time, %d shoot reconciles at a time per agent; %s, %d CPUs\n",
		r.N, r.Seeds, r.Parallel, r.ConcurrentSyncs, r.GoVersion, r.CPUs)
	if r.Source != "" {
		fmt.Printf("binaries built from %s\n", r.Source)
	}
	fmt.Printf("landscape up in %.1fs, seeds settled %.1fs later; shoots per seed %v; watch: %d events, %d reconnects, %d lists\n\n",
		r.LandscapeStartSec, r.SettleSec, r.Placement, r.Watch.Events, r.Watch.Reconnects, r.Watch.Lists)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tshoots\tdone\tp50\tp90\tp99\tmax\tall done\tAPI call p50\tmax\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.2fs\t%.0fms\t%.0fms\t\n", p.Name, p.Shoots, p.Done,
			secs(p.P50Ms), secs(p.P90Ms), secs(p.P99Ms), secs(p.MaxMs), p.TotalSec, p.CallP50Ms, p.CallMaxMs)
	}
	tw.Flush()
	fmt.Println("  (latency per shoot: create POST / update PATCH / delete annotation sent → Succeeded at the new generation / DELETED, seen on the watch)")

	fmt.Println("\nwhere the time went (p50 / max): sent → seed assigned, sent → agent's operation Processing, Processing → done;")
	fmt.Println("requests the seeds' kube-apiservers served in the phase (writes), per shoot and per second")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tscheduled\tstarted\tflow\tseen\tseed requests\tper shoot\tper second\t")
	for _, p := range r.Phases {
		sched := "-"
		if p.ScheduledMaxMs > 0 {
			sched = secs(p.ScheduledP50Ms) + " / " + secs(p.ScheduledMaxMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s / %s\t%s / %s\t%d\t%.0f (%.0f)\t%.1f\t%.1f\t\n", p.Name, sched, secs(p.StartedP50Ms), secs(p.StartedMaxMs),
			secs(p.FlowP50Ms), secs(p.FlowMaxMs), p.StartedSeen, p.SeedRequests, p.SeedWrites, p.SeedRequests/float64(max(p.Shoots, 1)), p.SeedRequestsPerSec)
	}
	tw.Flush()

	// Usage: CPU seconds (% of one core) and peak RSS per process and phase.
	type row struct {
		name string
		u    usage
	}
	var names []string
	var rows []row
	if r.Idle != nil {
		rows = append(rows, row{"idle", *r.Idle})
	}
	for _, p := range r.Phases {
		rows = append(rows, row{p.Name, p.Usage})
	}
	for _, row := range rows {
		for _, pu := range row.u.Procs {
			if !slices.Contains(names, pu.Name) {
				names = append(names, pu.Name)
			}
		}
	}
	if len(rows) > 0 {
		fmt.Printf("\nCPU seconds in the phase (%% of one core) / peak RSS MiB (sampled every %s)\n", time.Duration(r.SampleMs*float64(time.Millisecond)))
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "phase\twall\t")
		for _, n := range names {
			fmt.Fprintf(tw, "%s\t", n)
		}
		fmt.Fprintln(tw, "others\t")
		for _, row := range rows {
			fmt.Fprintf(tw, "%s\t%.1fs\t", row.name, row.u.WallSec)
			for _, n := range names {
				i := slices.IndexFunc(row.u.Procs, func(p procUsage) bool { return p.Name == n })
				if i < 0 {
					fmt.Fprint(tw, "-\t")
					continue
				}
				pu := row.u.Procs[i]
				fmt.Fprintf(tw, "%.2f (%.0f%%) / %s\t", pu.CPUSec, pu.CPUPercent, mib(pu.PeakRSSBytes))
			}
			fmt.Fprintf(tw, "%.2f (%.0f%%)\t\n", row.u.OtherCPUSec, 100*row.u.OtherCPUSec/max(row.u.WallSec, 1e-9))
		}
		tw.Flush()
		fmt.Println("  (seed-* is localseed with its etcd, kube-apiserver and kube-controller-manager; others: the rest of the machine)")
	}

	var withTasks bool
	for _, p := range r.Phases {
		withTasks = withTasks || len(p.Tasks) > 0
	}
	if withTasks {
		fmt.Println("\nthe agents' slowest flow tasks per phase (by total time; from their debug logs)")
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\ttask\truns\tretried\tp50\tmax\ttotal\t")
		for _, p := range r.Phases {
			for i, t := range p.Tasks {
				if i == 5 {
					break
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%.1fs\t\n", p.Name, t.Task, t.Count, t.Retried, secs(t.P50Ms), secs(t.MaxMs), t.TotalSec)
			}
		}
		tw.Flush()
	}

	for _, p := range r.Phases {
		if p.Note != "" || len(p.Failures) > 0 {
			fmt.Printf("\n%s: %s\n", p.Name, p.Note)
			for _, f := range p.Failures {
				fmt.Printf("  %s\n", f)
			}
		}
	}
	if len(r.LogProblems) > 0 {
		fmt.Println("\nwarnings and errors in the logs:")
		for _, f := range slices.Sorted(maps.Keys(r.LogProblems)) {
			lp := r.LogProblems[f]
			fmt.Printf("  %s: %d\n", f, lp.Count)
			for _, line := range lp.First {
				fmt.Printf("    %.300s\n", line)
			}
		}
	}
	if len(r.Budgets) > 0 {
		fmt.Println()
		for _, b := range r.Budgets {
			v := "ok"
			if !b.OK {
				v = "OVER"
			}
			note := ""
			if b.Note != "" {
				note = " (" + b.Note + ")"
			}
			fmt.Printf("budget %s %s: %s — %s%s\n", b.What, b.Budget, secs(b.Value), v, note)
		}
	}
}

// logProblems counts the warning and error lines of every log in dir and keeps the first few of each.
func logProblems(dir string, keep int) map[string]logProblem {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	out := map[string]logProblem{}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		var lp logProblem
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
				lp.Count++
				if len(lp.First) < keep {
					lp.First = append(lp.First, line)
				}
			}
		}
		f.Close()
		if lp.Count > 0 {
			out[filepath.Base(path)] = lp
		}
	}
	return out
}
