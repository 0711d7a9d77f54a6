package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/test/landscape"
)

// namePrefix starts the name of every shoot of the benchmark; the tracker follows only these.
const namePrefix = "bench-"

// pauseBetweenPhases lets the work a phase started (status updates, health checks) finish before the next phase's
// measurement begins; it is not measured.
const pauseBetweenPhases = 2 * time.Second

// bench runs the phases against a running landscape.
type bench struct {
	cfg     benchConfig
	l       *landscape.Landscape
	rep     *report
	c       *hubClient
	tr      *tracker
	smp     *sampler
	seeds   []string
	shoot   map[string]any // the example shoot, decoded
	workers []any          // its spec.provider.workers

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newBench connects to the hub, applies the example resources but the shoot, and starts the watch and the sampler.
func newBench(ctx context.Context, cfg benchConfig, l *landscape.Landscape, rep *report) (*bench, error) {
	c, err := newHubClient(l.HubURL, l.CAFile, l.Token)
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, l: l, rep: rep, c: c, seeds: seedNames(cfg.seeds)}
	examples, err := landscape.Examples()
	if err != nil {
		return nil, err
	}
	for _, e := range examples {
		if e.Kind.Kind == "Shoot" {
			if err := json.Unmarshal(e.JSON, &b.shoot); err != nil {
				return nil, fmt.Errorf("example shoot %s: %w", e.File, err)
			}
			continue
		}
		if _, err := c.must(ctx, http.MethodPost, e.Path(), e.JSON, http.StatusCreated, http.StatusConflict); err != nil {
			return nil, fmt.Errorf("example %s: %w", e.File, err)
		}
	}
	spec, _ := b.shoot["spec"].(map[string]any)
	provider, _ := spec["provider"].(map[string]any)
	b.workers, _ = provider["workers"].([]any)
	if b.shoot == nil || len(b.workers) == 0 {
		return nil, errors.New("the examples hold no shoot with workers")
	}

	bctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.tr = newTracker(c, namePrefix)
	b.smp = newSampler(cfg.sample, b.groups)
	b.wg.Add(2)
	go func() { defer b.wg.Done(); b.tr.run(bctx) }()
	go func() { defer b.wg.Done(); b.smp.run(bctx) }()
	select {
	case <-b.tr.synced:
	case <-time.After(30 * time.Second):
		b.close()
		return nil, fmt.Errorf("no list of the shoots within 30s: %s", b.tr.statsCopy().LastError)
	case <-ctx.Done():
		b.close()
		return nil, ctx.Err()
	}
	return b, nil
}

// close stops the watch and the sampler.
func (b *bench) close() {
	b.cancel()
	b.wg.Wait()
}

// groups are the measured processes: the hub, per seed its agent, its provider-local and the seed itself (localseed
// with etcd, kube-apiserver and kube-controller-manager), and this process.
func (b *bench) groups() []procGroup {
	pids := b.l.Pids()
	var out []procGroup
	add := func(name string, tree bool) {
		if pid, ok := pids[name]; ok {
			out = append(out, procGroup{name: name, pid: pid, tree: tree})
		}
	}
	add("hub", false)
	for _, s := range b.seeds {
		add("agent-"+s, false)
		add("provider-local-"+s, false)
		add("seed-"+s, true)
	}
	return append(out, procGroup{name: "bench", pid: os.Getpid()})
}

// settledCondition is the Seed condition the agent's seed care controller sets once the agent's controllers run:
// the landscape is ready before that (a seed is ready when its agent has a session and its provider-local renews its
// heartbeat), and a shoot created in between waits for the shoot controller.
const settledCondition = "ExtensionsReady"

