package agent_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/agenttest"
)

// get fetches http://addr+path and returns the status code and body; 0 when the request failed.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Logf("GET %s: %v", path, err)
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestEndpointsFollowTheLink: the agent's /readyz answers 503 until the link is up and the initial state arrived,
// 503 again while the link is cut (the proxy refuses it), and 200 after it healed; /healthz stays 200 throughout;
// /metrics reports the link's state and its sessions, and client-go's request metrics of the seed client.
func TestEndpointsFollowTheLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config(t)
	cfg.Server.Metrics = "localhost:0" // not the probes' address: a listener of its own
	ta := agenttest.StartAgent(t, cfg)
	ctx := context.Background()
	probes, metrics := ta.HealthProbesAddr(ctx), ta.MetricsAddr(ctx)
	if probes == metrics {
		t.Fatalf("probes and metrics share %s, want two listeners", probes)
	}
	agenttest.Eventually(t, "ready", func() bool { code, _ := get(t, probes, "/readyz"); return code == 200 })
	if code, _ := get(t, probes, "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	code, m := get(t, metrics, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d: %s", code, m)
	}
	for _, want := range []string{"trellis_agent_link_connected 1", "trellis_agent_link_sessions_total 1",
		"trellis_agent_cache_synced 1", "trellis_agent_assignment_lag_seconds_count", "rest_client_requests_total"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Cut: the proxy goes nowhere and drops what it carries.
	target := e.proxy.Target()
	e.proxy.SetTarget(closedAddr(t))
	e.proxy.CutAll()
	agenttest.Eventually(t, "unready while cut", func() bool {
		code, body := get(t, probes, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "agent link to the hub is down")
	})
	if code, _ := get(t, probes, "/healthz"); code != 200 {
		t.Fatalf("/healthz while cut = %d", code)
	}
	if _, m := get(t, metrics, "/metrics"); !strings.Contains(m, "trellis_agent_link_connected 0") {
		t.Error("/metrics while cut lacks trellis_agent_link_connected 0")
	}

	// Healed.
	e.proxy.SetTarget(target)
	agenttest.Eventually(t, "ready again", func() bool { code, _ := get(t, probes, "/readyz"); return code == 200 })
	if _, m := get(t, metrics, "/metrics"); !strings.Contains(m, "trellis_agent_link_sessions_total 2") {
		t.Errorf("/metrics after the reconnect lacks trellis_agent_link_sessions_total 2")
	}
}
