package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, time.Millisecond}, {50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := pct(d, c.p); got != c.want {
			t.Errorf("pct(1..100ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := pct(d[:1], 99); got != time.Millisecond {
		t.Errorf("pct of one = %v", got)
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("pct of none = %v", got)
	}
}

// The goal of a create notes when the shoot got its seed and when the agent's operation started, and ends at the
// first state that meets it; states of other shoots and earlier generations do not count.
func TestGoalMilestones(t *testing.T) {
	tr := newTracker(nil, namePrefix)
	t0 := time.Now()
	state := func(name string, at time.Duration, mutate func(*shootState)) *shootState {
		s := &shootState{At: t0.Add(at)}
		s.Metadata.Name, s.Metadata.Generation = name, 1
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	g := tr.expect("bench-000", succeeded(1), processing("Create"))
	if !g.newShoot {
		t.Fatal("a shoot never seen is new")
	}
	tr.apply(state("bench-000", 1*time.Millisecond, nil))
	tr.apply(state("bench-000", 2*time.Millisecond, func(s *shootState) { s.Spec.SeedName = "local" }))
	tr.apply(state("bench-001", 3*time.Millisecond, func(s *shootState) {
		s.Spec.SeedName = "local"
		s.Status.LastOperation.Type, s.Status.LastOperation.State = "Create", "Succeeded"
		s.Status.ObservedGeneration = 1
	}))
	tr.apply(state("bench-000", 4*time.Millisecond, func(s *shootState) {
		s.Spec.SeedName = "local"
		s.Status.LastOperation.Type, s.Status.LastOperation.State = "Create", "Processing"
	}))
	select {
	case <-g.done:
		t.Fatal("done before Succeeded")
	default:
	}
	tr.apply(state("bench-000", 5*time.Millisecond, func(s *shootState) {
		s.Spec.SeedName = "local"
		s.Status.LastOperation.Type, s.Status.LastOperation.State = "Create", "Succeeded"
		s.Status.ObservedGeneration = 1
	}))
	select {
	case <-g.done:
	default:
		t.Fatal("not done after Succeeded")
	}
	if g.scheduledAt != t0.Add(2*time.Millisecond) || g.startedAt != t0.Add(4*time.Millisecond) || g.at != t0.Add(5*time.Millisecond) {
		t.Errorf("milestones scheduled %v started %v done %v, want +2ms +4ms +5ms",
			g.scheduledAt.Sub(t0), g.startedAt.Sub(t0), g.at.Sub(t0))
	}

	// An update's goal is the next generation: the Succeeded state of the last one does not meet it, and a known
	// shoot is not new.
	u := tr.expect("bench-000", succeeded(2), processing("Reconcile"))
	if u.newShoot {
		t.Error("a known shoot is new")
	}
	tr.apply(state("bench-000", 6*time.Millisecond, func(s *shootState) {
		s.Spec.SeedName = "local"
		s.Metadata.Generation = 2
		s.Status.LastOperation.Type, s.Status.LastOperation.State = "Create", "Succeeded"
		s.Status.ObservedGeneration = 1
	}))
	select {
	case <-u.done:
		t.Fatal("the old generation's success met the update's goal")
	default:
	}
	if !u.scheduledAt.IsZero() {
		t.Error("an update noted a scheduling")
	}

	// A goal a state meets already is done at that state's arrival.
	d := tr.expect("bench-001", succeeded(1), nil)
	select {
	case <-d.done:
		if d.at != t0.Add(3*time.Millisecond) {
			t.Errorf("done at +%v, want +3ms", d.at.Sub(t0))
		}
	default:
		t.Error("a goal met already is not done")
	}

	// Shoots without the prefix are not tracked.
	tr.apply(state("other", 7*time.Millisecond, nil))
	if tr.state("other") != nil {
		t.Error("a shoot without the prefix is tracked")
	}
}

func TestAgentTasks(t *testing.T) {
	dir := t.TempDir()
	// Lines as trellis-agent writes them (slog text) at debug level.
	log := `time=2026-11-22T06:29:35.563Z level=DEBUG msg="task succeeded" seed=local controller=shoot shoot=garden-local/bench-000 flow=reconcile task="Deploying Shoot namespace in Seed" attempts=1 took=6ms
time=2026-11-22T06:29:37.088Z level=DEBUG msg="task succeeded" seed=local controller=shoot shoot=garden-local/bench-000 flow=reconcile task="Deploying BackupEntry" attempts=7 took=1.525s
time=2026-11-22T06:29:37.100Z level=DEBUG msg="task succeeded" seed=local controller=shoot shoot=garden-local/bench-001 flow=reconcile task="Deploying BackupEntry" attempts=1 took=500ms
time=2026-11-22T06:29:37.200Z level=DEBUG msg="task succeeded" seed=local controller=shoot shoot=garden-local/bench-solo flow=reconcile task="Deploying BackupEntry" attempts=1 took=9s
time=2026-11-22T06:39:37.200Z level=DEBUG msg="task succeeded" seed=local controller=shoot shoot=garden-local/bench-001 flow=reconcile task="Deploying BackupEntry" attempts=1 took=9s
time=2026-11-22T06:29:37.300Z level=DEBUG msg="task attempt failed; retrying" seed=local controller=shoot shoot=garden-local/bench-001 flow=reconcile task="Deploying BackupEntry" attempt=1 err="x"
`
	if err := os.WriteFile(filepath.Join(dir, "agent-local.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	from, _ := time.Parse(time.RFC3339, "2026-11-22T06:29:00Z")
	got := agentTasks(dir, []string{"local", "missing"}, from, from.Add(time.Minute), []string{"bench-000", "bench-001"}, 8)
	want := []taskStat{
		{Task: "Deploying BackupEntry", Count: 2, Retried: 1, Attempts: 8, P50Ms: 500, MaxMs: 1525, TotalSec: 2.025},
		{Task: "Deploying Shoot namespace in Seed", Count: 1, Attempts: 1, P50Ms: 6, MaxMs: 6, TotalSec: 0.006},
	}
	if !slices.Equal(got, want) {
		t.Errorf("agentTasks:\n got %+v\nwant %+v", got, want)
	}
}

func TestDescendants(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got := descendants(os.Getpid())
	if got[0] != os.Getpid() || !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("descendants of %d: %v, want it and %d", os.Getpid(), got, cmd.Process.Pid)
	}
	if got := descendants(cmd.Process.Pid); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("descendants of a leaf: %v", got)
	}
}

func TestParseRequestTotal(t *testing.T) {
	metrics := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="GET",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="extensions.gardener.cloud",resource="workers",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2.5e+01
apiserver_request_duration_seconds_count{verb="POST"} 99
apiserver_request_total_other{verb="POST"} 99
`
	if got := parseRequestTotal(metrics); got != (apiRequests{total: 40, writes: 28}) {
		t.Errorf("parseRequestTotal = %+v, want total 40 writes 28", got)
	}
}
