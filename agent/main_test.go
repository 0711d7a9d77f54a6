package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	"github.com/trellis-dev/trellis/test/faultproxy"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run agents against real parts: a hub (hubtest: embedded etcd, the agent link, CSR approval, the seed
// authorizer) reached through a TCP proxy that can cut and black-hole the link (test/faultproxy), and one seed
// kube-apiserver shared by the package (seedtest), where each test keeps its kubeconfig Secret in a namespace of its
// own. Every test starts its own hub.
func TestMain(m *testing.M) { seedtest.Main(m) }

const (
	// hubHeartbeat is the hubs' heartbeat interval; the agents are configured with 1 s and adopt the hub's shorter one.
	hubHeartbeat = 500 * time.Millisecond
	// waitTimeout bounds every wait for a condition.
	waitTimeout = 20 * time.Second
)

// seedConfigYAML is the agent configuration's seedConfig, as an operator writes it.
const seedConfigYAML = `
apiVersion: agent.trellis.dev/v1alpha1
kind: AgentConfiguration
seedConfig:
  metadata:
    name: local
    labels:
      base: test
  spec:
    provider:
      type: local
      region: local
    ingress:
      domain: ingress.local.seed.example.com
      controller:
        kind: nginx
    dns:
      provider:
        type: local
        credentialsRef:
          apiVersion: v1
          kind: Secret
          name: internal-domain
          namespace: garden
    networks:
      nodes: 172.18.0.0/16
      pods: 10.1.0.0/16
      services: 10.2.0.0/16
`

// env is one test's hub, the shared seed and the proxy between agents and the hub.
type env struct {
	hub     *hubtest.Hub
	seed    *seedtest.Seed
	proxy   *faultproxy.Proxy // agents reach the hub through it
	ns      string            // the namespace of the agents' kubeconfig Secret in the seed
	token   string            // a bootstrap token for seed "local", valid for an hour
	hubLogs *logSink
}

// newEnv starts a hub (heartbeat interval hubHeartbeat; mutate may change its configuration), a proxy to it, a
// namespace in the shared seed and a bootstrap token.
func newEnv(t *testing.T, mutate ...func(*hub.Config)) *env {
	t.Helper()
	e := openEnv(t)
	e.startHub(t, mutate...)
	e.proxy.SetTarget(e.hub.GRPCAddr())
	e.token = e.bootstrapToken(t, time.Now().Add(time.Hour))
	return e
}

// openEnv returns an environment without a hub: a namespace in the shared seed and a proxy that goes nowhere yet.
func openEnv(t *testing.T) *env {
	t.Helper()
	e := &env{seed: seedtest.StartShared(t), hubLogs: newLogSink()}
	e.ns = e.seed.Namespace(t)
	p, err := faultproxy.Listen(closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	e.proxy = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hub log:\n%s", e.hubLogs)
		}
	})
	return e
}

// startHub starts a hub that runs until t ends and makes it e.hub; the proxy keeps its target.
func (e *env) startHub(t *testing.T, mutate ...func(*hub.Config)) {
	t.Helper()
	e.hub = hubtest.Start(t, append([]func(*hub.Config){func(c *hub.Config) {
		c.HeartbeatInterval = hubHeartbeat
		c.Logger = slog.New(e.hubLogs)
	}}, mutate...)...)
}

// closedAddr is a loopback address nobody listens on: connections to it are refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// bootstrapToken stores a bootstrap token for seed "local" in the hub and returns it.
func (e *env) bootstrapToken(t *testing.T, expiration time.Time) string {
	t.Helper()
	tok, err := auth.NewSeedBootstrapToken("local", expiration)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.coll(t, "", "secrets").Create(context.Background(), tok.SecretObject()); err != nil {
		t.Fatal(err)
	}
	return tok.Token()
}

// config is the configuration of an agent for seed "local": the hub through the proxy (and its CA, if it runs), the
// bootstrap token, the kubeconfig Secret in the test's namespace, 1 s heartbeats and fast reconnects.
func (e *env) config(t *testing.T) *config.AgentConfiguration {
	t.Helper()
	cfg, err := config.Decode([]byte(seedConfigYAML))
	if err != nil {
		t.Fatal(err)
	}
	d := func(v time.Duration) *metav1k.Duration { return &metav1k.Duration{Duration: v} }
	cfg.HubClientConnection = config.HubClientConnection{
		Address: e.proxy.Addr(), BootstrapToken: e.token,
		KubeconfigSecret: config.SecretReference{Namespace: e.ns, Name: "gardenlet-kubeconfig"},
	}
	if e.hub != nil {
		cfg.HubClientConnection.CABundle = string(e.hub.CA)
	}
	cfg.SeedClientConnection.Kubeconfig = e.seed.KubeconfigPath
	cfg.HeartbeatIntervalSeconds = 1
	// The link tests' shoots have no extensions to reconcile them; the shoot tests turn the controllers on.
	cfg.Controllers.Disabled = true
	cfg.ReconnectBackoff = config.ReconnectBackoff{InitialDelay: d(10 * time.Millisecond), MaxDelay: d(200 * time.Millisecond)}
	return cfg
}

func (e *env) coll(t *testing.T, group, resource string) *store.Collection {
	t.Helper()
	c, ok := e.hub.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		t.Fatalf("the hub serves no %s.%s", resource, group)
	}
	return c
}

