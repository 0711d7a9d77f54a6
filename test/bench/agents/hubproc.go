package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/test/bench/procstat"
	"github.com/trellis-dev/trellis/test/binproc"
)

// hub is the hub under test: a child process this benchmark started (proc != nil), or an external one (-hub).
type hub struct {
	bin  string
	addr string // 127.0.0.1:<port>
	// memLimit is the hub's GOMEMLIMIT ("" = unset).
	memLimit string
	// grpcAddr is the gRPC-only listener agents connect to ("" = agents use addr).
	grpcAddr string
	dataDir  string
	logPath  string
	hbInt    time.Duration

	proc *binproc.Hub
	pid  int // of the child, or -hub-pid

	token  string
	pool   *x509.CertPool
	http   *http.Client
	probes []string // outcomes of the last start's /readyz probes
	// logStart is where this run's part of the log begins (-reuse appends to an earlier run's log).
	logStart int64
}

func (h *hub) url() string { return "https://" + h.addr }

// start runs the hub process on h.addr (again, after stop) and waits for /readyz 200; it returns the time from
// process start to ready.
func (h *hub) start(ctx context.Context) (time.Duration, error) {
	h.probes = h.probes[:0]
	if h.http != nil {
		h.http.CloseIdleConnections() // connections to an earlier process of the hub are of no use
	}
	if h.proc == nil {
		var env []string
		if h.memLimit != "" {
			env = []string{"GOMEMLIMIT=" + h.memLimit}
		}
		p, err := binproc.StartHub(ctx, binproc.HubConfig{Bin: h.bin, DataDir: h.dataDir, Addr: h.addr, LogPath: h.logPath, Env: env,
			Args:         []string{"--grpc-listen", h.grpcAddr, "--heartbeat-interval", h.hbInt.String()},
			ReadyTimeout: 60 * time.Second, Probe: h.recordProbe})
		if err != nil {
			return 0, err
		}
		h.proc = p
	} else if err := h.proc.Restart(ctx); err != nil {
		return 0, err
	}
	h.pid = h.proc.PID()
	return h.proc.Startup, h.loadCredentials(true)
}

// recordProbe keeps the outcome of a /readyz probe that did not succeed, or the first success, for the report of a
// slow start; runs of the same outcome are kept once.
func (h *hub) recordProbe(at, took time.Duration, code int, err error) {
	what := strconv.Itoa(code)
	if err != nil {
		what = err.Error()
		if i := strings.LastIndex(what, ": "); i >= 0 {
			what = what[i+2:]
		}
	}
	if n := len(h.probes); n > 0 && strings.HasSuffix(h.probes[n-1], " "+what) {
		return
	}
	if len(h.probes) < 20 {
		h.probes = append(h.probes, fmt.Sprintf("+%dms (took %dms) %s", at.Milliseconds(), took.Milliseconds(), what))
	}
}

// loadCredentials reads the CA certificate and (with token) the admin token from the data dir.
func (h *hub) loadCredentials(token bool) error {
	pool, err := binproc.LoadCA(filepath.Join(h.dataDir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	h.pool, h.http = pool, binproc.HTTPClient(pool, 120*time.Second)
	if token {
		h.token, err = binproc.AdminToken(h.dataDir)
	}
	return err
}

// loggedStartup returns the startup the hub's current run logged ("hub ready ... startup=<d>"), the time it took to
// serve.
func (h *hub) loggedStartup() time.Duration {
	if h.proc == nil {
		return 0
	}
	out, _ := h.proc.LogSinceStart()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `msg="hub ready"`) {
			continue
		}
		if _, v, ok := strings.Cut(line, "startup="); ok {
			v, _, _ = strings.Cut(v, " ")
			d, _ := time.ParseDuration(v)
			return d
		}
	}
	return 0
}

// stop signals the hub and waits until it has exited (SIGKILL after 30 s); it returns the time the exit took.
func (h *hub) stop(sig syscall.Signal) time.Duration {
	if h.proc == nil || !h.proc.Running() {
		return 0
	}
	start := time.Now()
	var err error
	if sig == syscall.SIGKILL {
		err = h.proc.Kill()
	} else {
		err = h.proc.Stop(30 * time.Second)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return time.Since(start)
}

// logProblems counts the hub's warning and error log lines and keeps the first few.
func (h *hub) logProblems(keep int) logProblems {
	f, err := os.Open(h.logPath)
	if err != nil {
		return logProblems{}
	}
	defer f.Close()
	if _, err := f.Seek(h.logStart, io.SeekStart); err != nil {
		return logProblems{}
	}
	var p logProblems
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			p.Count++
			if len(p.First) < keep {
				p.First = append(p.First, line)
			}
		}
	}
	return p
}

// rss reads VmRSS and VmHWM (peak) of the hub from /proc; -1 when unknown.
func (h *hub) rss() (cur, peak int64) {
	if h.pid == 0 {
		return -1, -1
	}
	return procRSS(h.pid)
}

func procRSS(pid int) (cur, peak int64) { return procstat.RSS(strconv.Itoa(pid)) }

// cpu is the hub's user+system CPU time so far.
func (h *hub) cpu() time.Duration {
	if h.pid == 0 {
		return 0
	}
	return procCPU(strconv.Itoa(h.pid))
}

// procCPU is a process's CPU time ("self" or a pid).
func procCPU(pid string) time.Duration { return procstat.CPU(pid) }

// machineCPU is the busy CPU time of the whole machine so far.
func machineCPU() time.Duration { return procstat.Machine() }

// get fetches a path with the admin token.
func (h *hub) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url()+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := h.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, body)
	}
	return body, nil
}

// metrics scrapes /metrics into series (name with labels, as printed) → value.
func (h *hub) metrics(ctx context.Context) (map[string]float64, error) {
	body, err := h.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, nil
}

// agentWrites returns trellis_agentlink_etcd_writes_total by purpose.
func agentWrites(m map[string]float64) map[string]float64 {
	const prefix = `trellis_agentlink_etcd_writes_total{purpose="`
	out := map[string]float64{}
	for k, v := range m {
		if p, ok := strings.CutPrefix(k, prefix); ok {
			out[strings.TrimSuffix(p, `"}`)] = v
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// saveProfile writes /debug/pprof/<name> (with query) to path.
func (h *hub) saveProfile(ctx context.Context, name, query, path string) error {
	body, err := h.get(ctx, "/debug/pprof/"+name+query)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// tcpCounters are the machine's TCP counters that show connection churn: connections accepted (Tcp PassiveOpens) and
// SYNs or connections dropped because a listen queue was full (TcpExt ListenOverflows, ListenDrops). They count every
// process on the machine; on a quiet machine the hub's listener is nearly all of it.
type tcpCounters struct {
	passiveOpens, listenOverflows, listenDrops int64
}

func readTCPCounters() tcpCounters {
	var c tcpCounters
	c.passiveOpens = procNetField("/proc/net/snmp", "Tcp:", "PassiveOpens")
	c.listenOverflows = procNetField("/proc/net/netstat", "TcpExt:", "ListenOverflows")
	c.listenDrops = procNetField("/proc/net/netstat", "TcpExt:", "ListenDrops")
	return c
}

func (c tcpCounters) sub(o tcpCounters) tcpCounters {
	return tcpCounters{c.passiveOpens - o.passiveOpens, c.listenOverflows - o.listenOverflows, c.listenDrops - o.listenDrops}
}

// procNetField reads a field of a /proc/net file, where a header line and a value line share a prefix.
func procNetField(path, prefix, field string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	var header []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == field && i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
		return -1
	}
	return -1
}
