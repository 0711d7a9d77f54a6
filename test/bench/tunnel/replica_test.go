package tunnel_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// TestTunnelReplicaBench: what a tunnel costs when the client reaches another hub replica than the one holding the
// seed's agent's session (docs/tunnels.md, "Hub replicas"). Two replicas share one etcd; the agent has its session
// with the first. 100 MB streams through the first replica's SNI listener, through the second's (forwarded to the
// first: one more relay) and directly, in turn; then seed API GETs through each replica. Results in
// bin/bench/tunnel-replica.json.
func TestTunnelReplicaBench(t *testing.T) {
	if os.Getenv("TRELLIS_BENCH") == "" {
		t.Skip("a benchmark: make bench-tunnel")
	}
	endpoint := storetest.StartEtcd(t)
	keys := filepath.Join(t.TempDir(), "encryption-keys")
	shared := func(c *hub.Config) { c.EtcdEndpoints, c.EncryptionKeyFile = []string{endpoint}, keys }
	a, _, targetAddr, targetTLS, sni := startBench(t, shared)
	bDir := t.TempDir() // replica b serves the admin token that replica a stored
	if err := os.WriteFile(filepath.Join(bDir, "admin-token"), []byte(a.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := agenttest.StartHub(t, func(c *hub.Config) {
		c.TunnelListen, c.DataDir, c.TunnelMaxPerSeed, c.TunnelMaxPerClient = "127.0.0.1:0", bDir, 10*idle, 10*idle
		shared(c)
	})
	agenttest.Eventually(t, "replica b finds the agent's session in replica a, and the shoot", func() bool {
		addr, err := b.AgentLink().TunnelPeer(t.Context(), "local")
		code, _ := b.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/bench", nil)
		return err == nil && addr == a.TunnelAddr() && code == 200
	})

	// Streams, in turn: through a, through b, direct.
	routes := []struct{ name, listener string }{{"agentsReplica", a.TunnelAddr()}, {"otherReplica", b.TunnelAddr()}, {"direct", ""}}
	rates := map[string][]float64{}
	cpu := map[string][]float64{}
	for range streamCount() {
		for _, r := range routes {
			cpu0 := cpuTime()
			mibps, mib := streamOnce(t, dialVia(t, r.listener, sni, targetAddr, targetTLS))
			rates[r.name] = append(rates[r.name], mibps)
			cpu[r.name] = append(cpu[r.name], float64((cpuTime()-cpu0).Microseconds())/mib/1000)
		}
	}
	report := map[string]any{"streams": streamCount(), "loadavg": loadavg()}
	for _, r := range routes {
		report["throughput100MB/"+r.name] = map[string]any{"medianMiBps": median(rates[r.name]), "medianCPUmsPerMiB": fmt.Sprintf("%.2f", medianFloat(cpu[r.name]))}
	}
	var viaA, viaB []float64
	for i := range rates["direct"] {
		viaA = append(viaA, rates["agentsReplica"][i]/rates["direct"][i])
		viaB = append(viaB, rates["otherReplica"][i]/rates["direct"][i])
	}
	report["ratioToDirect/agentsReplica"] = fmt.Sprintf("%.0f%%", 100*medianFloat(viaA))
	report["ratioToDirect/otherReplica"] = fmt.Sprintf("%.0f%%", 100*medianFloat(viaB))

	// Seed API GETs through each replica (b forwards the tunnels to a over TLS between the replicas; its transport
	// keeps them open, as a's does).
	get := func(h *agenttest.Hub) time.Duration {
		req, _ := http.NewRequest("GET", h.URL+tunnel.SeedAPIPath("local")+"/api/v1/namespaces/default", nil)
		req.Header.Set("Authorization", "Bearer "+h.Token)
		start := time.Now()
		resp, err := h.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("seed API through %s: %d", h.URL, resp.StatusCode)
		}
		return time.Since(start)
	}
	var getA, getB []time.Duration
	for i := range requests/4 + 100 {
		da, db := get(a), get(b)
		if i >= 100 {
			getA, getB = append(getA, da), append(getB, db)
		}
	}
	sa, sb := percentiles(getA), percentiles(getB)
	report["seedAPI"] = map[string]any{"requests": len(getA), "agentsReplicaP50": sa.P50.String(), "agentsReplicaP99": sa.P99.String(),
		"otherReplicaP50": sb.P50.String(), "otherReplicaP99": sb.P99.String(),
		"forwardOverheadP50": (sb.P50 - sa.P50).String(), "forwardOverheadP99": (sb.P99 - sa.P99).String()}

	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("tunnel replica benchmark:\n%s", out)
	_ = os.MkdirAll("../../../bin/bench", 0o755)
	_ = os.WriteFile("../../../bin/bench/tunnel-replica.json", out, 0o644)
}

// medianFloat is the median of v.
func medianFloat(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
