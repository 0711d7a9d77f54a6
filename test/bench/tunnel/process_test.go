package tunnel_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/seedtest"
)

const (
	watches = 1000
	events  = 50
)

// TestTunnelProcessBench measures the hub as a process of its own (trellis-hub, its RSS, heap and goroutines read
// from /proc and its /debug/pprof), with the seed's agent, the clients and the stand-in target in this process:
//
//   - 1,000 idle passthrough tunnels: the hub's memory and goroutines per tunnel;
//   - a 100 MB stream through a passthrough tunnel against direct (streamCount pairs), with the hub's relay in its own
//     process, as deployed;
//   - 1,000 watches of ConfigMaps held open through the seed API route, and 1,000 straight to the seed's
//     kube-apiserver: the hub's memory and goroutines per watch, this process's per watch through the hub (the agent
//     and the clients) less per direct watch (the clients): the agent's share; and the delay of each of 50 events
//     (create to arrival) at every watch, through the hub against direct, in the same run.
func TestTunnelProcessBench(t *testing.T) {
	if os.Getenv("TRELLIS_BENCH") == "" {
		t.Skip("a benchmark: make bench-tunnel")
	}
	ctx := context.Background()
	h := agenttest.StartHubProcessListening(t, t.TempDir(), []string{"--grpc-listen", "--tunnel-listen"},
		"--tunnel-max-per-seed", strconv.Itoa(4*watches), "--tunnel-max-per-client", strconv.Itoa(4*watches))
	grpcAddr, tunnelAddr := h.Listen["--grpc-listen"], h.Listen["--tunnel-listen"]
	targetAddr, targetTLS := target(t)
	var svcAddr string
	var svcMu sync.Mutex
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		svcMu.Lock()
		defer svcMu.Unlock()
		if addr != svcAddr {
			return nil, fmt.Errorf("no route to %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, targetAddr)
	}
	cluster := seedtest.Start(t)
	agenttest.StartAgentOn(t, h, grpcAddr, "local", agenttest.SeedSpec, cluster, nil, func(c *agent.Config) { c.DialService = dial })

	// The example shoot on the seed, its Service routed to the stand-in target.
	project, shoot, addr := agenttest.ShootOn(t, h, cluster, "local")
	svcMu.Lock()
	svcAddr = addr
	svcMu.Unlock()
	sni := tunnel.ShootServerName(shoot, project, tunnel.DefaultDomain)
	report := map[string]any{"cpus": runtime.NumCPU()}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		report["loadavgBefore"] = strings.TrimSpace(string(la))
	}
	hubMem := func() processMem { return hubProcessMem(t, h) }

	// 1. Idle passthrough tunnels.
	cfg := targetTLS.Clone()
	cfg.ServerName, cfg.InsecureSkipVerify = sni, true //nolint:gosec // the bench's target answers, nothing is verified
	h0, s0 := hubMem(), selfMem()
	conns := make([]net.Conn, 0, idle)
	for range idle {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tunnelAddr, cfg) // through to the target's handshake
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	h1, s1 := hubMem(), selfMem()
	report["idleTunnels"] = map[string]any{"tunnels": idle, "hub": h1.minus(h0).per(idle), "agentClientsTarget": s1.minus(s0).per(idle)}
	for _, c := range conns {
		c.Close()
	}

	// 2. Throughput of a 100 MB stream through the hub's process against direct, alternating: the deployed shape,
	// the hub's relay in a process of its own (TestTunnelBench measures the same with the hub in this process).
	dialTLS := func(addr string, cfg *tls.Config) *tls.Conn {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var ratios, tunnelRates, directRates []float64
	var tunnelSeconds, directSeconds float64
	for range streamCount() {
		tm, _ := streamOnce(t, dialTLS(tunnelAddr, cfg))
		dm, _ := streamOnce(t, dialTLS(targetAddr, targetTLS))
		ratios, tunnelRates, directRates = append(ratios, tm/dm), append(tunnelRates, tm), append(directRates, dm)
		tunnelSeconds, directSeconds = tunnelSeconds+1/tm, directSeconds+1/dm
	}
	tp := ratioSummary(ratios, tunnelSeconds, directSeconds)
	tp["tunnelMiBpsMedian"], tp["directMiBpsMedian"] = median(tunnelRates), median(directRates)
	report["throughput100MB"] = tp

	// 3. Watches through the hub, then as many straight to the seed.
	wns := "bench-watch"
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &kcorev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cluster.Client.CoreV1().ConfigMaps(wns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/namespaces/" + wns + "/configmaps?watch=1&resourceVersion=" + list.ResourceVersion
	var sent sync.Map // ConfigMap name → when its create was sent
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hubClient := &http.Client{Transport: h.HTTP.Transport}
	direct, err := rest.HTTPClientFor(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	open := func(c *http.Client, url, token string) []*watchDelays {
		ws := make([]*watchDelays, watches)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 50)
		for i := range ws {
			ws[i] = &watchDelays{}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				ws[i].open(t, wctx, c, url, token, &sent)
			})
		}
		wg.Wait()
		return ws
	}
	h0, s0 = hubMem(), selfMem()
	viaHub := open(hubClient, h.URL+tunnel.SeedAPIPath("local")+path, h.Token)
	h1, s1 = hubMem(), selfMem()
	viaDirect := open(direct, strings.TrimSuffix(cluster.Config.Host, "/")+path, "")
	_, s2 := hubMem(), selfMem()
	perHub, perDirect := s1.minus(s0).per(watches), s2.minus(s1).per(watches)
	report["watches"] = map[string]any{"watches": watches, "hub": h1.minus(h0).per(watches),
		"thisProcessPerWatchThroughHub (agent+client)": perHub, "thisProcessPerDirectWatch (client)": perDirect,
		"agentPerWatch (difference)": perHub.minus(perDirect)}

	for i := range events {
		name := fmt.Sprintf("e%03d", i)
		sent.Store(name, time.Now())
		if _, err := cluster.Client.CoreV1().ConfigMaps(wns).Create(ctx, &kcorev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	delays := func(ws []*watchDelays) (stats, int) {
		deadline := time.Now().Add(30 * time.Second)
		var all []time.Duration
		for _, w := range ws {
			for w.count() < events && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			all = append(all, w.all()...)
		}
		return percentiles(all), len(all)
	}
	hs, hn := delays(viaHub)
	ds, dn := delays(viaDirect)
	if hn < watches*events || dn < watches*events {
		t.Errorf("events delivered: %d through the hub, %d direct; want %d each", hn, dn, watches*events)
	}
	report["eventDelay"] = map[string]any{"events": events, "perWatch": watches, "hubP50": hs.P50.String(), "hubP99": hs.P99.String(),
		"directP50": ds.P50.String(), "directP99": ds.P99.String(), "overheadP99": (hs.P99 - ds.P99).String()}
	cancel()
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		report["loadavgAfter"] = strings.TrimSpace(string(la))
	}
	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("tunnel process benchmark:\n%s", out)
	_ = os.MkdirAll("../../../bin/bench", 0o755)
	_ = os.WriteFile("../../../bin/bench/tunnel-process.json", out, 0o644)
}

// watchDelays is one watch and the delays of the events it received.
type watchDelays struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (w *watchDelays) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.delays)
}