// waitSettled waits until every seed has settledCondition True on the hub; after limit it goes on with a warning.
func (b *bench) waitSettled(ctx context.Context, limit time.Duration) error {
	begin := time.Now()
	for _, seed := range b.seeds {
		for {
			ok, err := b.seedCondition(ctx, seed, settledCondition)
			if ok {
				break
			}
			if time.Since(begin) > limit {
				logf("warning: seed %s has no %s=True after %s (%v); going on", seed, settledCondition, limit, err)
				break
			}
			if err := b.sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	b.rep.SettleSec = time.Since(begin).Seconds()
	logf("seeds settled (%s=True) after %s more", settledCondition, time.Since(begin).Round(10*time.Millisecond))
	return nil
}

// seedCondition reports whether the Seed's condition typ is True on the hub.
func (b *bench) seedCondition(ctx context.Context, seed, typ string) (bool, error) {
	body, err := b.c.must(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/"+seed, nil, http.StatusOK)
	if err != nil {
		return false, err
	}
	var s struct {
		Status struct {
			Conditions []struct {
				Type, Status string
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return false, err
	}
	for _, c := range s.Status.Conditions {
		if c.Type == typ {
			return c.Status == "True", nil
		}
	}
	return false, nil
}

// run runs the phases; the report holds what was measured even when it returns an error.
func (b *bench) run(ctx context.Context) error {
	defer func() { b.rep.Watch = b.tr.statsCopy() }()
	if err := b.waitSettled(ctx, 2*time.Minute); err != nil {
		return err
	}
	if b.cfg.idle > 0 {
		logf("idle: measuring the landscape at rest for %s", b.cfg.idle)
		b.smp.begin()
		if err := b.sleep(ctx, b.cfg.idle); err != nil {
			return err
		}
		u := b.smp.end()
		b.rep.Idle = &u
	}
	if b.cfg.solo {
		if err := b.lifecycle(ctx, "solo ", []string{namePrefix + "solo"}); err != nil {
			return err
		}
	}
	names := make([]string, b.cfg.n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", namePrefix, i)
	}
	return b.lifecycle(ctx, "", names)
}

// lifecycle runs create, update and delete of the shoots named; update takes the created ones, delete every one
// whose POST was accepted.
func (b *bench) lifecycle(ctx context.Context, label string, names []string) error {
	created, err := b.phase(ctx, label+"create", names, b.create)
	if err != nil {
		return err
	}
	b.rep.Placement = b.tr.placement()
	if err := b.sleep(ctx, pauseBetweenPhases); err != nil {
		return err
	}
	var ok []string
	for _, r := range created.results {
		if r.done {
			ok = append(ok, r.name)
		}
	}
	if len(ok) > 0 {
		if _, err := b.phase(ctx, label+"update", ok, b.update); err != nil {
			return err
		}
		if err := b.sleep(ctx, pauseBetweenPhases); err != nil {
			return err
		}
	}
	var exist []string
	for _, r := range created.results {
		if r.err == nil {
			exist = append(exist, r.name)
		}
	}
	if len(exist) > 0 {
		if _, err := b.phase(ctx, label+"delete", exist, b.delete); err != nil {
			return err
		}
		if err := b.sleep(ctx, pauseBetweenPhases); err != nil {
			return err
		}
	}
	return nil
}

// action starts a shoot's operation: it returns the goal that ends it, when it was sent, and how long its API
// calls took.
type action func(ctx context.Context, name string) (g *goal, sent time.Time, calls time.Duration, err error)

// shootResult is one shoot's outcome in a phase.
type shootResult struct {
	name    string
	g       *goal
	sent    time.Time
	calls   time.Duration
	done    bool
	latency time.Duration
	at      time.Time
	err     error
}

// phaseRun is a finished phase.
type phaseRun struct {
	results []*shootResult
}

// phase runs act for every shoot, -parallel at a time, and waits until every goal is met or -phase-timeout has
// passed. It adds the phase to the report; an error means the run cannot go on (a landscape process died, ctx
// ended).
func (b *bench) phase(ctx context.Context, name string, names []string, act action) (*phaseRun, error) {
	logf("%s: %d shoot(s), %d at a time", name, len(names), min(b.cfg.parallel, len(names)))
	run := &phaseRun{results: make([]*shootResult, len(names))}
	goals := make([]*goal, len(names))
	reqBefore, reqOK := seedRequests(ctx, b.l, b.seeds)
	b.smp.begin()
	begin := time.Now()
	deadline := begin.Add(b.cfg.phaseTimeout)
	sem := make(chan struct{}, b.cfg.parallel)
	var wg sync.WaitGroup
	for i, n := range names {
		run.results[i] = &shootResult{name: n}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := run.results[i]
			goals[i], r.sent, r.calls, r.err = act(ctx, n)
		})
	}
	wg.Wait()

	var werr error
	for i, r := range run.results {
		if r.err != nil {
			continue
		}
		if werr = b.wait(ctx, goals[i].done, deadline); werr != nil {
			break
		}
		r.g, r.done, r.at, r.latency = goals[i], true, goals[i].at, goals[i].at.Sub(r.sent)
	}
	var timedOut bool
	if errors.Is(werr, errPhaseTimeout) {
		timedOut, werr = true, nil
		// What got there in the meantime counts.
		for i, r := range run.results {
			if r.err != nil || r.done {
				continue
			}
			select {
			case <-goals[i].done:
				r.g, r.done, r.at, r.latency = goals[i], true, goals[i].at, goals[i].at.Sub(r.sent)
			default:
			}
		}
	}
	u := b.smp.end()
	p := b.summarize(name, begin, run, u)
	if reqAfter, ok := seedRequests(ctx, b.l, b.seeds); ok && reqOK {
		d := reqAfter.sub(reqBefore)
		p.SeedRequests, p.SeedWrites = d.total, d.writes
		p.SeedRequestsPerSec = d.total / u.WallSec
	}
	p.Tasks = agentTasks(b.l.LogDir, b.seeds, begin, time.Now(), names, 8)
	if timedOut {
		p.Note = fmt.Sprintf("%d shoot(s) not there within %s", p.Shoots-p.Done, b.cfg.phaseTimeout)
	}
	if werr != nil {
		p.Note = fmt.Sprintf("stopped early: %v", werr)
	}
	if name == "delete" || name == "solo delete" {
		b.verifyGone(ctx, run, p)
	}
	b.rep.Phases = append(b.rep.Phases, p)
	logf("%s: %d/%d in %.1fs, p50 %.2fs p99 %.2fs max %.2fs", name, p.Done, p.Shoots, p.TotalSec, p.P50Ms/1000, p.P99Ms/1000, p.MaxMs/1000)
	if p.Done < p.Shoots {
		b.rep.Failed = true
	}
	return run, werr
}

var errPhaseTimeout = errors.New("phase timeout")

// wait waits for done, failing on the deadline, when ctx ends, or when a landscape process exited.
func (b *bench) wait(ctx context.Context, done <-chan struct{}, deadline time.Time) error {
	select {
	case <-done:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return errPhaseTimeout
	case <-ctx.Done():
		return ctx.Err()
	case err := <-b.l.Failures():
		return err
	}
}

// sleep waits d, failing when ctx ends or a landscape process exited.
func (b *bench) sleep(ctx context.Context, d time.Duration) error {
	err := b.wait(ctx, nil, time.Now().Add(d))
	if errors.Is(err, errPhaseTimeout) {
		return nil
	}
	return err
}

// verifyGone checks that every shoot the watch saw deleted is gone for a GET too (404).
func (b *bench) verifyGone(ctx context.Context, run *phaseRun, p *phaseReport) {
	for _, r := range run.results {
		if !r.done {
			continue
		}
		code, body, err := b.c.do(ctx, http.MethodGet, shootsPath+"/"+r.name, nil)
		if err == nil && code == http.StatusNotFound {
			continue
		}
		r.done = false
		p.Done--
		b.rep.Failed = true
		if err == nil {
			err = fmt.Errorf("GET answered %d after the DELETED event: %.200s", code, body)
		}
		p.Failures = append(p.Failures, fmt.Sprintf("%s: %v", r.name, err))
	}
}

// create POSTs the example shoot under name, with its own DNS domain; the goal is Succeeded at generation 1.
func (b *bench) create(ctx context.Context, name string) (*goal, time.Time, time.Duration, error) {
	body, err := b.shootJSON(name)
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	g := b.tr.expect(name, succeeded(1), processing("Create"))
	sent := time.Now()
	_, err = b.c.must(ctx, http.MethodPost, shootsPath, body, http.StatusCreated)
	return g, sent, time.Since(sent), err
}

// update raises the maximum of every worker pool by one; the goal is Succeeded at the generation the PATCH made.
func (b *bench) update(ctx context.Context, name string) (*goal, time.Time, time.Duration, error) {
	cur := b.tr.state(name)
	if cur == nil {
		return nil, time.Time{}, 0, fmt.Errorf("%s: never seen", name)
	}
	var workers []any
	for _, w := range b.workers {
		w := cloneMap(w.(map[string]any))
		m, _ := w["maximum"].(float64)
		w["maximum"] = m + 1
		workers = append(workers, w)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"provider": map[string]any{"workers": workers}}})
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	// The PATCH makes the next generation: nothing else changes the shoots' specs.
	want := cur.Metadata.Generation + 1
	g := b.tr.expect(name, succeeded(want), processing("Reconcile"))
	sent := time.Now()
	out, err := b.c.must(ctx, http.MethodPatch, shootsPath+"/"+name, patch, http.StatusOK)
	calls := time.Since(sent)
	if err != nil {
		return nil, sent, calls, err
	}
	var o shootObject
	if err := json.Unmarshal(out, &o); err != nil {
		return nil, sent, calls, fmt.Errorf("PATCH %s: %w", name, err)
	}
	if o.Metadata.Generation != want {
		return nil, sent, calls, fmt.Errorf("PATCH %s: generation %d, want %d", name, o.Metadata.Generation, want)
	}
	return g, sent, calls, nil
}

// delete confirms the deletion with the annotation and DELETEs the shoot; the goal is the DELETED event.
func (b *bench) delete(ctx context.Context, name string) (*goal, time.Time, time.Duration, error) {
	patch := []byte(`{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`)
	sent := time.Now()
	if _, err := b.c.must(ctx, http.MethodPatch, shootsPath+"/"+name, patch, http.StatusOK); err != nil {
		return nil, sent, time.Since(sent), err
	}
	g := b.tr.expect(name, deleted, processing("Delete"))
	_, err := b.c.must(ctx, http.MethodDelete, shootsPath+"/"+name, nil, http.StatusOK, http.StatusAccepted)
	return g, sent, time.Since(sent), err
}

// shootJSON is the example shoot named name, with the DNS domain <name>.local.local.trellis.dev (an external DNS
// record, as in test/e2e); the hub's scheduler picks the seed.
func (b *bench) shootJSON(name string) ([]byte, error) {
	s := cloneMap(b.shoot)
	md := cloneMap(s["metadata"].(map[string]any))
	md["name"] = name
	s["metadata"] = md
	spec := cloneMap(s["spec"].(map[string]any))
	spec["dns"] = map[string]any{"domain": name + ".local.local.trellis.dev"}
	s["spec"] = spec
	return json.Marshal(s)
}

// cloneMap copies the top level of m.
func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// summarize turns a phase's results into its report.
func (b *bench) summarize(name string, begin time.Time, run *phaseRun, u usage) *phaseReport {
	p := &phaseReport{Name: name, Shoots: len(run.results), Usage: u}
	var lat, calls, sched, start, flow []time.Duration
	var last time.Time
	for _, r := range run.results {
		if r.err != nil {
			p.CallErrors++
			p.Failures = append(p.Failures, fmt.Sprintf("%s: %v", r.name, r.err))
			continue
		}
		calls = append(calls, r.calls)
		if !r.done {
			p.Failures = append(p.Failures, fmt.Sprintf("%s: not there; last seen: %s", r.name, b.tr.state(r.name)))
			continue
		}
		p.Done++
		lat = append(lat, r.latency)
		if t := r.g.scheduledAt; t.After(r.sent) {
			sched = append(sched, t.Sub(r.sent))
		}
		if t := r.g.startedAt; !t.IsZero() {
			start = append(start, t.Sub(r.sent))
			flow = append(flow, r.at.Sub(t))
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	for _, l := range [][]time.Duration{lat, calls, sched, start, flow} {
		slices.Sort(l)
	}
	p.ScheduledP50Ms, p.ScheduledMaxMs = ms(pct(sched, 50)), ms(pct(sched, 100))
	p.StartedP50Ms, p.StartedMaxMs = ms(pct(start, 50)), ms(pct(start, 100))
	p.FlowP50Ms, p.FlowMaxMs = ms(pct(flow, 50)), ms(pct(flow, 100))
	p.StartedSeen = len(start)
	p.MinMs, p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs = ms(pct(lat, 0)), ms(pct(lat, 50)), ms(pct(lat, 90)), ms(pct(lat, 99)), ms(pct(lat, 100))
	p.CallP50Ms, p.CallMaxMs = ms(pct(calls, 50)), ms(pct(calls, 100))
	if !last.IsZero() {
		p.TotalSec = last.Sub(begin).Seconds()
	}
	if len(p.Failures) > 10 {
		p.Failures = append(p.Failures[:10], fmt.Sprintf("… and %d more", len(p.Failures)-10))
	}
	return p
}