// create stores objects in the hub.
func (e *env) create(t *testing.T, objs ...store.Object) {
	t.Helper()
	for _, o := range objs {
		gvk := strings.SplitN(o.(interface{ GetApiVersion() string }).GetApiVersion(), "/", 2)
		group := ""
		if len(gvk) == 2 {
			group = gvk[0]
		}
		kind := o.(interface{ GetKind() string }).GetKind()
		if _, err := e.coll(t, group, strings.ToLower(kind)+"s").Create(context.Background(), o); err != nil {
			t.Fatalf("create %s %s: %v", kind, o.GetMetadata().GetName(), err)
		}
	}
}

// rv is the resourceVersion of an object in the hub, as the agent's cache spells it; 0 when it does not exist.
func (e *env) rv(t *testing.T, group, resource, namespace, name string) int64 {
	t.Helper()
	o, err := e.coll(t, group, resource).Get(context.Background(), namespace, name)
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(o.GetMetadata().GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// csrs lists the hub's CertificateSigningRequests.
func (e *env) csrs(t *testing.T) []*certificatesv1.CertificateSigningRequest {
	t.Helper()
	res, err := e.coll(t, "certificates.k8s.io", "certificatesigningrequests").List(context.Background(), "", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*certificatesv1.CertificateSigningRequest, 0, len(res.Items))
	for _, o := range res.Items {
		out = append(out, o.(*certificatesv1.CertificateSigningRequest))
	}
	return out
}

// hubSessions is the seeds with a session in the hub.
func (e *env) hubSessions() []string { return e.hub.AgentLink().Sessions() }

// metric reads a sample of the hub's /metrics, e.g. `trellis_agentlink_etcd_writes_total{purpose="presence"}`.
func (e *env) metric(t *testing.T, sample string) float64 {
	t.Helper()
	code, body := e.hub.Do(t, "GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// secret is the agent's kubeconfig Secret in the seed.
func (e *env) secret(t *testing.T, namespace string) *corev1.Secret {
	t.Helper()
	sec, err := e.seed.Client.CoreV1().Secrets(namespace).Get(context.Background(), "gardenlet-kubeconfig", metav1k.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// storedCredentials parses the kubeconfig Secret in the test's namespace.
func (e *env) storedCredentials(t *testing.T) *identity.Credentials {
	t.Helper()
	c, err := identity.ParseKubeconfig(e.secret(t, e.ns).Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testAgent is a running agent and its log.
type testAgent struct {
	*agent.Agent
	logs *logSink
	stop func()
}

// startAgent runs an agent with cfg until Stop or the end of the test; mutate may adjust its agent.Config.
func startAgent(t *testing.T, cfg *config.AgentConfiguration, mutate ...func(*agent.Config)) *testAgent {
	t.Helper()
	ta := &testAgent{logs: newLogSink()}
	c := agent.Config{Configuration: cfg, Logger: slog.New(ta.logs), Version: "test"}
	for _, m := range mutate {
		m(&c)
	}
	a, err := agent.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ta.Agent = a
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", ta.logs)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	ta.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Error("the agent did not stop")
			}
		})
	}
	t.Cleanup(ta.stop)
	return ta
}

// Stop stops the agent and waits for Run to return.
func (ta *testAgent) Stop() { ta.stop() }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logSink is a slog.Handler that keeps every record, for assertions on what the agent or hub logged and for the
// log of a failed test. With -v and TRELLIS_TEST_LOGS set the records also go to stderr.
type logSink struct {
	mu     *sync.Mutex
	recs   *[]logRecord
	attrs  []slog.Attr
	stderr slog.Handler
}

type logRecord struct {
	time  time.Time
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func newLogSink() *logSink {
	s := &logSink{mu: &sync.Mutex{}, recs: &[]logRecord{}}
	if testing.Verbose() && os.Getenv("TRELLIS_TEST_LOGS") != "" {
		s.stderr = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return s
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(ctx context.Context, r slog.Record) error {
	rec := logRecord{time: r.Time, level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	for _, a := range s.attrs {
		rec.attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	s.mu.Lock()
	*s.recs = append(*s.recs, rec)
	s.mu.Unlock()
	if s.stderr != nil {
		return s.stderr.Handle(ctx, r)
	}
	return nil
}

func (s *logSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *s
	c.attrs = append(append([]slog.Attr(nil), s.attrs...), attrs...)
	if s.stderr != nil {
		c.stderr = s.stderr.WithAttrs(attrs)
	}
	return &c
}

func (s *logSink) WithGroup(string) slog.Handler { return s } // nobody logs groups here

// records returns the records with message msg (all with msg "").
func (s *logSink) records(msg string) []logRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logRecord
	for _, r := range *s.recs {
		if msg == "" || r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// String is the log as text, at most its last 500 records.
func (s *logSink) String() string {
	recs := s.records("")
	if len(recs) > 500 {
		recs = recs[len(recs)-500:]
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %q", r.time.Format("15:04:05.000"), r.level, r.msg)
		for _, k := range slices.Sorted(maps.Keys(r.attrs)) {
			fmt.Fprintf(&b, " %s=%q", k, r.attrs[k].String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
