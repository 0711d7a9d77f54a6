package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Goals of issue 21 for a run with -peer and -loops, judged on ratios measured in the same run.
const (
	peerOpsGoal   = 10.0 // create, get, update, patch, delete: hub ops/s ÷ peer ops/s
	peerListGoal  = 30.0 // list: peer time ÷ hub time
	loopsGoal     = 0.8  // hub+loops ÷ hub, every phase
	watchP99Goal  = 3.0  // ms, the hub's watch delivery p99 (event received − PUT answer received)
	seedsForLoops = 3
)

// loopsPrerequisites are the hub's prerequisites and a few seeds for the scheduler to consider: seeds without an
// agent, never ready, so every shoot stays unschedulable.
func loopsPrerequisites() []prerequisite {
	out := prerequisites()
	for i := range seedsForLoops {
		out = append(out, prerequisite{"/apis/core.gardener.cloud/v1beta1/seeds", obj{
			"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed",
			"metadata": obj{"name": "bench-seed-" + strconv.Itoa(i)},
			"spec": obj{
				"provider": obj{"type": "aws", "region": "eu-central-1"},
				"networks": obj{"pods": "10.1.0.0/16", "services": "10.2.0.0/16", "nodes": "10.3.0.0/16"},
			},
		}})
	}
	return out
}

// profiledPhases are the phases -cpuprofile profiles.
var profiledPhases = []string{"create", "get", "update", "patch", "list", "delete"}

// profile runs fn, the phase named phase; with -cpuprofile and a hub target, a CPU profile of the hub covering the
// first -profile-seconds of a write phase or the list phase is saved as <dir>/<target>-<phase>.pprof.
func (b *bench) profile(ctx context.Context, phase string, fn func()) {
	if b.cfg.cpuprofile == "" || b.t.hub == nil || !slices.Contains(profiledPhases, phase) {
		fn()
		return
	}
	c := b.t.newClient(1000, b.cfg.seed, b.cfg.profileFor+30*time.Second)
	done := make(chan error, 1)
	path := filepath.Join(b.cfg.cpuprofile, b.t.name+"-"+phase+".pprof")
	go func() {
		p := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(b.cfg.profileFor.Seconds()))
		code, body, err := c.do(ctx, http.MethodGet, p, nil)
		if err = expect("GET", p, code, body, err, http.StatusOK); err == nil {
			err = os.WriteFile(path, body, 0o600)
		}
		done <- err
	}()
	fn()
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "%s: cpu profile of %s: %v\n", b.t.name, phase, err)
		return
	}
	fmt.Printf("  %s: cpu profile of %s written to %s\n", b.t.name, phase, path)
}

// ratioRow compares one phase across the targets: Values in the row's unit, and per other target the ratio of speeds
// (ops/s, or the inverse of a latency): hub ÷ peer for the peer, hub+loops ÷ hub for the loops.
type ratioRow struct {
	Phase  string             `json:"phase"`
	Unit   string             `json:"unit"`
	Values map[string]float64 `json:"values"`
	Ratios map[string]float64 `json:"ratios"`
	Goal   map[string]string  `json:"goal,omitempty"`
	OK     map[string]bool    `json:"ok,omitempty"`
}

func ratios(benches []*bench) []ratioRow {
	base := benches[0]
	var rows []ratioRow
	for _, p := range base.rep.Phases {
		unit, value := "ops/s", func(p *phase) float64 { return p.OpsPerSec }
		higherIsBetter := true
		switch p.Name {
		case "list-all", "list-10%", "list-all-plain", "list-10%-plain", "list-table", "list-table-500":
			unit, value, higherIsBetter = "p50 ms", func(p *phase) float64 { return p.P50Ms }, false
		case "watch":
			unit, value, higherIsBetter = "p99 ms", func(p *phase) float64 { return p.P99Ms }, false
		}
		row := ratioRow{Phase: p.Name, Unit: unit, Values: map[string]float64{base.t.name: value(p)},
			Ratios: map[string]float64{}, Goal: map[string]string{}, OK: map[string]bool{}}
		of := func(t *bench) (float64, bool) {
			if q := t.rep.phase(p.Name); q != nil {
				return value(q), true
			}
			return 0, false
		}
		for _, b := range benches[1:] {
			q := b.rep.phase(p.Name)
			if q == nil {
				continue
			}
			row.Values[b.t.name] = value(q)
			r, ok := speedRatio(benches, b, of, higherIsBetter) // 0 when not ok
			if ok {
				row.Ratios[b.t.name] = r
			}
			switch {
			case b.t.loops:
				row.Goal[b.t.name], row.OK[b.t.name] = fmt.Sprintf("≥ %.1f", loopsGoal), r >= loopsGoal
			case b.t.hub != nil:
			case slices.Contains([]string{"create", "get", "update", "patch", "delete"}, p.Name):
				row.Goal[b.t.name], row.OK[b.t.name] = fmt.Sprintf("≥ %.0f×", peerOpsGoal), r >= peerOpsGoal
			case strings.HasPrefix(p.Name, "list-"):
				row.Goal[b.t.name], row.OK[b.t.name] = fmt.Sprintf("≥ %.0f×", peerListGoal), r >= peerListGoal
			}
		}
		rows = append(rows, row)
		if p.Name == "watch" {
			rows = append(rows, deliveryRow(benches, p.Errors))
		}
		if p.Ops > 0 && p.Name != "watch" {
			rows = append(rows, cpuRow(benches, p.Name))
		}
	}
	return rows
}

