package tunnel_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	kcorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/ctl"
	"github.com/trellis-dev/trellis/ctl/kinds"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/tunnel"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	pmetav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// kubectlPath is the kubectl of the testbin cache.
func kubectlPath(t *testing.T) string {
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "trellis", "testbin", "kubectl-v1.36.3", "kubectl")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no kubectl in the testbin cache (%v); run make testbin", err)
	}
	return p
}

// serviceProxy stands in for kube-proxy, which does not run here: it routes a Service's cluster IP and port to the
// address of what backs it, and records every address the agent dialed.
type serviceProxy struct {
	mu     sync.Mutex
	routes map[string]string
	dialed []string
}

func (p *serviceProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	p.dialed = append(p.dialed, addr)
	to, ok := p.routes[addr]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to %s", addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, to)
}

func (p *serviceProxy) route(from, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[from] = to
}

func (p *serviceProxy) dialedAddrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dialed...)
}

type env struct {
	hub     *agenttest.Hub
	seed    *agenttest.Seed
	proxy   *serviceProxy
	kubectl string
	dir     string
}

func start(t *testing.T, hubOpts ...func(*hub.Config)) *env {
	t.Helper()
	return startWith(t, nil, hubOpts...)
}

// startWith is start with the seed's agent's configuration changed by agentOpt (nil: none) after the env's own.
func startWith(t *testing.T, agentOpt func(*env, *agent.Config), hubOpts ...func(*hub.Config)) *env {
	t.Helper()
	e := &env{proxy: &serviceProxy{routes: map[string]string{}}, kubectl: kubectlPath(t), dir: t.TempDir()}
	e.hub = agenttest.StartHub(t, func(c *hub.Config) {
		c.TunnelListen = "127.0.0.1:0"
		for _, o := range hubOpts {
			o(c)
		}
	})
	e.seed = e.hub.StartSeed(t, "local", agenttest.SeedSpec, seedtest.Start(t), func(c *agent.Config) {
		c.DialService = e.proxy.dial
		if agentOpt != nil {
			agentOpt(e, c)
		}
	})
	return e
}

