package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/test/bench/procstat"
)

// procGroup is one measured thing: a process of the landscape, or (tree) a process with its descendants.
type procGroup struct {
	name string
	pid  int
	tree bool
}

// members returns the pids of the group now.
func (g procGroup) members() []int {
	if !g.tree {
		return []int{g.pid}
	}
	return descendants(g.pid)
}

// sampler reads, every interval, the RSS of each group (summed over its members) and keeps the peak since the
// current phase began; CPU time is read at the phase's begin and end.
type sampler struct {
	interval time.Duration
	groups   func() []procGroup // the landscape's processes now (a restarted one has a new pid)

	mu    sync.Mutex
	peak  map[string]int64
	pids  map[string][]int
	phase *phaseSample
}

// phaseSample is what a phase's begin read.
type phaseSample struct {
	begin      time.Time
	cpu        map[string]time.Duration
	machineCPU time.Duration
}

func newSampler(interval time.Duration, groups func() []procGroup) *sampler {
	return &sampler{interval: interval, groups: groups, peak: map[string]int64{}, pids: map[string][]int{}}
}

// run samples RSS until ctx ends.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads the RSS of every group and raises its peak.
func (s *sampler) sample() {
	type reading struct {
		rss  int64
		pids []int
	}
	got := map[string]reading{}
	for _, g := range s.groups() {
		var r reading
		for _, pid := range g.members() {
			cur, _ := procstat.RSS(strconv.Itoa(pid))
			if cur > 0 {
				r.rss += cur
				r.pids = append(r.pids, pid)
			}
		}
		got[g.name] = r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range got {
		s.peak[name] = max(s.peak[name], r.rss)
		s.pids[name] = r.pids
	}
}

// begin starts a phase: peaks are reset and CPU times read.
func (s *sampler) begin() {
	p := &phaseSample{begin: time.Now(), cpu: groupCPU(s.groups()), machineCPU: procstat.Machine()}
	s.mu.Lock()
	s.peak = map[string]int64{}
	s.phase = p
	s.mu.Unlock()
	s.sample()
}

// end finishes the phase and returns its usage by group and what other processes took.
func (s *sampler) end() usage {
	s.sample()
	groups := s.groups()
	cpu := groupCPU(groups)
	machine := procstat.Machine()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.phase
	wall := time.Since(p.begin)
	u := usage{WallSec: wall.Seconds()}
	var ours time.Duration
	for _, g := range groups {
		d := cpu[g.name] - p.cpu[g.name]
		ours += d
		pids := slices.Clone(s.pids[g.name])
		u.Procs = append(u.Procs, procUsage{
			Name: g.name, Pids: pids, CPUSec: d.Seconds(), CPUPercent: 100 * d.Seconds() / wall.Seconds(),
			PeakRSSBytes: s.peak[g.name],
		})
	}
	u.MachineCPUSec = (machine - p.machineCPU).Seconds()
	u.OtherCPUSec = max(0, u.MachineCPUSec-ours.Seconds())
	return u
}

// groupCPU reads every group's CPU time (summed over its members).
func groupCPU(groups []procGroup) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, g := range groups {
		for _, pid := range g.members() {
			out[g.name] += procstat.CPU(strconv.Itoa(pid))
		}
	}
	return out
}

// descendants returns root and every process below it, from the parent pids in /proc/<pid>/stat.
func descendants(root int) []int {
	children := map[int][]int{}
	for _, p := range procstat.Processes() {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
