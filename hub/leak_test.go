package hub_test

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/agentsim"
)

// TestHubShutdownLeavesNoGoroutines: a hub that served an agent's session (with a certificate rotation on it) and
// the API ends every goroutine it started when Run returns, the session included.
func TestHubShutdownLeavesNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent() // what the test binary runs already (klog's flush daemon, ...)
	lis := bufconn.Listen(1 << 20)
	partsc := make(chan hub.Parts, 1)
	h, err := hub.New(hub.Config{Listen: "127.0.0.1:0", GRPCListener: lis, TunnelListen: "127.0.0.1:0", DataDir: t.TempDir(),
		HeartbeatInterval: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnReady: func(p hub.Parts) { partsc <- p }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var parts hub.Parts
	select {
	case parts = <-partsc:
	case err := <-done:
		t.Fatalf("hub: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("hub not ready within 60s")
	}
	e := &linkEnv{t: t, h: nil, dialer: agentsim.Dialer{
		Target: "passthrough:///bufnet", CA: caPool(t, parts),
		Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })},
	}, registry: parts.Registry}
	e.fixtures("a")
	a := e.agent("a")
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); _ = a.Run(agentCtx) }()
	waitSynced(t, a, 1)
	if _, err := a.Rotate(ctx); err != nil {
		t.Fatalf("rotation: %v", err)
	}

	stop() // with the session live: the hub ends it
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hub stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hub did not stop within 30s")
	}
	stopAgent()
	<-agentDone
	goleak.VerifyNone(t, ignore)
}

// TestAgentLinkSessionsLeaveNoGoroutines: an idle session is one goroutine, its handler, which receives (the sender,
// the status writer and a rotation run on demand); a session's goroutines end with it, whether its agent goes away or
// a newer session of the seed supersedes it, while the hub runs on.
func TestAgentLinkSessionsLeaveNoGoroutines(t *testing.T) {
	e := startLink(t)
	e.fixtures("a")
	a := e.agent("a")
	stopA := e.run(a)
	waitSynced(t, a, 1)
	eventually(t, "one goroutine, its handler, for the idle session", func() bool { return len(sessionGoroutines()) == 1 })
	if _, err := a.Rotate(context.Background()); err != nil {
		t.Fatalf("rotation: %v", err)
	}
	// A second agent of the same seed supersedes the first one's session, which ends while its agent reconnects.
	b := &agentsim.Agent{Seed: "a", Dialer: e.dialer, Cert: a.Cert, HeartbeatInterval: 100 * time.Millisecond}
	stopB := e.run(b)
	waitSynced(t, b, 1)
	stopA()
	stopB()
	eventually(t, "no sessions", func() bool { return len(e.h.AgentLink().Sessions()) == 0 })
	deadline := time.Now().Add(10 * time.Second)
	for left := sessionGoroutines(); len(left) > 0; left = sessionGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d session goroutines left after the sessions ended:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionGoroutines returns the stacks of the goroutines that serve agent streams: sessions, bootstraps and their
// receives. The stacks are the whole process's: no test of the package runs in parallel with another.
func sessionGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{"agentlink.(*session)", "agentlink.(*Server).serveSession", "agentlink.(*Server).bootstrap",
			"agentlink.(*Server).recvTimeout", "agentlink.(*Server).Connect"} {
			if strings.Contains(g, fn) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func caPool(t *testing.T, p hub.Parts) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CA.CertPEM) {
		t.Fatal("no CA certificate")
	}
	return pool
}
