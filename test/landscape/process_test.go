package landscape

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newShell(t *testing.T, script string, exited func(string, error)) *process {
	t.Helper()
	dir := t.TempDir()
	p := &process{name: "sh", path: "/bin/sh", args: []string{"-c", script}, dir: dir, logPath: filepath.Join(dir, "sh.log"), exited: exited}
	t.Cleanup(func() { _ = p.kill() })
	return p
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestProcessStopEscalates: a child that ignores SIGTERM is killed after the timeout, and the stop says so; a stop
// on purpose is not reported as an unexpected exit.
func TestProcessStopEscalates(t *testing.T) {
	unexpected := make(chan string, 1)
	p := newShell(t, `trap "" TERM; echo up-$((40+2)); while :; do sleep 0.05; done`, func(n string, _ error) { unexpected <- n })
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.start(); err == nil {
		t.Error("second start of a running process: no error")
	}
	waitLog(t, p, "up-42")
	pid := p.pid()
	begin := time.Now()
	err := p.stop(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("stop of a process ignoring SIGTERM: %v", err)
	}
	if d := time.Since(begin); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("stop took %s", d)
	}
	if p.running() || alive(pid) {
		t.Error("still running after stop")
	}
	select {
	case n := <-unexpected:
		t.Errorf("a stop on purpose was reported as an exit of %s", n)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestProcessRestartAndLog: each run appends to the log after a header; logSinceStart sees only the current run; a
// run that ends on its own is reported with the end of its log.
func TestProcessRestartAndLog(t *testing.T) {
	reports := make(chan error, 4)
	p := newShell(t, `echo run-$((40+2))-$$; sleep 30`, func(_ string, err error) { reports <- err })
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "run-42-")
	first, _ := p.logSinceStart()
	if err := p.stop(5 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "run-42-")
	second, _ := p.logSinceStart()
	if first == second || strings.Count(second, "=== landscape") != 1 {
		t.Errorf("logs of the runs: %q then %q", first, second)
	}
	all, _ := os.ReadFile(p.logPath)
	if strings.Count(string(all), "=== landscape") != 2 {
		t.Errorf("log: %q", all)
	}

	// Killed from outside: reported.
	if err := syscall.Kill(p.pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reports:
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) {
			t.Errorf("report: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an exit nobody asked for was not reported")
	}
	if err := p.exitError(); !strings.Contains(err.Error(), "run-42-") {
		t.Errorf("exit error lacks the log's end: %v", err)
	}
	if err := p.kill(); err != nil {
		t.Errorf("kill of an exited process: %v", err)
	}
}

func waitLog(t *testing.T, p *process, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, _ := p.logSinceStart(); strings.Contains(out, s) {
			return
		}
	}
	t.Fatalf("%q not in the log of %s", s, p.name)
}