func (w *watchDelays) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.delays...)
}

// open starts the watch at url and returns once its response began; a goroutine records each event's delay until
// ctx ends.
func (w *watchDelays) open(t *testing.T, ctx context.Context, c *http.Client, url, token string, sent *sync.Map) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("watch: %v", err)
		return
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		t.Errorf("watch: %d %s", resp.StatusCode, b)
		return
	}
	go func() {
		defer resp.Body.Close()
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var ev struct {
				Object struct {
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"object"`
			}
			if dec.Decode(&ev) != nil {
				return
			}
			if at, ok := sent.Load(ev.Object.Metadata.Name); ok {
				w.mu.Lock()
				w.delays = append(w.delays, time.Since(at.(time.Time)))
				w.mu.Unlock()
			}
		}
	}()
}

// processMem is a process's memory and goroutines.
type processMem struct {
	RSSKiB, HeapKiB, StackKiB, Goroutines int64
}

func (a processMem) minus(b processMem) processMem {
	return processMem{a.RSSKiB - b.RSSKiB, a.HeapKiB - b.HeapKiB, a.StackKiB - b.StackKiB, a.Goroutines - b.Goroutines}
}

// per divides by n: per tunnel or watch (KiB; goroutines in hundredths).
func (a processMem) per(n int64) processMem {
	return processMem{a.RSSKiB / n, a.HeapKiB / n, a.StackKiB / n, a.Goroutines * 100 / n}
}

// selfMem is this process's RSS, heap and stacks in use and goroutines, after a GC.
func selfMem() processMem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return processMem{RSSKiB: rssKiB(os.Getpid()), HeapKiB: int64(ms.HeapInuse >> 10), StackKiB: int64(ms.StackInuse >> 10),
		Goroutines: int64(runtime.NumGoroutine())}
}

// hubProcessMem is the hub's RSS (from /proc), heap and stacks in use (its heap profile's MemStats, after a GC) and
// goroutines (its goroutine profile).
func hubProcessMem(t *testing.T, h *binproc.Hub) processMem {
	ctx := context.Background()
	m := processMem{RSSKiB: rssKiB(h.PID())}
	code, body, err := h.Do(ctx, "GET", "/debug/pprof/heap?debug=1&gc=1", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("hub heap profile: %d %v", code, err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		var v int64
		if _, err := fmt.Sscanf(l, "# HeapInuse = %d", &v); err == nil {
			m.HeapKiB = v >> 10
		}
		if _, err := fmt.Sscanf(l, "# Stack = %d", &v); err == nil {
			m.StackKiB = v >> 10
		}
	}
	code, body, err = h.Do(ctx, "GET", "/debug/pprof/goroutine?debug=1", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("hub goroutine profile: %d %v", code, err)
	}
	_, _ = fmt.Sscanf(string(body), "goroutine profile: total %d", &m.Goroutines)
	return m
}

// rssKiB is the resident set of process pid.
func rssKiB(pid int) int64 {
	status, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
