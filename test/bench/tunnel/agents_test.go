package tunnel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/seedtest"
)

const (
	agents          = 100
	watchesPerAgent = 10
	agentEvents     = 10 // ConfigMaps created in each seed's watched namespace
)

// TestTunnelAgentsBench measures 1,000 watches through 100 agents against one hub process (trellis-hub): 100 seeds,
// each with an agent of its own (agent.Agent in this process, each with its own session, credentials and seed
// kubeconfig), 10 watches of ConfigMaps per seed through the hub's seed API route and the same 10 straight to the
// seed's kube-apiserver. The seeds' kube-apiservers are real but shared: seed i uses cluster i mod
// TRELLIS_BENCH_SEED_CLUSTERS (default 1), each seed watching a namespace of its own, because 100 kube-apiservers do
// not fit a two-core machine. It reports the hub's RSS, heap, stacks and goroutines before and after the agents
// connect (per agent) and before and after the watches open (per watch, and per tunnel the watches added, counted by
// the hub's trellis_tunnel_open{kind="seed-api"}); the delay from create to arrival of 10 events at every watch, through the
// hub against direct; and the events delivered per second when each seed's 10 ConfigMaps are created at once.
func TestTunnelAgentsBench(t *testing.T) {
	if os.Getenv("TRELLIS_BENCH") == "" {
		t.Skip("a benchmark: make bench-tunnel")
	}
	ctx := context.Background()
	nclusters := 1
	if v := os.Getenv("TRELLIS_BENCH_SEED_CLUSTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > agents {
			t.Fatalf("TRELLIS_BENCH_SEED_CLUSTERS=%q: want a number from 1 to %d", v, agents)
		}
		nclusters = n
	}
	total := agents * watchesPerAgent
	h, grpcAddr := agenttest.StartHubProcess(t, t.TempDir(),
		"--tunnel-max-per-seed", strconv.Itoa(4*watchesPerAgent), "--tunnel-max-per-client", strconv.Itoa(4*total))
	clusters := make([]*seedtest.Seed, nclusters)
	for i := range clusters {
		clusters[i] = seedtest.Start(t)
	}
	report := map[string]any{"cpus": runtime.NumCPU(), "agents": agents, "watchesPerAgent": watchesPerAgent,
		"seedKubeAPIServers": nclusters, "loadavgBefore": loadavg()}
	hubMem := func() processMem { return hubProcessMem(t, h) }

	// 1. The agents: seed-000 … seed-099, each registering its seed with the hub.
	seed := func(i int) string { return fmt.Sprintf("seed-%03d", i) }
	h0 := hubMem()
	start := time.Now()
	for i := range agents {
		agenttest.StartAgentOn(t, h, grpcAddr, seed(i), agenttest.SeedSpec, clusters[i%nclusters], nil)
	}
	hubClient := &http.Client{Transport: h.HTTP.Transport}
	seedAPI := func(i int, path string) string { return h.URL + tunnel.SeedAPIPath(seed(i)) + path }
	for i := range agents {
		agenttest.Eventually(t, seed(i)+"'s agent connected", func() bool {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, seedAPI(i, "/version"), nil)
			if err != nil {
				return false
			}
			req.Header.Set("Authorization", "Bearer "+h.Token)
			resp, err := hubClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	connected := time.Since(start)
	h1 := hubMem()
	report["agentsConnected"] = map[string]any{"after": connected.Round(time.Millisecond).String(), "hubPerAgent": h1.minus(h0).per(agents)}

	// 2. Ten watches per seed, each seed's in a namespace of its own: through the hub, then as many direct.
	ns := func(i int) string { return "bench-agents-" + seed(i) }
	paths := make([]string, agents)
	directs := make([]*http.Client, nclusters)
	for i := range agents {
		c := clusters[i%nclusters]
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &kcorev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := c.Client.CoreV1().ConfigMaps(ns(i)).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = "/api/v1/namespaces/" + ns(i) + "/configmaps?watch=1&resourceVersion=" + list.ResourceVersion
	}
	for k, c := range clusters {
		var err error
		if directs[k], err = rest.HTTPClientFor(c.Config); err != nil {
			t.Fatal(err)
		}
	}
	var sent sync.Map // ConfigMap name (unique across seeds) → when its create was sent
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	open := func(url func(i int) string, client func(i int) *http.Client, token string) [][]*watchDelays {
		ws := make([][]*watchDelays, agents)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 50)
		for i := range ws {
			ws[i] = make([]*watchDelays, watchesPerAgent)
			for j := range ws[i] {
				ws[i][j] = &watchDelays{}
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					ws[i][j].open(t, wctx, client(i), url(i), token, &sent)
				})
			}
		}
		wg.Wait()
		return ws
	}
	openTunnels := func() int64 { return hubTunnelsOpen(t, h, "seed-api") }
	t0, h0 := openTunnels(), hubMem()
	viaHub := open(func(i int) string { return seedAPI(i, paths[i]) }, func(int) *http.Client { return hubClient }, h.Token)
	t1, h1 := openTunnels(), hubMem()
	viaDirect := open(func(i int) string { return strings.TrimSuffix(clusters[i%nclusters].Config.Host, "/") + paths[i] },
		func(i int) *http.Client { return directs[i%nclusters] }, "")
	// The seed API route keeps a tunnel per seed from the agents' checks above open and idle; the first watch of a
	// seed may take it. Per watch: the hub's growth over the 1,000 watches; per tunnel: over the tunnels they added.
	tunnels := t1 - t0
	watchReport := map[string]any{"watches": total, "seedAPITunnelsBefore": t0, "seedAPITunnelsAfter": t1,
		"hubRSSBeforeKiB": h0.RSSKiB, "hubRSSAfterKiB": h1.RSSKiB, "hubPerWatch": h1.minus(h0).per(int64(total))}
	if tunnels > 0 {
		watchReport["hubPerAddedTunnel"] = h1.minus(h0).per(tunnels)
	}
	report["watches"] = watchReport

	// 3. Events: each seed's ten ConfigMaps created at once (all seeds in parallel, 20 creates at a time), then the
	// delay of each at each watch and how long until every watch had all of them.
	start = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	for e := range agentEvents {
		for i := range agents {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				name := fmt.Sprintf("%s-e%02d", seed(i), e)
				sent.Store(name, time.Now())
				if _, err := clusters[i%nclusters].Client.CoreV1().ConfigMaps(ns(i)).Create(ctx,
					&kcorev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	created := time.Since(start)
	// all waits until every watch of ws has its seed's events (at most 60 s) and returns their delays and how many
	// watches fell short.
	all := func(ws [][]*watchDelays) (delays []time.Duration, short int) {
		deadline := time.Now().Add(60 * time.Second)
		for _, seedWatches := range ws {
			for _, w := range seedWatches {
				for w.count() < agentEvents && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				d := w.all()
				if len(d) < agentEvents {
					short++
				}
				delays = append(delays, d...)
			}
		}
		return delays, short
	}
	hd, hshort := all(viaHub)
	dd, dshort := all(viaDirect)
	if hshort > 0 || dshort > 0 {
		t.Errorf("watches without all %d events of their seed: %d of %d through the hub, %d of %d direct", agentEvents, hshort, total, dshort, total)
	}
	ev := map[string]any{"eventsPerSeed": agentEvents, "created": agents * agentEvents, "createdIn": created.Round(time.Millisecond).String(),
		"deliveredThroughHub": len(hd), "deliveredDirect": len(dd)}
	if len(hd) > 0 && len(dd) > 0 {
		hs, ds := percentiles(hd), percentiles(dd)
		hmax, dmax := maxDuration(hd), maxDuration(dd)
		ev["hubP50"], ev["hubP99"], ev["hubMax"] = hs.P50.String(), hs.P99.String(), hmax.String()
		ev["directP50"], ev["directP99"], ev["directMax"] = ds.P50.String(), ds.P99.String(), dmax.String()
		ev["overheadP50"], ev["overheadP99"] = (hs.P50 - ds.P50).String(), (hs.P99 - ds.P99).String()
		// The creates are spread over createdIn; a watch's deliveries end at most its max delay after the last
		// create. Events per second: deliveries over (createdIn + max delay).
		ev["hubEventsPerSecond"] = int(float64(len(hd)) / (created + hmax).Seconds())
		ev["directEventsPerSecond"] = int(float64(len(dd)) / (created + dmax).Seconds())
	}
	report["events"] = ev
	cancel()
	report["loadavgAfter"] = loadavg()
	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("tunnel agents benchmark:\n%s", out)
	_ = os.MkdirAll("../../../bin/bench", 0o755)
	_ = os.WriteFile("../../../bin/bench/tunnel-agents.json", out, 0o644)
}

// hubTunnelsOpen is the hub's trellis_tunnel_open gauge of kind, from its /metrics.
func hubTunnelsOpen(t *testing.T, h *binproc.Hub, kind string) int64 {
	code, body, err := h.Do(context.Background(), http.MethodGet, "/metrics", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("hub metrics: %d %v", code, err)
	}
	prefix := `trellis_tunnel_open{kind="` + kind + `"} `
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("hub metrics: %q: %v", l, err)
			}
			return int64(f)
		}
	}
	return 0
}

func maxDuration(d []time.Duration) time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

// loadavg is /proc/loadavg.
func loadavg() string {
	la, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(la))
}
