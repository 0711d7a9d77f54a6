package seedtest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const envHelperDir = "SEEDTEST_HELPER_DIR"

// TestProcessesDieWithTestProcess starts a seed in a child test process, kills that process with SIGKILL (no
// cleanups run) and expects etcd, kube-apiserver and kube-controller-manager to go with it.
func TestProcessesDieWithTestProcess(t *testing.T) {
	if dir := os.Getenv(envHelperDir); dir != "" {
		if _, err := start(context.Background(), dir, options{}); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("\nSEED READY\n")
		time.Sleep(time.Hour)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessesDieWithTestProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envHelperDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	ready := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		log.WriteString(sc.Text() + "\n")
		if sc.Text() == "SEED READY" {
			ready = true
			break
		}
	}
	if !ready {
		_ = cmd.Wait()
		t.Fatalf("child did not start a seed:\n%s", log.String())
	}
	if pids := processesUnder(dir); len(pids) != 3 {
		t.Errorf("seed processes %v, want etcd, kube-apiserver and kube-controller-manager", pids)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesUnder(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed processes outlived the test process: %v", pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesUnder returns the commands of the live processes whose command line mentions dir.
func processesUnder(dir string) map[string]string {
	found := map[string]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie waiting for its reaper
		}
		args := strings.Split(string(cmdline), "\x00")
		found[e.Name()] = filepath.Base(args[0])
	}
	return found
}