// speedRatio is target b's ratio of a value (value reads it; false: the target lacks it) as a speed, so for a
// latency (higherIsBetter false) the inverse: the base target's over b's (hub ÷ peer, hub ÷ before), or for a target
// with its loops on b's over its loops-off twin's (hub+loops ÷ hub, before+loops ÷ before, the base where the twin
// lacks the value). ok is false when the base or b lacks the value or the divisor is not positive.
func speedRatio(benches []*bench, b *bench, value func(*bench) (float64, bool), higherIsBetter bool) (float64, bool) {
	ours, okOurs := value(benches[0])
	theirs, okTheirs := value(b)
	if !okOurs || !okTheirs {
		return 0, false
	}
	fast, slow := ours, theirs
	if b.t.loops {
		fast, slow = theirs, ours
		if lb := loopsBase(benches, b); lb != nil {
			if v, ok := value(lb); ok {
				slow = v
			}
		}
	}
	if !higherIsBetter {
		fast, slow = slow, fast
	}
	if slow <= 0 {
		return 0, false
	}
	return fast / slow, true
}

// deliveryRow compares the watch's delivery: the p99 of event received − PUT answer received, which leaves out the
// PUT's own latency that the watch row's sent → received includes. The PUT commits before it is answered, so
// delivery from the commit is this plus the answer's way back to the client; the watch row bounds it from above.
// The delivery goal applies here. Values at or below zero (the event came before the answer) count as 0.01 ms in
// the ratios.
func deliveryRow(benches []*bench, errors int) ratioRow {
	base := benches[0]
	value := func(b *bench) float64 { return b.rep.Watch.AfterAckP99Ms }
	positive := func(b *bench) (float64, bool) { return max(value(b), 0.01), b.rep.Watch.LiveEvents > 0 }
	row := ratioRow{Phase: "watch", Unit: "p99 ms after answer", Values: map[string]float64{base.t.name: value(base)},
		Ratios: map[string]float64{}, Goal: map[string]string{}, OK: map[string]bool{}}
	for _, b := range benches[1:] {
		row.Values[b.t.name] = value(b)
		r, ok := speedRatio(benches, b, positive, false)
		if !ok {
			continue
		}
		row.Ratios[b.t.name] = r
		if b.t.loops {
			row.Goal[b.t.name], row.OK[b.t.name] = fmt.Sprintf("≥ %.1f", loopsGoal), r >= loopsGoal
		}
	}
	row.Goal[base.t.name], row.OK[base.t.name] = fmt.Sprintf("≤ %.0f ms", watchP99Goal),
		base.rep.Watch.LiveEvents > 0 && value(base) <= watchP99Goal && errors == 0
	return row
}

// cpuRow compares the CPU time the servers spent per operation of a phase: less sensitive to the machine's other
// load than the rates. The ratio is the base target's efficiency over the other's (the other's CPU per operation ÷
// the hub's), for the loops the inverse.
func cpuRow(benches []*bench, name string) ratioRow {
	perOp := func(b *bench) float64 {
		if p := b.rep.phase(name); p != nil && p.Ops > 0 {
			return p.HubCPUSec * 1000 / float64(p.Ops)
		}
		return 0
	}
	base := benches[0]
	row := ratioRow{Phase: name, Unit: "CPU ms/op", Values: map[string]float64{base.t.name: perOp(base)}, Ratios: map[string]float64{}}
	for _, b := range benches[1:] {
		v := perOp(b)
		row.Values[b.t.name] = v
		num, den := v, row.Values[base.t.name]
		if b.t.loops {
			num, den = row.Values[base.t.name], v
			if lb := loopsBase(benches, b); lb != nil {
				num = perOp(lb)
			}
		}
		if den > 0 {
			row.Ratios[b.t.name] = num / den
		}
	}
	return row
}

func printRatios(rows []ratioRow) {
	if len(rows) == 0 {
		return
	}
	var names []string
	for n := range rows[0].Values {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return targetOrder(a) - targetOrder(b) })
	fmt.Println("\nratios in this run (speed: ops/s, or 1/latency; CPU: the servers' CPU time per operation, efficiency ratio;\n" +
		"hub ÷ kube-apiserver, hub ÷ before, X+loops ÷ X):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "phase\tunit\t"
	for _, n := range names {
		head += n + "\t"
	}
	for _, n := range names[1:] {
		head += "vs " + n + "\tgoal\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		line := r.Phase + "\t" + r.Unit + "\t"
		for _, n := range names {
			line += fmt.Sprintf("%.2f\t", r.Values[n])
		}
		for _, n := range names[1:] {
			g := ""
			if goal, ok := r.Goal[n]; ok {
				g = goal + " " + verdict(r.OK[n])
			}
			line += fmt.Sprintf("%.2f\t%s\t", r.Ratios[n], g)
		}
		if goal, ok := r.Goal[names[0]]; ok {
			line += "hub " + goal + " " + verdict(r.OK[names[0]]) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func targetOrder(name string) int {
	switch name {
	case "hub":
		return 0
	case "hub+loops":
		return 1
	case "kube-apiserver":
		return 2
	case "before":
		return 3
	}
	return 4
}

// loopsBase is the target with its loops off of the same build as b ("before" for "before+loops"), nil for "hub".
func loopsBase(benches []*bench, b *bench) *bench {
	name := strings.TrimSuffix(b.t.name, "+loops")
	if name == "hub" {
		return nil
	}
	for _, o := range benches {
		if o.t.name == name {
			return o
		}
	}
	return nil
}

// phase returns the report's phase named name, nil if none.
func (r *report) phase(name string) *phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return nil
}
