// Package procstat reads what the load generators in test/bench report about processes and the machine from Linux's
// /proc: a process's resident memory and CPU time, and the machine's busy CPU time (to tell what other processes took
// while a phase ran).
package procstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// RSS returns VmRSS and VmHWM (the peak) of a process ("self" or a pid) in bytes; -1 when unknown.
func RSS(pid string) (cur, peak int64) {
	cur, peak = -1, -1
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return
}

// CPU returns a process's user+system CPU time so far ("self" or a pid), from /proc/<pid>/stat (USER_HZ is 100).
func CPU(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; the fields after it start after the last ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Machine returns the busy CPU time of the whole machine so far (all but idle and iowait), from /proc/stat.
func Machine() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is already in user
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// Process is a process as /proc/<pid>/stat describes it.
type Process struct {
	PID, PPID int
	// Comm is the command name (at most 15 bytes).
	Comm string
}

// Processes lists the machine's processes; nil when /proc cannot be read.
func Processes() []Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; the command name may hold spaces and parentheses.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, Process{PID: pid, PPID: ppid, Comm: s[open+1 : end]})
	}
	return out
}
