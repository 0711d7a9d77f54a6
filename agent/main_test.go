package agent_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/store"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/faultproxy"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run agents against real parts: a hub (hubtest: embedded etcd, the agent link, CSR approval, the seed
// authorizer) reached through a TCP proxy that can cut and black-hole the link (test/faultproxy), and one seed
// kube-apiserver shared by the package (seedtest), where each test keeps its kubeconfig Secret in a namespace of its
// own. Every test starts its own hub.
func TestMain(m *testing.M) { seedtest.Main(m) }

// env is one test's hub, the shared seed and the proxy between agents and the hub.
type env struct {
	hub     *agenttest.Hub
	seed    *seedtest.Seed
	proxy   *faultproxy.Proxy // agents reach the hub through it
	ns      string            // the namespace of the agents' kubeconfig Secret in the seed
	token   string            // a bootstrap token for seed "local", valid for an hour
	hubLogs *agenttest.LogSink
}

// newEnv starts a hub (heartbeat interval agenttest.HubHeartbeat; mutate may change its configuration), a proxy to
// it, a namespace in the shared seed and a bootstrap token.
func newEnv(t *testing.T, mutate ...func(*hub.Config)) *env {
	t.Helper()
	e := openEnv(t)
	e.startHub(t, mutate...)
	e.proxy.SetTarget(e.hub.GRPCAddr())
	e.token = e.hub.BootstrapToken(t, "local", time.Now().Add(time.Hour))
	return e
}

// openEnv returns an environment without a hub: a namespace in the shared seed and a proxy that goes nowhere yet.
func openEnv(t *testing.T) *env {
	t.Helper()
	e := &env{seed: seedtest.StartShared(t), hubLogs: agenttest.NewLogSink()}
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
	e.hub = agenttest.StartHub(t, append([]func(*hub.Config){func(c *hub.Config) { c.Logger = slog.New(e.hubLogs) }}, mutate...)...)
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

// config is the configuration of an agent for seed "local" (label base=test): the hub through the proxy (and its CA,
// if it runs), the bootstrap token, the kubeconfig Secret in the test's namespace, 1 s heartbeats and fast
// reconnects. The link tests' shoots have no extensions to reconcile them: the controllers are off; the shoot tests
// turn them on.
func (e *env) config(t *testing.T) *config.AgentConfiguration {
	t.Helper()
	cfg := agenttest.Config(t, "local", agenttest.SeedSpec, e.seed)
	cfg.SeedConfig.Seed.Metadata.Labels = map[string]string{"base": "test"}
	d := func(v time.Duration) *metav1k.Duration { return &metav1k.Duration{Duration: v} }
	cfg.HubClientConnection = config.HubClientConnection{
		Address: e.proxy.Addr(), BootstrapToken: e.token,
		KubeconfigSecret: config.SecretReference{Namespace: e.ns, Name: "gardenlet-kubeconfig"},
	}
	if e.hub != nil {
		cfg.HubClientConnection.CABundle = string(e.hub.CA)
	}
	cfg.ReconnectBackoff = config.ReconnectBackoff{InitialDelay: d(10 * time.Millisecond), MaxDelay: d(200 * time.Millisecond)}
	return cfg
}

// rv is the resourceVersion of an object in the hub, as the agent's cache spells it; 0 when it does not exist.
func (e *env) rv(t *testing.T, group, resource, namespace, name string) int64 {
	t.Helper()
	o, err := e.hub.Collection(t, group, resource).Get(context.Background(), namespace, name)
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
	res, err := e.hub.Collection(t, "certificates.k8s.io", "certificatesigningrequests").List(context.Background(), "", store.ListOptions{})
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
