package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/faultproxy"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/timescale"
	"github.com/trellis-dev/trellis/tracing/tracingtest"
)

// auditEverything logs every request with its request and response bodies: the audit log must still leave out
// secrets' data.
const auditEverything = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
`

// TestOperated: on a landscape of real binaries whose hub, agent and provider-local export traces (100 % sampling)
// to an OTLP receiver in the test, a shoot created through the REST API yields one trace with spans of all three
// processes — the hub's store write, the agent's shoot operation and its flow's tasks, provider-local's reconciles
// of the extension objects —; the hub's audit log (kube-apiserver's flags, a policy asking for request and response
// bodies) has the create with its user and the 201, and a read of a secret without its data; and the agent, whose
// link to the hub goes through a proxy, turns unready on its /readyz while the proxy cuts the link and ready again
// after.
func TestOperated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries")
	}
	lightTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(4*time.Minute))
	defer cancel()
	rcv := tracingtest.Start(t)
	dir := t.TempDir()
	policyFile, auditLog := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policyFile, []byte(auditEverything), 0o600); err != nil {
		t.Fatal(err)
	}
	tracingFlags := []string{"--tracing", "--tracing-endpoint", rcv.Addr, "--tracing-insecure"}
	link, err := faultproxy.Listen("127.0.0.1:1") // the agent's link to the hub, pointed at the hub below
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = link.Close() })
	l := startLandscape(ctx, t, landscape.Config{
		RequireProviderLocal: true,
		HubArgs:              append([]string{"--audit-policy-file", policyFile, "--audit-log-path", auditLog}, tracingFlags...),
		ProviderLocalArgs:    tracingFlags,
		AgentMutate: func(_ string, c *config.AgentConfiguration) {
			c.Tracing = config.Tracing{Enabled: true, Endpoint: rcv.Addr, Insecure: true}
			link.SetTarget(c.HubClientConnection.Address)
			c.HubClientConnection.Address = link.Addr()
		},
	})
	r := newREST(t, l)
	shoot := r.examples()
	r.must(http.StatusCreated, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots", shoot)
	_, took := r.waitShoot("the shoot to be created", 2*time.Minute, succeededAt(0))
	t.Logf("shoot create → Succeeded in %v", took.Round(time.Millisecond))
	r.must(http.StatusOK, http.MethodGet, "/api/v1/namespaces/garden-local/secrets/local", nil)

	t.Run("audit", func(t *testing.T) {
		events := readAuditLog(t, auditLog)
		var created, secretRead *auditv1.Event
		for i, e := range events {
			ref := e.ObjectRef
			switch {
			case ref == nil || e.Stage != auditv1.StageResponseComplete:
			case e.Verb == "create" && ref.Resource == "shoots" && ref.Name == "e2e":
				created = &events[i]
			case e.Verb == "get" && ref.Resource == "secrets" && ref.Namespace == "garden-local" && ref.Name == "local":
				secretRead = &events[i]
			}
		}
		if created == nil || created.User.Username == "" || created.ResponseStatus == nil || created.ResponseStatus.Code != http.StatusCreated ||
			created.RequestObject == nil || created.AuditID == "" {
			t.Errorf("the shoot's create in the audit log: %+v", created)
		}
		if secretRead == nil || secretRead.User.Username == "" || secretRead.ResponseStatus == nil || secretRead.ResponseStatus.Code != http.StatusOK {
			t.Errorf("the secret's read in the audit log: %+v", secretRead)
		} else if secretRead.ResponseObject != nil || secretRead.Level != auditv1.LevelMetadata {
			t.Errorf("the secret's read is logged at %s with response %s: want Metadata, without its data", secretRead.Level, secretRead.ResponseObject.Raw)
		}
		raw, err := os.ReadFile(auditLog)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "bG9jYWw=") { // the example secret's data
			t.Error("the audit log holds the secret's data")
		}
	})

	t.Run("readyz", func(t *testing.T) {
		m := regexp.MustCompile(`healthProbes=(\S+)`).FindStringSubmatch(binproc.TailLines(filepath.Join(l.LogDir, "agent-local.log"), 100000))
		if m == nil {
			t.Fatal("the agent's log names no health probes address")
		}
		readyz := func() int {
			res, err := http.Get("http://" + m[1] + "/readyz")
			if err != nil {
				return 0
			}
			_ = res.Body.Close()
			return res.StatusCode
		}
		wait := func(what string, want int) {
			t.Helper()
			deadline := time.Now().Add(timescale.Scale(time.Minute))
			for readyz() != want {
				if time.Now().After(deadline) {
					t.Fatalf("/readyz not %d within a minute: %s", want, what)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		wait("connected", http.StatusOK)
		target := link.Target()
		link.SetTarget("127.0.0.1:1") // nothing listens there
		link.CutAll()
		wait("while the link is cut", http.StatusServiceUnavailable)
		link.SetTarget(target)
		wait("after the link healed", http.StatusOK)
	})

	// Stopping the processes flushes their exporters.
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	create, ok := rcv.Find("github.com/trellis-dev/trellis/hub/store", "store.Create shoots.core.gardener.cloud")
	if !ok || create.Service != "trellis-hub" {
		t.Fatalf("no store.Create span of the shoot by trellis-hub among %d spans", len(rcv.Spans()))
	}
	byService := map[string][]string{}
	for _, s := range rcv.Trace(create) {
		byService[s.Service] = append(byService[s.Service], s.Scope+" "+s.GetName())
	}
	for service, names := range byService {
		t.Logf("the create's trace: %s: %d spans", service, len(names))
	}
	for service, want := range map[string]string{
		"trellis-hub":    "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp POST",
		"trellis-agent":  "github.com/trellis-dev/trellis/agent/shoot shoot reconcile",
		"provider-local": "github.com/trellis-dev/trellis/extsdk/controller reconcile infrastructure shoot--local--e2e/e2e",
	} {
		if !slices.Contains(byService[service], want) {
			t.Errorf("the create's trace lacks %q of %s: %v", want, service, byService[service])
		}
	}
	if t.Failed() {
		// Whether the spans are missing or in another trace: the create's spans by name, every store.Create of shoots
		// with its trace, and every trace with its spans per service.
		t.Logf("the create's trace %x: %v", create.GetTraceId(), byService)
		// Then where the agent's flow got its trace: its span's parent, and the roots of its trace (spans whose parent
		// was not received).
		spans := rcv.Spans()
		traces := map[string]map[string]int{}
		byID := map[string]tracingtest.Span{}
		var flows []tracingtest.Span
		for _, s := range spans {
			if s.Scope == create.Scope && s.GetName() == create.GetName() {
				t.Logf("%s in trace %x, span %x, parent %x, status %v", s.GetName(), s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId(), s.GetStatus())
			}
			id := fmt.Sprintf("%x", s.GetTraceId())
			if traces[id] == nil {
				traces[id] = map[string]int{}
			}
			traces[id][s.Service]++
			byID[string(s.GetSpanId())] = s
			if s.Service == "trellis-agent" && s.GetName() == "shoot reconcile" {
				flows = append(flows, s)
			}
		}
		for id, services := range traces {
			t.Logf("trace %s: %v", id, services)
		}
		for _, s := range flows {
			parent, ok := byID[string(s.GetParentSpanId())]
			t.Logf("the agent's %q in trace %x, parent %x (received: %v %s %s), start %d", s.GetName(), s.GetTraceId(),
				s.GetParentSpanId(), ok, parent.Service, parent.GetName(), s.GetStartTimeUnixNano())
			for _, r := range spans {
				if _, ok := byID[string(r.GetParentSpanId())]; !ok && string(r.GetTraceId()) == string(s.GetTraceId()) {
					t.Logf("  root of that trace: %s %s %s, parent %x, start %d", r.Service, r.Scope, r.GetName(), r.GetParentSpanId(), r.GetStartTimeUnixNano())
				}
			}
		}
		t.Logf("the create's store.Create started at %d", create.GetStartTimeUnixNano())
	}
}

// readAuditLog reads the events of an audit log file.
func readAuditLog(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
