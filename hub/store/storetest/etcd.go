// Package storetest holds the conformance suite of hub/store and what tests need to run it: fixtures of the
// resources it stores and a launcher for an external etcd process. Tests of other packages use it to run the store
// against real etcd.
package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Environment variables of the external etcd.
const (
	// EnvEtcdBin names the etcd binary; default <module root>/bin/testbin/etcd.
	EnvEtcdBin = "TRELLIS_ETCD_BIN"
	// EnvSkipExternal, set to 1, skips tests that need the binary when it is missing instead of failing them.
	EnvSkipExternal = "TRELLIS_SKIP_EXTERNAL_ETCD"
)

// EtcdBinary returns the path of the etcd binary for tests, or "" when there is none.
func EtcdBinary() string {
	if p := os.Getenv(EnvEtcdBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "testbin", "etcd")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// StartEtcd starts an etcd process on ephemeral loopback ports with a temporary data directory and returns its
// client endpoint; the process is killed when the test ends. Without a binary the test fails with a hint to run
// `make testbin`, or is skipped when TRELLIS_SKIP_EXTERNAL_ETCD=1.
func StartEtcd(t testing.TB) string {
	t.Helper()
	return NewEtcd(t).Endpoint()
}

// Etcd is an etcd process for tests that can be stopped and started again on the same ports and data.
type Etcd struct {
	t         testing.TB
	bin, dir  string
	clientURL string
	peerURL   string

	cmd    *exec.Cmd
	exited chan error
	logf   *os.File
}

// NewEtcd starts an etcd process like StartEtcd and returns its handle; it is killed when the test ends.
func NewEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin := EtcdBinary()
	if bin == "" {
		if os.Getenv(EnvSkipExternal) == "1" {
			t.Skipf("no etcd binary (%s=1)", EnvSkipExternal)
		}
		t.Fatalf("no etcd binary at $%s or bin/testbin/etcd: run `make testbin` (or set %s=1 to skip)", EnvEtcdBin, EnvSkipExternal)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		e := &Etcd{
			t:   t,
			bin: bin,
			dir: t.TempDir(),
		}
		ports := freePorts(t, 2)
		e.clientURL, e.peerURL = "http://127.0.0.1:"+strconv.Itoa(ports[0]), "http://127.0.0.1:"+strconv.Itoa(ports[1])
		if lastErr = e.Start(); lastErr == nil {
			t.Cleanup(e.Stop)
			return e
		}
	}
	t.Fatalf("start etcd %s: %v", bin, lastErr)
	return nil
}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string { return e.clientURL }

// Start starts the process (again) and waits until it answers.
func (e *Etcd) Start() error {
	cmd := exec.Command(e.bin,
		"--name", "test",
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.clientURL,
		"--advertise-client-urls", e.clientURL,
		"--listen-peer-urls", e.peerURL,
		"--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "test="+e.peerURL,
		"--heartbeat-interval", "10",
		"--election-timeout", "100",
		"--log-level", "error",
		// Test data need no durability across machine crashes; fsync would only slow the suite.
		"--unsafe-no-fsync",
	)
	logf, err := os.OpenFile(filepath.Join(e.dir, "etcd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	e.cmd, e.logf, e.exited = cmd, logf, make(chan error, 1)
	go func(exited chan<- error) { exited <- cmd.Wait() }(e.exited)

	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.Stop()
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = c.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-e.exited:
			e.exited <- werr
			e.Stop()
			log, _ := os.ReadFile(filepath.Join(e.dir, "etcd.log"))
			return fmt.Errorf("etcd exited: %v\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			e.Stop()
			return fmt.Errorf("etcd at %s not ready: %w", e.clientURL, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process and waits for it; stopping a stopped etcd does nothing.
func (e *Etcd) Stop() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	_ = <-e.exited
	e.logf.Close()
	e.cmd = nil
}

// freePorts returns n distinct loopback ports nobody listens on now: each listener stays open until all are chosen,
// since the kernel may hand out a closed listener's port again.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
