package main

import (
	"bufio"
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// taskStat is one flow task of the agents over a phase's shoots, from their debug logs ("task succeeded" lines).
type taskStat struct {
	Task     string  `json:"task"`
	Count    int     `json:"count"`
	Retried  int     `json:"retried"`  // runs that needed more than one attempt
	Attempts int     `json:"attempts"` // over all runs
	P50Ms    float64 `json:"p50Ms"`
	MaxMs    float64 `json:"maxMs"`
	TotalSec float64 `json:"totalSeconds"`
}

// taskLine matches the flow's debug line of a finished task (agent/flow, slog text format).
var taskLine = regexp.MustCompile(`^time=(\S+) level=DEBUG msg="task succeeded" .*\bshoot=\S+/(\S+) .*\btask="([^"]*)" attempts=(\d+) took=(\S+)`)

// agentTasks returns the top slowest tasks (by total time) the agents of seeds logged between from and to for the
// shoots named; nil when the agents did not log at debug level.
func agentTasks(logDir string, seeds []string, from, to time.Time, names []string, top int) []taskStat {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	byTask := map[string][]time.Duration{}
	stats := map[string]*taskStat{}
	for _, seed := range seeds {
		f, err := os.Open(filepath.Join(logDir, "agent-"+seed+".log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `msg="task succeeded"`) {
				continue
			}
			m := taskLine.FindStringSubmatch(line)
			if m == nil || !want[m[2]] {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil || at.Before(from) || at.After(to) {
				continue
			}
			took, err := time.ParseDuration(m[5])
			if err != nil {
				continue
			}
			attempts, _ := strconv.Atoi(m[4])
			s := stats[m[3]]
			if s == nil {
				s = &taskStat{Task: m[3]}
				stats[m[3]] = s
			}
			s.Count++
			s.Attempts += attempts
			if attempts > 1 {
				s.Retried++
			}
			byTask[m[3]] = append(byTask[m[3]], took)
		}
		f.Close()
	}
	var out []taskStat
	for task, s := range stats {
		d := byTask[task]
		slices.Sort(d)
		var total time.Duration
		for _, x := range d {
			total += x
		}
		s.P50Ms, s.MaxMs, s.TotalSec = ms(pct(d, 50)), ms(pct(d, 100)), total.Seconds()
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b taskStat) int { return cmp.Compare(b.TotalSec, a.TotalSec) })
	if len(out) > top {
		out = out[:top]
	}
	return out
}
