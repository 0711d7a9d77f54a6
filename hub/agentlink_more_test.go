package hub_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// fixtures creates seeds with one shoot each, with a binding and secret per seed and a shared cloud profile.
func (e *linkEnv) fixtures(seeds ...string) {
	e.create("core.gardener.cloud", "cloudprofiles", agentsim.CloudProfile("local"))
	for _, s := range seeds {
		e.create("core.gardener.cloud", "seeds", agentsim.Seed(s))
		e.create("", "secrets", agentsim.Secret("garden-dev", "creds-"+s))
		e.create("core.gardener.cloud", "secretbindings", agentsim.SecretBinding("garden-dev", "creds-"+s))
		e.create("core.gardener.cloud", "shoots", agentsim.Shoot("garden-dev", "shoot-"+s, s, "creds-"+s, "local"))
	}
}

func (e *linkEnv) label(name, value string) {
	e.t.Helper()
	_, err := e.coll("core.gardener.cloud", "shoots").GuaranteedUpdate(context.Background(), "garden-dev", name, false, func(cur store.Object) (store.Object, error) {
		// Merged into the labels, so that the status label the hub's shoot-statuslabel loop keeps stays as it is.
		if cur.GetMetadata().Labels == nil {
			cur.GetMetadata().Labels = map[string]string{}
		}
		cur.GetMetadata().Labels["v"] = value
		return cur, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func waitSynced(t *testing.T, a *agentsim.Agent, n int) {
	t.Helper()
	eventually(t, "agent sync", func() bool { return a.Syncs() >= n })
}

func TestAgentLinkResume(t *testing.T) {
	e := startLink(t)
	e.fixtures("a")
	e.create("core.gardener.cloud", "shoots", agentsim.Shoot("garden-dev", "second", "a", "creds-a", "local"))
	a := e.agent("a")
	var received atomic.Int64
	var mu sync.Mutex
	var got []string
	a.OnAssignment = func(as *agentv1.Assignment, _ time.Time) {
		received.Add(1)
		mu.Lock()
		got = append(got, as.GetResource()+":"+as.GetName())
		mu.Unlock()
	}
	stop := e.run(a)
	waitSynced(t, a, 1)
	eventually(t, "initial state", func() bool { return equalState(a.Snapshot(), e.expected("a")) })
	var newest int64
	for _, m := range e.expected("a") {
		for _, v := range m {
			newest = max(newest, v)
		}
	}
	// Idle sessions advance the agent's versions through heartbeat acks.
	eventually(t, "synced versions to cover the fixtures", func() bool {
		v := a.SyncedVersions()["secrets"]
		return v >= newest
	})
	stop()

	// While the agent is away: one shoot changes, the other is deleted.
	e.label("shoot-a", "changed")
	if _, _, err := e.coll("core.gardener.cloud", "shoots").Delete(context.Background(), "garden-dev", "second", nil); err != nil {
		t.Fatal(err)
	}
	received.Store(0)
	mu.Lock()
	got = nil
	mu.Unlock()
	e.run(a)
	waitSynced(t, a, 2)
	if !a.Resumed() {
		t.Fatal("the session did not resume from the agent's versions")
	}
	eventually(t, "resumed state equals the hub's", func() bool { return equalState(a.Snapshot(), e.expected("a")) })
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if strings.HasPrefix(g, "cloudprofiles") || strings.HasPrefix(g, "secrets") {
			t.Fatalf("resume resent an unchanged object: %v", got)
		}
	}
	// What changed while the agent was away, each perhaps more than once when a hub loop wrote it again meanwhile.
	if !slices.Contains(got, "shoots.core.gardener.cloud:shoot-a") || slices.ContainsFunc(got, func(g string) bool {
		return g != "shoots.core.gardener.cloud:shoot-a" && g != "shoots.core.gardener.cloud:second" && !strings.HasPrefix(g, "seeds.core.gardener.cloud:")
	}) {
		t.Fatalf("resume sent %v; want the changed and the deleted shoot (and at most the seed)", got)
	}

	// An agent whose versions are ahead of the hub (a restored hub) gets a full resync.
	b := e.agent("a")
	b.OnAssignment = nil
	fresh := &agentsim.Agent{Seed: "a", Dialer: e.dialer, Cert: b.Cert, HeartbeatInterval: 100 * time.Millisecond, KeepObjects: true}
	e.run(fresh)
	waitSynced(t, fresh, 1)
	if fresh.Resumed() {
		t.Fatal("an agent without versions must get a full sync")
	}
}

func TestAgentLinkRenewKubeconfigAndRotation(t *testing.T) {
	e := startLink(t)
	e.fixtures("a")
	a := e.agent("a")
	e.run(a)
	waitSynced(t, a, 1)
	ctx := context.Background()
	seeds := e.coll("core.gardener.cloud", "seeds")
	_, err := seeds.GuaranteedUpdate(ctx, "", "a", false, func(cur store.Object) (store.Object, error) {
		cur.GetMetadata().Annotations = map[string]string{"gardener.cloud/operation": "renew-kubeconfig"}
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.RenewRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not asked to renew its certificate")
	}
	cert, err := a.Rotate(ctx)
	if err != nil {
		t.Fatalf("rotation: %v", err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	eventually(t, "annotation cleared and new expiry recorded", func() bool {
		s, err := seeds.Get(ctx, "", "a")
		if err != nil {
			return false
		}
		seed := s.(*corev1beta1.Seed)
		return seed.GetMetadata().GetAnnotations()["gardener.cloud/operation"] == "" &&
			seed.GetStatus().GetClientCertificateExpirationTimestamp().GetSeconds() == leaf.NotAfter.Unix()
	})
	// The new certificate works for a new session.
	b := &agentsim.Agent{Seed: "a", Dialer: e.dialer, Cert: cert, HeartbeatInterval: 100 * time.Millisecond}
	e.run(b)
	waitSynced(t, b, 1)
}

func TestAgentLinkEndsSilentSessions(t *testing.T) {
	e := startLink(t)
	e.fixtures("a")
	a := e.agent("a")
	a.HeartbeatInterval = time.Hour // never heartbeats
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Session(ctx)
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("a silent agent's session: got %v, want DeadlineExceeded naming the missing heartbeats", err)
	}
}

// A slow agent (it never reads) costs a queue bounded by its seed's objects and does not hold up other agents.
func TestAgentLinkSlowAgentIsBounded(t *testing.T) {
	e := startLink(t)
	e.fixtures("slow", "b")
	big := strings.Repeat("x", 32<<10)
	for i := range 20 {
		sh := agentsim.Shoot("garden-dev", "bulk-"+string(rune('a'+i)), "slow", "creds-slow", "local")
		sh.Metadata.Annotations = map[string]string{"bulk": big}
		e.create("core.gardener.cloud", "shoots", sh)
	}
	slow := e.agent("slow")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A raw session that sends Hello and heartbeats but never receives.
	cc, err := dialRaw(e, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := agentv1.NewAgentServiceClient(cc).Connect(metadata.NewOutgoingContext(ctx, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Hello{Hello: &agentv1.Hello{SeedName: "slow"}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			_ = stream.Send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Heartbeat{Heartbeat: &agentv1.Heartbeat{SentTime: timestamppb.Now(), SeedHealthy: true}}})
			time.Sleep(100 * time.Millisecond)
		}
	}()
	b := e.agent("b")
	e.run(b)
	waitSynced(t, b, 1)
	link := e.h.AgentLink()
	maxQueue := 0
	for round := range 30 {
		for i := range 20 {
			e.label("bulk-"+string(rune('a'+i)), big[:round+1])
		}
		e.label("shoot-b", string(rune('a'+round)))
		maxQueue = max(maxQueue, link.QueueLength("slow"))
	}
	eventually(t, "agent b keeps up while slow is stuck", func() bool { return equalState(b.Snapshot(), e.expected("b")) })
	members := 0
	for _, m := range e.expected("slow") {
		members += len(m)
	}
	if maxQueue > members {
		t.Fatalf("the slow agent's queue reached %d entries; it must stay within its seed's %d objects", maxQueue, members)
	}
	if maxQueue == 0 {
		t.Fatal("the slow agent's queue never filled: the test did not exercise flow control")
	}
}

// A seed whose state exceeds a message's size limit arrives in several batches.
func TestAgentLinkLargeState(t *testing.T) {
	e := startLink(t)
	e.fixtures("a")
	big := strings.Repeat("y", 100<<10)
	for i := range 200 {
		sh := agentsim.Shoot("garden-dev", fmt.Sprintf("large-%03d", i), "a", "creds-a", "local")
		sh.Metadata.Annotations = map[string]string{"bulk": big}
		e.create("core.gardener.cloud", "shoots", sh)
	}
	a := e.agent("a")
	e.run(a)
	waitSynced(t, a, 1)
	eventually(t, "20 MB of shoots held by the agent", func() bool { return equalState(a.Snapshot(), e.expected("a")) })
}

// Agents' reconnects resume their TLS sessions on the gRPC listener, and a resumed session still authenticates the
// seed's client certificate.
func TestGRPCListenerResumesTLSSessions(t *testing.T) {
	h := hubtest.Start(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	d := agentsim.Dialer{Target: h.GRPCAddr(), CA: pool}
	tok, err := auth.NewSeedBootstrapToken("a", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := h.Registry().Collection(schema.GroupResource{Resource: "secrets"})
	if _, err := secrets.Create(context.Background(), tok.SecretObject()); err != nil {
		t.Fatal(err)
	}
	cert, err := agentsim.Bootstrap(context.Background(), d, tok.Token(), "a", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cache := tls.NewLRUClientSessionCache(1)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, ClientSessionCache: cache, NextProtos: []string{"h2"}}
	for i, wantResumed := range []bool{false, true} {
		c, err := tls.Dial("tcp", h.GRPCAddr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// TLS 1.3 tickets arrive after the handshake: read until the server has sent its settings.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, _ = c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"))
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
		if got := c.ConnectionState().DidResume; got != wantResumed {
			t.Fatalf("connection %d: resumed=%v, want %v", i, got, wantResumed)
		}
		c.Close()
	}
	a := &agentsim.Agent{Seed: "a", Dialer: d, Cert: cert, HeartbeatInterval: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Run(ctx) }()
	waitSynced(t, a, 1)
	cancel()
	// Twice more through the agent's own cache: the second session resumes and is still the seed's.
	b := &agentsim.Agent{Seed: "a", Dialer: d, Cert: cert, HeartbeatInterval: 100 * time.Millisecond}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := b.Session(ctx)
		cancel()
		if err != nil && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled && !strings.Contains(err.Error(), "context deadline") {
			t.Fatalf("session: %v", err)
		}
	}
	if b.Syncs() != 2 {
		t.Fatalf("the agent synced %d times in two sessions", b.Syncs())
	}
}
