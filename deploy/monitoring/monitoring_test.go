package monitoring_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/flow"
	"github.com/trellis-dev/trellis/agent/keyqueue"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// exported collects the metric names the code exports: a started hub's /metrics, a started agent's /metrics (after
// a flow ran one failing task, so that the flow's labelled metrics exist), and the embedded etcd's metrics, which
// etcd registers in this process's default registry (an external etcd serves the same names on its /metrics).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	addText := func(what string, text []byte) {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(text)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for n := range fams {
			names[n] = true
		}
	}
	h := hubtest.Start(t)
	// A REST and a gRPC call, so that the request metrics have series.
	h.Do(t, "GET", "/api/v1/namespaces", nil)
	if _, err := corev1beta1.NewProjectServiceClient(h.GRPC(t)).List(context.Background(), &metav1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if code, body := h.Do(t, "GET", "/metrics", nil); code != 200 {
		t.Fatalf("hub /metrics: %d", code)
	} else {
		addText("hub", body)
	}

	// An agent whose hub and seed are unreachable still serves its metrics.
	cfg, err := config.Decode([]byte("apiVersion: agent.trellis.dev/v1alpha1\nkind: AgentConfiguration\nhubClientConnection:\n  address: 127.0.0.1:1\n  bootstrapToken: abcdef.0123456789abcdef\nseedConfig:\n  metadata:\n    name: local\n  spec:\n    provider:\n      type: local\n      region: local\n    ingress:\n      domain: ingress.local.example.com\n    dns:\n      provider:\n        type: local\n    networks:\n      pods: 10.1.0.0/16\n      services: 10.2.0.0/16\ncontrollers:\n  disabled: true\nserver:\n  healthProbes: 127.0.0.1:0\n  metrics: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	seedClient, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Configuration: cfg, SeedClient: seedClient})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	q := keyqueue.New(keyqueue.Config{Name: "check"}) // a controller's queue, for the workqueue metrics
	defer q.ShutDown()
	g := flow.New("check")
	g.Add(flow.Task{Name: "fail", Fn: func(context.Context) error { return flow.Permanent(errors.New("no")) }})
	_ = g.Run(ctx, flow.Opts{})
	waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	addr := a.MetricsAddr(waitCtx)
	if addr == "" {
		t.Fatal("the agent's metrics did not start")
	}
	// The seed client's request metrics have series once the agent sent its first request (to the unreachable seed),
	// which a loaded machine may not have done yet.
	body := httpGet(t, "http://"+addr+"/metrics")
	for !strings.Contains(string(body), "rest_client_requests_total") && waitCtx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		body = httpGet(t, "http://"+addr+"/metrics")
	}
	addText("agent", body)

	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "etcd_") {
			names[f.GetName()] = true
		}
	}
	return names
}

// metricNames are the metric names expr selects; it fails the test when expr does not parse.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var out []string
	for _, vs := range parser.ExtractSelectors(e) {
		for _, m := range vs {
			if m.Name == "__name__" {
				out = append(out, m.Value)
			}
		}
	}
	return out
}

// known reports whether n is exported, or is a series of an exported histogram or summary (x_bucket, x_sum and
// x_count of x).
func known(names map[string]bool, n string) bool {
	if names[n] {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(n, suf) && names[strings.TrimSuffix(n, suf)] {
			return true
		}
	}
	return false
}

func TestAlertsAndDashboards(t *testing.T) {
	names := exported(t)

	rules, _ := filepath.Glob("alerts/*.yaml")
	if len(rules) == 0 {
		t.Fatal("no alert rules")
	}
	alerts := 0
	for _, f := range rules {
		groups, errs := rulefmt.ParseFile(f, false)
		for _, err := range errs {
			t.Errorf("%s: %v", f, err)
		}
		if groups == nil {
			continue
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				alerts++
				for _, n := range metricNames(t, f+" "+r.Alert, r.Expr) {
					if !known(names, n) {
						t.Errorf("%s: alert %s uses %s, which nothing exports", f, r.Alert, n)
					}
				}
			}
		}
	}
	if alerts < 4 {
		t.Errorf("%d alerts, want at least the four of the issue", alerts)
	}

	boards, _ := filepath.Glob("dashboards/*.json")
	if len(boards) == 0 {
		t.Fatal("no dashboards")
	}
	for _, f := range boards {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var used []string
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, tg := range p.Targets {
				for _, n := range metricNames(t, f+" "+p.Title, tg.Expr) {
					used = append(used, n)
					if !known(names, n) {
						t.Errorf("%s: panel %q uses %s, which nothing exports", f, p.Title, n)
					}
				}
			}
		}
		slices.Sort(used)
		t.Logf("%s: %d panels, metrics %v", f, len(d.Panels), slices.Compact(used))
	}
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return b
}
