package binproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
)

func newShell(t *testing.T, script string, exited func(string, error)) *binproc.Process {
	t.Helper()
	dir := t.TempDir()
	p := binproc.New(binproc.Config{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, LogPath: filepath.Join(dir, "sh.log"), Exited: exited})
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestProcessStopEscalates: a child that ignores SIGTERM is killed after the timeout, and the stop says so; a stop
// on purpose is not reported as an unexpected exit.
func TestProcessStopEscalates(t *testing.T) {
	unexpected := make(chan string, 1)
	p := newShell(t, `trap "" TERM; echo up-$((40+2)); while :; do sleep 0.05; done`, func(n string, _ error) { unexpected <- n })
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err == nil {
		t.Error("second start of a running process: no error")
	}
	waitLog(t, p, "up-42")
	pid := p.PID()
	begin := time.Now()
	err := p.Stop(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("stop of a process ignoring SIGTERM: %v", err)
	}
	if d := time.Since(begin); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("stop took %s", d)
	}
	if p.Running() || alive(pid) {
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
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "run-42-")
	first, _ := p.LogSinceStart()
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "run-42-")
	second, _ := p.LogSinceStart()
	if first == second || strings.Count(second, "=== sh start") != 1 {
		t.Errorf("logs of the runs: %q then %q", first, second)
	}
	all, _ := os.ReadFile(p.LogPath())
	if strings.Count(string(all), "=== sh start") != 2 {
		t.Errorf("log: %q", all)
	}

	// Killed from outside: reported.
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
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
	if err := p.ExitError(); !strings.Contains(err.Error(), "run-42-") {
		t.Errorf("exit error lacks the log's end: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("kill of an exited process: %v", err)
	}
}

func waitLog(t *testing.T, p *binproc.Process, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, _ := p.LogSinceStart(); strings.Contains(out, s) {
			return
		}
	}
	t.Fatalf("%q not in the log of %s", s, p.Name())
}
