package tunnel_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/tunnel"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	pmetav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(endpointsEnv) != "" {
		os.Exit(endpointsMain())
	}
	agenttest.Main(m)
}

const (
	requests    = 2000
	streamBytes = 100 << 20
	// streams is how many times each of the tunnel's and the direct stream runs, alternating (TRELLIS_BENCH_STREAMS):
	// a stream takes a tenth of a second, so one pair's ratio is noisy on a shared machine; the report gives their
	// quartiles and the ratio of the summed rates.
	streams = 15
	idle    = 1000
	// heartbeat is the hub's heartbeat interval: several heartbeats during each stream (a session ends after three
	// intervals without an ack, so not much shorter on a busy machine).
	heartbeat = 200 * time.Millisecond
)

func ptr[T any](v T) *T { return &v }

// target is the stand-in shoot kube-apiserver (startTarget), stopped when the test ends.
func target(t *testing.T) (addr string, cfg *tls.Config) {
	addr, cfg, stop, err := startTarget()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr, cfg
}

// startTarget starts the stand-in shoot kube-apiserver: after the handshake it answers each byte with one byte
// ("ping"), or, when the first byte is 's', streams streamBytes and closes. cfg is a client configuration that
// trusts it (its name is example.com); stop closes its listener and waits for its connections to end.
func startTarget() (addr string, cfg *tls.Config, stop func(), err error) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS() // for its certificate
	srv.Close()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLS)
	if err != nil {
		return "", nil, nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				b := make([]byte, 1)
				if _, err := c.Read(b); err != nil {
					return
				}
				if b[0] == 's' {
					buf := make([]byte, 64<<10)
					for sent := 0; sent < streamBytes; sent += len(buf) {
						if _, err := c.Write(buf); err != nil {
							return
						}
					}
					return
				}
				for {
					if _, err := c.Write(b); err != nil {
						return
					}
					if _, err := c.Read(b); err != nil {
						return
					}
				}
			})
		}
	})
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return lis.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "example.com"}, func() { lis.Close(); wg.Wait() }, nil
}

// startBench starts a hub (changed by hubOpts) and a seed with its agent, a shoot on it whose kube-apiserver Service
// the agent reaches at the target, and returns them, the target's address and client configuration, and the shoot's
// tunnel name.
func startBench(t *testing.T, hubOpts ...func(*hub.Config)) (h *agenttest.Hub, seed *agenttest.Seed, targetAddr string, targetTLS *tls.Config, sni string) {
	t.Helper()
	targetAddr, targetTLS = target(t)
	h, seed, sni = startBenchTo(t, targetAddr, hubOpts...)
	return h, seed, targetAddr, targetTLS, sni
}