// kubeconfig writes a kubeconfig for the seed's API through the hub with token and returns its path.
func (e *env) kubeconfig(t *testing.T, name, token string) string {
	t.Helper()
	caFile := filepath.Join(e.dir, "hub-ca.crt")
	if err := os.WriteFile(caFile, e.hub.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: seed
  cluster:
    server: %s%s
    certificate-authority: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: seed
  context: {cluster: seed, user: user}
current-context: seed
`, e.hub.URL, tunnel.SeedAPIPath(e.seed.Name), caFile, token)
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) run(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

func (e *env) ok(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := e.run(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// metric returns the sum of the hub's samples of a metric whose line contains every part.
func (e *env) metric(t *testing.T, parts ...string) float64 {
	t.Helper()
	return hubMetric(t, e.hub, parts...)
}

// hubMetric returns the sum of h's samples of a metric whose line contains every part.
func hubMetric(t *testing.T, h *agenttest.Hub, parts ...string) float64 {
	t.Helper()
	code, body := h.Do(t, "GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		match := true
		for _, p := range parts {
			match = match && strings.Contains(line, p)
		}
		if match {
			var v float64
			fields := strings.Fields(line)
			_, _ = fmt.Sscan(fields[len(fields)-1], &v)
			sum += v
		}
	}
	return sum
}

// TestSeedAPIThroughHub: kubectl reaches the seed's kube-apiserver through the hub and its agent as the hub user
// (impersonated), lists, applies and watches; a project member is refused; a seed without its agent is a 503.
func TestSeedAPIThroughHub(t *testing.T) {
	e := start(t)
	admin := e.kubeconfig(t, "admin", e.hub.Token)

	// The kubeconfig's server is the hub: kubectl never dials the seed.
	if server := e.ok(t, admin, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}"); server != e.hub.URL+"/tunnels/seeds/local" {
		t.Fatalf("server %q is not the hub's seed route", server)
	}
	// The seed sees the hub user, impersonated by the agent with its own credentials.
	who := e.ok(t, admin, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if !strings.HasPrefix(who, "trellis:admin ") || !strings.Contains(who, "system:masters") {
		t.Fatalf("the seed sees %q, want the hub's admin user and groups", who)
	}
	if got := e.ok(t, admin, "get", "namespace", "kube-system", "-o", "name"); strings.TrimSpace(got) != "namespace/kube-system" {
		t.Fatalf("get namespace: %q", got)
	}
	if e.metric(t, "trellis_tunnel_bytes_total", `kind="seed-api"`, `direction="from-seed"`) == 0 {
		t.Fatal("no bytes came through a seed-api tunnel")
	}

	// Watch, then apply: the watch sees the change.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch := exec.CommandContext(watchCtx, e.kubectl, "--kubeconfig", admin, "get", "configmaps", "-n", "default", "-w", "-o", "name")
	stdout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	manifest := filepath.Join(e.dir, "cm.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: through-the-tunnel\n  namespace: default\ndata:\n  a: b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.ok(t, admin, "apply", "-f", manifest); !strings.Contains(out, "configmap/through-the-tunnel created") {
		t.Fatalf("apply: %q", out)
	}
	cm, err := e.seed.Cluster.Client.CoreV1().ConfigMaps("default").Get(context.Background(), "through-the-tunnel", metav1.GetOptions{})
	if err != nil || cm.Data["a"] != "b" {
		t.Fatalf("the applied ConfigMap in the seed: %v %v", cm, err)
	}
	seen := false
	for deadline := time.After(20 * time.Second); !seen; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the watch ended")
			}
			seen = l == "configmap/through-the-tunnel"
		case <-deadline:
			t.Fatal("the watch did not see the applied ConfigMap")
		}
	}
	stopWatch()
	_ = watch.Wait()

	// A project member (no cluster admin) gets no route to the seed.
	member := e.kubeconfig(t, "member", e.hub.UserToken(t, "alice", "dev-team"))
	out, err := e.run(t, member, "get", "namespaces")
	if err == nil || !strings.Contains(out, "Forbidden") {
		t.Fatalf("a non-admin listed the seed's namespaces: %v\n%s", err, out)
	}
	// Impersonation headers a client sends are the hub's to set, never the client's.
	out = e.ok(t, admin, "auth", "whoami", "--as", "someone-else", "-o", "jsonpath={.status.userInfo.username}")
	if out != "trellis:admin" {
		t.Fatalf("--as through the hub made the seed see %q", out)
	}

	// A seed whose agent is not connected answers 503 at once.
	code, body := e.hub.Do(t, "GET", tunnel.SeedAPIPath("elsewhere")+"/api", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "not connected") {
		t.Fatalf("seed without agent: %d %s", code, body)
	}
}

// standIn is a real TLS server standing in for a shoot's kube-apiserver: its certificate, from its own CA, names the
// shoot's tunnel name, so a client that verifies it proves the hub did not terminate TLS.
func standIn(t *testing.T) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "stand-in kube-apiserver %s %s", r.TLS.ServerName, r.URL.Path)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

// TestShootAPIPassthrough: a TLS client dials the hub's SNI listener with a shoot's tunnel name and reaches the
// shoot's kube-apiserver Service (a stand-in TLS server) through the seed's agent, verifying the target's certificate;
// names of no shoot and targets outside the fixed ones are refused.
func TestShootAPIPassthrough(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	domain := tunnel.DefaultDomain
	e.devShoot(t, "api1")

	name := tunnel.ShootServerName("api1", "dev", domain)
	srv, pool := standIn(t)
	svcAddr := e.shootAPIServer(t, "dev", "api1", srv.Listener.Addr().String())

	// The client verifies the stand-in's certificate (httptest's names example.com): only the target can answer.
	protos := []string{"http/1.1"}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.hub.TunnelAddr())
			if err != nil {
				return nil, err
			}
			// The SNI is the shoot's tunnel name; the certificate check is against the stand-in's own name.
			c := tls.Client(raw, &tls.Config{ServerName: name, InsecureSkipVerify: true, //nolint:gosec // verified below
				VerifyConnection: func(cs tls.ConnectionState) error {
					opts := x509.VerifyOptions{Roots: pool, DNSName: "example.com", Intermediates: x509.NewCertPool()}
					_, err := cs.PeerCertificates[0].Verify(opts)
					return err
				}, NextProtos: protos})
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return c, nil
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + name + "/version")
	if err != nil {
		t.Fatalf("GET through the SNI listener: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "stand-in kube-apiserver " + name + " /version"; string(body) != want {
		t.Fatalf("got %q, want %q", body, want)
	}
	// The hub's certificate would not verify as the stand-in's: a hub terminating TLS fails the client.
	if _, err := tls.Dial("tcp", e.hub.Addr(), &tls.Config{RootCAs: pool, ServerName: "example.com"}); err == nil {
		t.Fatal("the hub's own certificate verified against the stand-in's CA")
	}

	// A name of no shoot, and a name outside the domain: the connection closes without reaching anything.
	for _, bad := range []string{tunnel.ShootServerName("nope", "dev", domain), "api.api1.dev.example.org"} {
		raw, err := net.Dial("tcp", e.hub.TunnelAddr())
		if err != nil {
			t.Fatal(err)
		}
		err = tls.Client(raw, &tls.Config{ServerName: bad, RootCAs: pool}).Handshake()
		raw.Close()
		if err == nil {
			t.Fatalf("%s: handshake succeeded", bad)
		}
	}

	// Targets outside the fixed ones are refused by the agent, and it dials nothing for them.
	link := e.hub.AgentLink()
	for what, target := range map[string]*agentv1.TunnelTarget{
		"no kind":            {},
		"not a shoot ns":     {Kind: agentv1.TunnelTarget_KIND_SHOOT_API_SERVER, ShootNamespace: "kube-system"},
		"address as ns":      {Kind: agentv1.TunnelTarget_KIND_SHOOT_API_SERVER, ShootNamespace: "127.0.0.1:22"},
		"no such shoot":      {Kind: agentv1.TunnelTarget_KIND_SHOOT_API_SERVER, ShootNamespace: "shoot--dev--missing"},
		"unknown kind value": {Kind: 99},
	} {
		c, err := link.DialTunnel(ctx, "local", target)
		if err == nil {
			c.Close()
			t.Errorf("%s: a tunnel opened", what)
		}
	}
	for _, a := range e.proxy.dialedAddrs() {
		if a != svcAddr {
			t.Errorf("the agent dialed %s, not a fixed target", a)
		}
	}
	if _, err := link.DialTunnel(ctx, "other", &agentv1.TunnelTarget{Kind: agentv1.TunnelTarget_KIND_SEED_API_SERVER}); err == nil || !errors.Is(err, agentlink.ErrNotConnected) {
		t.Errorf("a seed without agent: %v", err)
	}

	// Only an agent attaches to a tunnel, and only to one the hub is opening for its own seed.
	other := seedCert(t, e.hub, "other")
	for what, call := range map[string]struct {
		creds grpc.DialOption
		token string
		code  codes.Code
	}{
		"another seed, made-up id": {grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: hubPool(e.hub), Certificates: []tls.Certificate{other}})), "", codes.NotFound},
		"a user":                   {grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: hubPool(e.hub)})), e.hub.Token, codes.PermissionDenied},
	} {
		conn, err := grpc.NewClient(e.hub.GRPCAddr(), call.creds)
		if err != nil {
			t.Fatal(err)
		}
		cctx := ctx
		if call.token != "" {
			cctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+call.token)
		}
		stream, err := agentv1.NewAgentServiceClient(conn).Tunnel(cctx)
		if err == nil {
			// Send reports io.EOF once the hub has ended the stream; the status the hub gave is then Recv's.
			if err = stream.Send(&agentv1.TunnelFrame{TunnelId: "0123456789abcdef0123456789abcdef"}); err == nil || errors.Is(err, io.EOF) {
				_, err = stream.Recv()
			}
		}
		conn.Close()
		if status.Code(err) != call.code {
			t.Errorf("%s: %v, want %s", what, err, call.code)
		}
	}
}

// devShoot stores the project dev (namespace garden-dev) and its shoot name on the seed local.
func (e *env) devShoot(t *testing.T, name string) {
	t.Helper()
	e.hub.Store(t,
		&corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Metadata: &pmetav1.ObjectMeta{Name: "dev"},
			Spec: &corev1beta1.ProjectSpec{Namespace: ptr("garden-dev")}},
		&corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Metadata: &pmetav1.ObjectMeta{Namespace: "garden-dev", Name: name},
			Spec: &corev1beta1.ShootSpec{SeedName: ptr("local")}})
}

// tlsListener listens on loopback with TLS and httptest's certificate (a stand-in for a shoot's kube-apiserver).
func tlsListener(t *testing.T) net.Listener {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS() // for its certificate
	srv.Close()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLS)
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// shootAPIServer creates the Service kube-apiserver in the shoot's namespace of the seed, as the shoot's control plane
// has it, routes its cluster IP to backend (a stand-in kube-apiserver) and returns the Service's address.
func (e *env) shootAPIServer(t *testing.T, project, shoot, backend string) string {
	t.Helper()
	ctx := context.Background()
	ns := tunnel.ShootNamespace(project, shoot)
	if _, err := e.seed.Cluster.Client.CoreV1().Namespaces().Create(ctx, &kcorev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := e.seed.Cluster.Client.CoreV1().Services(ns).Create(ctx, &kcorev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: agent.ShootAPIServerService},
		Spec:       kcorev1.ServiceSpec{Ports: []kcorev1.ServicePort{{Name: "kube-apiserver", Port: 443}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	e.proxy.route(addr, backend)
	return addr
}

func hubPool(h *agenttest.Hub) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	return pool
}

// seedCert issues a seed client certificate with the hub's CA, as the bootstrap exchange would.
func seedCert(t *testing.T, h *agenttest.Hub, seed string) tls.Certificate {
	return h.ClientCert(t, "gardener.cloud:system:seed:"+seed, "gardener.cloud:system:seeds")
}

func ptr[T any](v T) *T { return &v }

// seedKubeconfig has trellisctl write the seed's kubeconfig (trellisctl seed kubeconfig) for the admin.
func (e *env) seedKubeconfig(t *testing.T) string {
	t.Helper()
	caFile := filepath.Join(e.dir, "ca-for-ctl.crt")
	if err := os.WriteFile(caFile, e.hub.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TRELLIS_HUB": e.hub.URL, "TRELLIS_CA": caFile, "TRELLIS_TOKEN": e.hub.Token, "HOME": e.dir, "TRELLISCONFIG": filepath.Join(e.dir, "trellisconfig")}
	path := filepath.Join(e.dir, "seed.kubeconfig")
	var out, errOut strings.Builder
	if code := ctl.Main(context.Background(), []string{"seed", "kubeconfig", e.seed.Name, "--file", path},
		ctl.Options{Kinds: kinds.All, Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }}); code != 0 {
		t.Fatalf("trellisctl seed kubeconfig: %d %s", code, errOut.String())
	}
	return path
}

// TestAgentRestart: when the seed's agent goes, tunnels through it end with an error at the client (a watch ends);
// when it comes back, new requests work again.
func TestAgentRestart(t *testing.T) {
	e := start(t)
	kc := e.seedKubeconfig(t)
	e.ok(t, kc, "get", "namespace", "default")

	// A kubectl watch, and a raw watch whose end we can see byte for byte.
	watch := exec.Command(e.kubectl, "--kubeconfig", kc, "get", "configmaps", "-A", "-w", "-o", "name")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	firstLine := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			once.Do(func() { close(firstLine) })
		}
	}()
	ended := make(chan error, 1)
	go func() { <-firstLine; ended <- watch.Wait() }()
	t.Cleanup(func() { _ = watch.Process.Kill() })
	select {
	case <-firstLine:
	case <-time.After(30 * time.Second):
		t.Fatal("the kubectl watch listed nothing")
	}
	req, _ := http.NewRequest("GET", e.hub.URL+tunnel.SeedAPIPath(e.seed.Name)+"/api/v1/configmaps?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+e.hub.Token)
	resp, err := (&http.Client{Transport: e.hub.HTTP.Transport}).Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("raw watch: %v %v", resp, err)
	}
	rawEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); resp.Body.Close(); rawEnded <- err }()

	e.seed.Agent.Stop()
	select {
	case err := <-rawEnded:
		if err == nil {
			t.Fatal("the raw watch ended cleanly when the agent went; want a broken stream")
		}
		t.Logf("the raw watch ended with %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the raw watch hangs after the agent went")
	}
	select {
	case err := <-ended:
		t.Logf("the kubectl watch ended (%v)", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the kubectl watch hangs after the agent went")
	}
	// While the agent is away the seed API is a 503, at once.
	out, err := e.run(t, kc, "get", "namespace", "default")
	if err == nil || !strings.Contains(out, "not connected") {
		t.Fatalf("without the agent: %v\n%s", err, out)
	}

	back := time.Now()
	e.seed.Agent = agenttest.StartAgent(t, e.seed.AgentConfig, func(c *agent.Config) { c.DialService = e.proxy.dial })
	agenttest.Eventually(t, "the seed API through the returned agent", func() bool {
		code, _ := e.hub.Do(t, "GET", tunnel.SeedAPIPath(e.seed.Name)+"/api/v1/namespaces/default", nil)
		return code == http.StatusOK
	})
	t.Logf("the seed API answered %s after the agent was started again", time.Since(back).Round(time.Millisecond))
	e.ok(t, kc, "get", "namespace", "default")
}
