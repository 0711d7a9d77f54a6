package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/tracing"
	"github.com/trellis-dev/trellis/tracing/tracingtest"
)

// TestShootCreateIsOneTrace: with tracing on (100 % sampling, exported over OTLP gRPC to a receiver in the test), a
// shoot created through the hub's REST API yields one trace that holds the hub's store write of the shoot, the
// agent's shoot operation (continued from the assignment's traceparent), the flow's tasks, and the extensions'
// reconciles (continued from the trellis.dev/traceparent annotation the agent set). The reconcile of the sync
// period after it starts a trace of its own. Hub, agent and extensions run in this process, so they share the
// exporter; the spans' instrumentation scopes tell them apart.
//
// Not parallel: the TracerProvider is process-wide (and the package's tracers follow only the first one set, so
// -count above 1 does not work for this test).
func TestShootCreateIsOneTrace(t *testing.T) {
	rcv := tracingtest.Start(t)
	stop, err := tracing.Setup(context.Background(), tracing.Config{Enabled: true, ServiceName: "test", Endpoint: rcv.Addr, Insecure: true, SamplingRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	flush := func() {
		if !stopped {
			stopped = true
			if err := stop(context.Background()); err != nil {
				t.Errorf("tracing shutdown: %v", err)
			}
			otel.SetTracerProvider(noop.NewTracerProvider())
		}
	}
	t.Cleanup(flush)

	e := newEnv(t)
	shoot := flowShoot("traced")
	e.hub.Store(t, flowFixtures()...)
	e.hub.Store(t, agentsim.Secret(flowNamespace, "traced"), agentsim.SecretBinding(flowNamespace, "traced"))
	cfg := e.shootConfig(t)
	cfg.Controllers.Shoot.SyncPeriod = &metav1k.Duration{Duration: 2 * time.Second}
	ta := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "the agent installed the CRDs", func() bool { return ta.Status().CRDsInstalled })
	agenttest.Eventually(t, "the seed is registered", func() bool { return ta.Status().SeedRegistered })
	startStubExtension(t, e)
	e.createShoot(t, shoot)
	// From the agent's log, not the shoot's lastOperation: the reconciles that follow (the sync period's, the hub's
	// maintenance) overwrite it within moments.
	flowSucceeded := func(typ string) bool {
		for _, r := range ta.Logs.Records("flow succeeded") {
			if r.Attrs["type"].String() == typ && strings.HasSuffix(r.Attrs["shoot"].String(), "/traced") {
				return true
			}
		}
		return false
	}
	agenttest.Eventually(t, "the shoot is created", func() bool { return flowSucceeded("Create") })
	agenttest.Eventually(t, "a reconcile after the create succeeded", func() bool { return flowSucceeded("Reconcile") })
	// The operation's span ends after it reported its outcome: stop the agent (its flows return, their spans end)
	// before the exporter's last flush.
	ta.Stop()
	flush()

	spans := rcv.Spans()
	create, ok := rcv.Find("github.com/trellis-dev/trellis/hub/store", "store.Create shoots.core.gardener.cloud")
	if !ok {
		t.Fatalf("no store.Create span of the shoot among %d spans", len(spans))
	}
	byScope := map[string][]string{}
	for _, s := range rcv.Trace(create) {
		byScope[s.Scope] = append(byScope[s.Scope], s.GetName())
	}
	t.Logf("the create's trace: %v", byScope)
	for scope, want := range map[string]string{
		"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp": "POST",
		"github.com/trellis-dev/trellis/agent/shoot":                    "shoot reconcile",
		"github.com/trellis-dev/trellis/agent/flow":                     "",
		"github.com/trellis-dev/trellis/extsdk/controller":              "",
	} {
		names := byScope[scope]
		if len(names) == 0 || want != "" && !slices.Contains(names, want) {
			t.Errorf("the create's trace lacks spans of %s (want %q): %v", scope, want, names)
		}
	}
	var ownTrace int
	for _, s := range spans {
		if s.Scope == "github.com/trellis-dev/trellis/agent/shoot" && string(s.GetTraceId()) != string(create.GetTraceId()) {
			ownTrace++
		}
	}
	if n := len(byScope["github.com/trellis-dev/trellis/agent/shoot"]); n == 0 || ownTrace == 0 {
		t.Errorf("%d shoot operations in the create's trace and %d in traces of their own: want the create (with its retries) in it, the reconciles after it outside", n, ownTrace)
	}
	if len(byScope["github.com/trellis-dev/trellis/agent/flow"]) < 5 {
		t.Errorf("the flow's spans in the trace: %v, want one per task", byScope["github.com/trellis-dev/trellis/agent/flow"])
	}
	if t.Failed() { // every span but the store's, to see where the trace broke
		for _, s := range spans {
			if s.Scope != "github.com/trellis-dev/trellis/hub/store" {
				t.Logf("span %s %q trace %x parent %x", s.Scope, s.GetName(), s.GetTraceId(), s.GetParentSpanId())
			}
		}
	}
}