// startBenchTo is startBench with the target at targetAddr, started elsewhere.
func startBenchTo(t *testing.T, targetAddr string, hubOpts ...func(*hub.Config)) (h *agenttest.Hub, seed *agenttest.Seed, sni string) {
	t.Helper()
	ctx := context.Background()
	h = agenttest.StartHub(t, append([]func(*hub.Config){func(c *hub.Config) {
		c.TunnelListen, c.TunnelMaxPerSeed, c.TunnelMaxPerClient = "127.0.0.1:0", 10*idle, 10*idle
		c.HeartbeatInterval = heartbeat
	}}, hubOpts...)...)
	var svcAddr string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != svcAddr {
			return nil, fmt.Errorf("no route to %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, targetAddr)
	}
	seed = h.StartSeed(t, "local", agenttest.SeedSpec, seedtest.Start(t), func(c *agent.Config) { c.DialService = dial })
	h.Store(t, &corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Metadata: &pmetav1.ObjectMeta{Name: "dev"},
		Spec: &corev1beta1.ProjectSpec{Namespace: ptr("garden-dev")}})
	h.Store(t, &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &pmetav1.ObjectMeta{Namespace: "garden-dev", Name: "bench"}, Spec: &corev1beta1.ShootSpec{SeedName: ptr("local")}})
	ns := tunnel.ShootNamespace("dev", "bench")
	if _, err := seed.Cluster.Client.CoreV1().Namespaces().Create(ctx, &kcorev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := seed.Cluster.Client.CoreV1().Services(ns).Create(ctx, &kcorev1.Service{ObjectMeta: metav1.ObjectMeta{Name: agent.ShootAPIServerService},
		Spec: kcorev1.ServiceSpec{Ports: []kcorev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcAddr = net.JoinHostPort(svc.Spec.ClusterIP, "443")
	return h, seed, tunnel.ShootServerName("bench", "dev", tunnel.DefaultDomain)
}

// dialVia opens a TLS connection to the target: through the SNI listener at listener with the shoot's name sni (the
// target's certificate checked for its own name), or directly when listener is "".
func dialVia(t *testing.T, listener, sni, targetAddr string, targetTLS *tls.Config) *tls.Conn {
	t.Helper()
	addr, cfg := targetAddr, targetTLS.Clone()
	if listener != "" {
		addr = listener
		throughListener(cfg, sni)
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// throughListener makes cfg, a client configuration of the target, one for the SNI listener: it names the shoot's
// sni and checks the target's certificate for the target's own name.
func throughListener(cfg *tls.Config, sni string) {
	cfg.ServerName = sni
	cfg.InsecureSkipVerify = true //nolint:gosec // verified against example.com below
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return cs.PeerCertificates[0].VerifyHostname("example.com")
	}
}

type stats struct{ P50, P99 time.Duration }

func percentiles(d []time.Duration) stats {
	slices.Sort(d)
	return stats{P50: d[len(d)/2], P99: d[len(d)*99/100]}
}

func TestTunnelBench(t *testing.T) {
	if os.Getenv("TRELLIS_BENCH") == "" {
		t.Skip("a benchmark: make bench-tunnel")
	}
	// TRELLIS_BENCH_PARTS (comma-separated: seedapi, roundtrip, throughput, idle) runs some parts only.
	run := func(part string) bool {
		parts := os.Getenv("TRELLIS_BENCH_PARTS")
		return parts == "" || slices.Contains(strings.Split(parts, ","), part)
	}
	h, seed, targetAddr, targetTLS, sni := startBench(t)
	report := map[string]any{"cpus": runtime.NumCPU()}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		report["loadavgBefore"] = strings.TrimSpace(string(la))
	}

	// 1. Seed API request latency: GET a namespace through the hub (authn, two reverse proxies, the tunnel) and
	// directly with the agent's own credentials.
	direct, err := rest.HTTPClientFor(seed.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(c *http.Client, url string, hdr ...string) time.Duration {
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	path := "/api/v1/namespaces/default"
	var viaHub, viaDirect, viaImpersonating []time.Duration
	for i := range requests + 100 {
		if !run("seedapi") {
			break
		}
		a := get(h.HTTP, h.URL+tunnel.SeedAPIPath("local")+path, "Authorization", "Bearer "+h.Token)
		b := get(direct, strings.TrimSuffix(seed.Cluster.Config.Host, "/")+path)
		// What the agent asks of the seed for the hub's admin: the same request, impersonating (the seed authorizes
		// the impersonation, which the direct request does not cost it).
		c := get(direct, strings.TrimSuffix(seed.Cluster.Config.Host, "/")+path, "Impersonate-User", "trellis:admin", "Impersonate-Group", "system:masters")
		if i >= 100 { // warm-up
			viaHub, viaDirect, viaImpersonating = append(viaHub, a), append(viaDirect, b), append(viaImpersonating, c)
		}
	}
	if run("seedapi") {
		hs, ds, is := percentiles(viaHub), percentiles(viaDirect), percentiles(viaImpersonating)
		report["seedAPI"] = map[string]any{"requests": requests, "hubP50": hs.P50.String(), "hubP99": hs.P99.String(),
			"directP50": ds.P50.String(), "directP99": ds.P99.String(),
			"overheadP50": (hs.P50 - ds.P50).String(), "overheadP99": (hs.P99 - ds.P99).String(),
			"directImpersonatingP50": is.P50.String(), "directImpersonatingP99": is.P99.String(),
			"overheadOverImpersonatingP50": (hs.P50 - is.P50).String(), "overheadOverImpersonatingP99": (hs.P99 - is.P99).String()}
	}

	// 2. Passthrough round trips: one byte each way on an established TLS connection, through the SNI listener and
	// directly to the target.
	dialTarget := func(through bool) *tls.Conn {
		if through {
			return dialVia(t, h.TunnelAddr(), sni, targetAddr, targetTLS)
		}
		return dialVia(t, "", sni, targetAddr, targetTLS)
	}
	roundTrips := func(c *tls.Conn) stats {
		defer c.Close()
		b := []byte{'p'}
		var d []time.Duration
		for i := range requests + 100 {
			start := time.Now()
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatal(err)
			}
			if i >= 100 {
				d = append(d, time.Since(start))
			}
		}
		return percentiles(d)
	}
	if run("roundtrip") {
		ps, pd := roundTrips(dialTarget(true)), roundTrips(dialTarget(false))
		report["passthroughRoundTrip"] = map[string]any{"roundTrips": requests, "tunnelP50": ps.P50.String(), "tunnelP99": ps.P99.String(),
			"directP50": pd.P50.String(), "directP99": pd.P99.String(),
			"overheadP50": (ps.P50 - pd.P50).String(), "overheadP99": (ps.P99 - pd.P99).String()}
	}

	// 3. Throughput of a 100 MB stream, `streams` times through the tunnel and directly, alternating; and the CPU time
	// the process (client, hub, agent and target) spent per MiB. Then the tunnel's stream again while the agent's
	// heartbeat acks and one-byte round trips on a second tunnel of the same agent connection are timed: a bulk tunnel
	// must not hold them up. That probe costs CPU of its own (a round trip a millisecond through both relays), so the
	// ratio to direct is taken from the streams without it, and the stream's rate beside the probe is reported apart.
	stream := func(through bool) (mibps, cpuPerMiB float64) {
		cpu0 := cpuTime()
		mibps, mib := streamOnce(t, dialTarget(through))
		return mibps, float64((cpuTime() - cpu0).Microseconds()) / mib
	}
	nstreams := streamCount()
	if run("throughput") {
		var ratios, tunnelRates, directRates, probedRates, cpuRatios, cpuTunnel, cpuDirect []string
		var ratioValues []float64
		var tunnelSeconds, directSeconds float64 // per MiB, summed
		var acks, pings []time.Duration
		var streamRate float64 // bytes per second through the tunnel beside the probe, the last stream's
		for range nstreams {
			tm, tc := stream(true)
			dm, dc := stream(false)
			ratios, ratioValues = append(ratios, fmt.Sprintf("%.0f%%", 100*tm/dm)), append(ratioValues, tm/dm)
			tunnelSeconds, directSeconds = tunnelSeconds+1/tm, directSeconds+1/dm
			tunnelRates, directRates = append(tunnelRates, fmt.Sprint(int(tm))), append(directRates, fmt.Sprint(int(dm)))
			cpuRatios = append(cpuRatios, fmt.Sprintf("%.1f", tc/dc))
			cpuTunnel, cpuDirect = append(cpuTunnel, fmt.Sprintf("%.2f", tc/1000)), append(cpuDirect, fmt.Sprintf("%.2f", dc/1000))

			probe := dialTarget(true)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { acks = append(acks, heartbeatAcks(seed.Agent.Agent, stop)...) })
			wg.Go(func() { pings = append(pings, pingUntil(t, probe, stop)...) })
			pm, _ := stream(true)
			streamRate = pm * (1 << 20)
			close(stop)
			wg.Wait()
			probe.Close()
			probedRates = append(probedRates, fmt.Sprint(int(pm)))
		}
		// The same without a stream, for comparison: as long as the streams took.
		probe := dialTarget(true)
		stop := make(chan struct{})
		var quietAcks, quietPings []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { quietAcks = heartbeatAcks(seed.Agent.Agent, stop) })
		wg.Go(func() { quietPings = pingUntil(t, probe, stop) })
		time.Sleep(time.Duration(float64(nstreams*streamBytes) / streamRate * float64(time.Second)))
		close(stop)
		wg.Wait()
		probe.Close()
		r := ratioSummary(ratioValues, tunnelSeconds, directSeconds)
		maps.Copy(r, map[string]any{"tunnelMiBps": tunnelRates, "directMiBps": directRates, "ratio": ratios, "tunnelBesideProbeMiBps": probedRates,
			"cpuPerByteTunnelOverDirect": cpuRatios, "cpuMsPerMiBTunnel": cpuTunnel, "cpuMsPerMiBDirect": cpuDirect})
		if len(acks) > 0 {
			a := percentiles(acks)
			r["heartbeatAckDuringStream"] = map[string]any{"n": len(acks), "p50": a.P50.String(), "p99": a.P99.String()}
		}
		if len(pings) > 0 {
			p := percentiles(pings)
			r["otherTunnelRoundTripDuringStream"] = map[string]any{"n": len(pings), "p50": p.P50.String(), "p99": p.P99.String()}
		}
		if len(quietAcks) > 0 {
			a := percentiles(quietAcks)
			r["heartbeatAckWithoutStream"] = map[string]any{"n": len(quietAcks), "p50": a.P50.String(), "p99": a.P99.String()}
		}
		if len(quietPings) > 0 {
			p := percentiles(quietPings)
			r["otherTunnelRoundTripWithoutStream"] = map[string]any{"n": len(quietPings), "p50": p.P50.String(), "p99": p.P99.String()}
		}
		report["throughput100MB"] = r
	}

	// 4. Idle tunnels: the process' heap and RSS before and after opening `idle` passthrough tunnels. The hub and
	// the agent share this process, so this is an upper bound for the hub's part.
	mem := func() (heap uint64, rss uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		status, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				_, _ = fmt.Sscan(f[1], &rss)
				rss <<= 10
			}
		}
		return ms.HeapInuse + ms.StackInuse, rss
	}
	h0, r0 := mem()
	conns := make([]*tls.Conn, 0, idle)
	for range idle {
		if !run("idle") {
			break
		}
		c := dialTarget(true)
		b := []byte{'p'} // one round trip: the tunnel is open end to end
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if run("idle") {
		h1, r1 := mem()
		profile(t, "idle")
		for _, c := range conns {
			c.Close()
		}
		report["idleTunnels"] = map[string]any{"tunnels": idle,
			"heapPerTunnelKiB (hub+agent+clients+target)": (int64(h1) - int64(h0)) / idle / 1024,
			"rssPerTunnelKiB (hub+agent+clients+target)":  (int64(r1) - int64(r0)) / idle / 1024}
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		report["loadavgAfter"] = strings.TrimSpace(string(la))
	}
	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("tunnel benchmark:\n%s", out)
	_ = os.MkdirAll("../../../bin/bench", 0o755)
	_ = os.WriteFile("../../../bin/bench/tunnel.json", out, 0o644)
}

// streamOnce asks the target at c for a stream (streamBytes), reads it to the end, closes c and returns the rate in
// MiB/s and the MiB read.
func streamOnce(t *testing.T, c *tls.Conn) (mibps, mib float64) {
	t.Helper()
	defer c.Close()
	mibps, mib, err := readStream(c)
	if err != nil {
		t.Fatal(err)
	}
	return mibps, mib
}

// readStream asks the target at c for a stream (streamBytes) and reads it to the end: the rate in MiB/s and the MiB
// read.
func readStream(c *tls.Conn) (mibps, mib float64, err error) {
	start := time.Now()
	if _, err := c.Write([]byte{'s'}); err != nil {
		return 0, 0, err
	}
	n, _ := io.Copy(io.Discard, c)
	if n < streamBytes {
		return 0, 0, fmt.Errorf("streamed %d bytes", n)
	}
	mib = float64(n) / (1 << 20)
	return mib / time.Since(start).Seconds(), mib, nil
}

// streamCount is how many streams each way the throughput parts run: streams, or TRELLIS_BENCH_STREAMS.
func streamCount() int {
	if n, err := strconv.Atoi(os.Getenv("TRELLIS_BENCH_STREAMS")); err == nil && n > 0 {
		return n
	}
	return streams
}

// ratioSummary is the ratios (tunnel ÷ direct) of stream pairs: their quartiles, and the ratio of the summed times
// (the same bytes each way).
func ratioSummary(ratios []float64, tunnelSecondsPerMiB, directSecondsPerMiB float64) map[string]any {
	sorted := slices.Sorted(slices.Values(ratios))
	quartile := func(q int) string { return fmt.Sprintf("%.0f%%", 100*sorted[(len(sorted)-1)*q/4]) }
	return map[string]any{"ratioQuartiles": []string{quartile(0), quartile(1), quartile(2), quartile(3), quartile(4)},
		"ratioOfTotals": fmt.Sprintf("%.0f%%", 100*directSecondsPerMiB/tunnelSecondsPerMiB)}
}

// median is the median of v, rounded to an integer.
func median(v []float64) int {
	s := slices.Sorted(slices.Values(v))
	return int(s[len(s)/2])
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heartbeatAcks samples the agent's heartbeat ack latency (one value per heartbeat) until stop is closed.
func heartbeatAcks(a *agent.Agent, stop <-chan struct{}) []time.Duration {
	var d []time.Duration
	last := a.Status().HeartbeatAckLatency
	tick := time.NewTicker(heartbeat / 5)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return d
		case <-tick.C:
			if l := a.Status().HeartbeatAckLatency; l != last {
				d, last = append(d, l), l
			}
		}
	}
}

// pingUntil times one-byte round trips on c, one per millisecond, until stop is closed.
func pingUntil(t *testing.T, c *tls.Conn, stop <-chan struct{}) []time.Duration {
	var d []time.Duration
	b := []byte{'p'}
	for {
		select {
		case <-stop:
			return d
		case <-time.After(time.Millisecond):
		}
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Error(err)
			return d
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Error(err)
			return d
		}
		d = append(d, time.Since(start))
	}
}

// profile writes heap and goroutine profiles named for what is measured to TRELLIS_BENCH_PROFILE, if set.
func profile(t *testing.T, name string) {
	dir := os.Getenv("TRELLIS_BENCH_PROFILE")
	if dir == "" {
		return
	}
	for _, p := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, name+"-"+p+".pprof"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}
