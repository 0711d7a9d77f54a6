package hub_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/faultproxy"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// TestCARotationAgents rotates the CA under a fleet of simulated agents: after start the hub asks each of them to
// renew, and they rotate their client certificates over their live sessions (no reconnect) and get certificates of
// the new CA; after complete and a
// restart of the hub, every agent reconnects with its new certificate, trusting the new CA, and resyncs, while an
// agent still holding a certificate of the old CA is refused.
func TestCARotationAgents(t *testing.T) {
	dataDir := t.TempDir()
	linkEnvOn := restartableLink(dataDir, nil)
	const fleet = 24
	seeds := fleetSeeds(fleet)
	agents := map[string]*agentsim.Agent{}
	var oldAgent *agentsim.Agent // keeps a certificate of the old CA
	var newCA *x509.Certificate
	t.Run("rotate", func(t *testing.T) {
		e := linkEnvOn(t, func(*hub.Config) {})
		e.fixtures(seeds...)
		ctx, cancel := context.WithCancel(context.Background())
		var done sync.WaitGroup
		defer func() { cancel(); done.Wait() }()
		agents = e.startFleet(ctx, &done, seeds)
		oldAgent = &agentsim.Agent{Seed: "s00", Dialer: e.dialer, Cert: agents["s00"].Cert, KeepObjects: true}
		authority := e.h.Authority()
		old := authority.Current()
		if _, err := authority.Start(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
		newCA = authority.Signer().Cert
		// The hub asks every agent whose certificate the old CA issued to renew, over its session.
		for _, s := range seeds {
			select {
			case <-agents[s].RenewRequested():
			case <-time.After(10 * time.Second):
				t.Fatalf("%s was not asked to renew its certificate after the rotation started", s)
			}
		}
		for _, s := range seeds {
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			cert, err := agents[s].Rotate(rctx)
			rcancel()
			if err != nil {
				t.Fatalf("%s rotates its certificate: %v", s, err)
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := leaf.CheckSignatureFrom(newCA); err != nil {
				t.Fatalf("%s's certificate after start is not the new CA's: %v", s, err)
			}
			if leaf.CheckSignatureFrom(old.Cert) == nil {
				t.Fatalf("%s's certificate after start is the old CA's", s)
			}
			if agents[s].Syncs() != 1 {
				t.Errorf("%s resynced during its rotation (%d syncs): the session must stay up", s, agents[s].Syncs())
			}
		}
		if err := authority.MarkPrepared(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := authority.Complete(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	if newCA == nil {
		t.FailNow()
	}

	e := linkEnvOn(t, func(*hub.Config) {})
	restarted := time.Now()
	newPool := x509.NewCertPool()
	newPool.AddCert(newCA)
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	t.Cleanup(func() { cancel(); done.Wait() })
	// Each agent reconnects with its new certificate, trusting the bundle its certificate answer carried (after
	// complete: the new CA).
	reconnected := rerunFleet(ctx, &done, e.dialer, newPool, agents)
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range seeds {
		for !reflect.DeepEqual(reconnected[s].Snapshot(), e.expected(s)) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s not resynced after the rotation (syncs %d)", s, reconnected[s].Syncs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("%d agents resynced %v after the restart that completed the rotation", fleet, time.Since(restarted).Round(time.Millisecond))

	oldAgent.Dialer = e.dialer
	oldAgent.Dialer.CA = newPool
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	err := oldAgent.Session(sctx)
	if err == nil || sctx.Err() != nil || oldAgent.Syncs() != 0 {
		t.Fatalf("an agent with a certificate of the old CA was not refused after complete (err %v, syncs %d)", err, oldAgent.Syncs())
	}
	t.Logf("the old CA's certificate: %v", err)
}

// startRealAgent starts a real agent (agent.Agent, controllers off) for seed "real" on a seed cluster of its own,
// which bootstraps with a token of e's hub and connects to address, both until t ends; it returns once the agent is
// connected with its certificate and registered its Seed.
func startRealAgent(t *testing.T, e *linkEnv, address string) *agenttest.Agent {
	t.Helper()
	// The agent registers a Seed of agenttest.SeedSpec (provider and DNS type local): the hub admits it once a
	// ControllerRegistration registers the types (agenttest.StartHub's hubs have one).
	if _, err := e.coll("core.gardener.cloud", "controllerregistrations").Get(context.Background(), "", agenttest.ProviderLocalRegistration); err != nil {
		e.create("core.gardener.cloud", "controllerregistrations", &corev1beta1.ControllerRegistration{
			ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration", Metadata: &metav1.ObjectMeta{Name: agenttest.ProviderLocalRegistration},
			Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{
				{Kind: "ControlPlane", Type: "local"}, {Kind: "DNSRecord", Type: "local"}}},
		})
	}
	cluster := seedtest.Start(t)
	cfg := agenttest.Config(t, "real", agenttest.SeedSpec, cluster)
	cfg.HubClientConnection = config.HubClientConnection{
		Address: address, CABundle: string(e.h.CA), BootstrapToken: e.token("real", time.Now().Add(time.Hour)),
		KubeconfigSecret: config.SecretReference{Namespace: cluster.Namespace(t), Name: "gardenlet-kubeconfig"},
	}
	d := func(v time.Duration) *metav1k.Duration { return &metav1k.Duration{Duration: v} }
	cfg.ReconnectBackoff = config.ReconnectBackoff{InitialDelay: d(10 * time.Millisecond), MaxDelay: d(500 * time.Millisecond)}
	a := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "the real agent connected with its certificate", func() bool {
		st := a.Status()
		return st.Connected && st.SeedRegistered && st.CSRsSent == 1
	})
	return a
}

// startFleet bootstraps a simulated agent for each seed and runs it in wg until ctx ends; it returns once every one
// synced.
func (e *linkEnv) startFleet(ctx context.Context, wg *sync.WaitGroup, seeds []string) map[string]*agentsim.Agent {
	e.t.Helper()
	agents := map[string]*agentsim.Agent{}
	for _, s := range seeds {
		a := e.agent(s)
		agents[s] = a
		wg.Go(func() { _ = a.Run(ctx) })
	}
	for _, s := range seeds {
		waitSynced(e.t, agents[s], 1)
	}
	return agents
}

// rerunFleet runs, in wg until ctx ends, a new simulated agent for each of agents with its certificate, dialing with
// dialer but trusting ca.
func rerunFleet(ctx context.Context, wg *sync.WaitGroup, dialer agentsim.Dialer, ca *x509.CertPool, agents map[string]*agentsim.Agent) map[string]*agentsim.Agent {
	out := map[string]*agentsim.Agent{}
	for s, old := range agents {
		d := dialer
		d.CA = ca
		a := &agentsim.Agent{Seed: s, Dialer: d, Cert: old.Cert, HeartbeatInterval: 100 * time.Millisecond, KeepObjects: true}
		out[s] = a
		wg.Go(func() { _ = a.Run(ctx) })
	}
	return out
}

// restartableLink returns a starter of hubs on dataDir, one after the other, each with the agent link on an
// in-memory listener; the agents' dialer of every linkEnv it returns dials the latest hub. proxy, when given, is
// pointed at the latest hub's TCP listener, for real agents.
func restartableLink(dataDir string, proxy *faultproxy.Proxy) func(t *testing.T, mutate func(*hub.Config)) *linkEnv {
	var cur atomic.Pointer[bufconn.Listener] // the running hub's gRPC-only listener
	return func(t *testing.T, mutate func(*hub.Config)) *linkEnv {
		lis := bufconn.Listen(1 << 20)
		cur.Store(lis)
		h := hubtest.Start(t, func(c *hub.Config) {
			c.DataDir, c.GRPCListener, c.HeartbeatInterval = dataDir, lis, 200*time.Millisecond
			mutate(c)
		})
		if proxy != nil {
			proxy.SetTarget(h.Addr())
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(h.CA)
		return &linkEnv{t: t, h: h, registry: h.Registry(), dialer: agentsim.Dialer{
			Target: "passthrough:///bufnet", CA: pool,
			Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return cur.Load().DialContext(ctx) })},
		}}
	}
}

// fleetSeeds names n seeds s00, s01, ...
func fleetSeeds(n int) []string {
	seeds := make([]string, 0, n)
	for i := range n {
		seeds = append(seeds, fmt.Sprintf("s%02d", i))
	}
	return seeds
}

// TestCARotationFleetWithRealAgent rotates the CA of a running hub, without restarting it, under a fleet of
// simulated agents and one real agent (agent.Agent on a seed cluster), all connected through a proxy that can cut
// their connections: after start the hub asks every agent to renew; the real agent does so by itself over its
// session and reconnects once with the new CA's certificate; after complete the hub serves under the new CA, and
// once every connection is cut, every agent reconnects — the real one trusting the bundle it got over the link —
// and holds everything it is assigned, while a certificate of the old CA is refused.
func TestCARotationFleetWithRealAgent(t *testing.T) {
	h := agenttest.StartHub(t, func(c *hub.Config) { c.HeartbeatInterval = 200 * time.Millisecond })
	proxy, err := faultproxy.Listen(h.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	oldPool := x509.NewCertPool()
	oldPool.AppendCertsFromPEM(h.CA)
	e := &linkEnv{t: t, h: h.Hub, registry: h.Registry(), dialer: agentsim.Dialer{Target: proxy.Addr(), CA: oldPool}}
	const fleet = 24
	seeds := fleetSeeds(fleet)
	e.fixtures(seeds...)
	simCtx, stopSims := context.WithCancel(context.Background())
	var sims sync.WaitGroup
	t.Cleanup(func() { stopSims(); sims.Wait() })
	agents := e.startFleet(simCtx, &sims, seeds)

	realAgent := startRealAgent(t, e, proxy.Addr())
	sessions := realAgent.Status().Sessions

	authority := h.Authority()
	old := authority.Current()
	if _, err := authority.Start(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	next := authority.Signer()
	for _, s := range seeds {
		select {
		case <-agents[s].RenewRequested():
		case <-time.After(agenttest.WaitTimeout):
			t.Fatalf("%s was not asked to renew its certificate after the rotation started", s)
		}
		rctx, rcancel := context.WithTimeout(simCtx, agenttest.WaitTimeout)
		cert, err := agents[s].Rotate(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("%s rotates its certificate: %v", s, err)
		}
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err != nil || leaf.CheckSignatureFrom(next.Cert) != nil {
			t.Fatalf("%s's certificate after start is not the new CA's: %v", s, err)
		}
	}
	agenttest.Eventually(t, "the real agent renewed over its session and reconnected once", func() bool {
		st := realAgent.Status()
		return st.Connected && st.CSRsSent == 2 && st.Sessions == sessions+1
	})
	sessions++

	if err := authority.MarkPrepared(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := authority.Complete(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the hub serves under the new CA", func() bool { return servingVerifies(t, h.Addr(), poolOf(next)) == nil })

	// Every connection is cut: the agents reconnect to the hub that now serves under the new CA. The simulated
	// agents trust what the answers to their certificate requests carried (the new CA, after complete).
	stopSims()
	sims.Wait()
	cut := time.Now()
	proxy.CutAll()
	newPool := poolOf(next)
	simCtx2, stopSims2 := context.WithCancel(context.Background())
	t.Cleanup(func() { stopSims2(); sims.Wait() })
	reconnected := rerunFleet(simCtx2, &sims, e.dialer, newPool, agents)
	agenttest.Eventually(t, "the real agent reconnected under the new CA", func() bool {
		st := realAgent.Status()
		return st.Connected && st.Sessions > sessions
	})
	realBack := time.Since(cut)
	for _, s := range seeds {
		agenttest.Eventually(t, s+" resynced after the cut", func() bool { return reflect.DeepEqual(reconnected[s].Snapshot(), e.expected(s)) })
	}
	t.Logf("after the cut: the real agent reconnected in %v, %d simulated agents resynced in %v", realBack.Round(time.Millisecond),
		fleet, time.Since(cut).Round(time.Millisecond))
	if st := realAgent.Status(); st.CSRsSent != 2 {
		t.Errorf("the real agent sent %d certificate requests, want 2 (bootstrap, the rotation's renewal)", st.CSRsSent)
	}
	if err := servingVerifies(t, h.Addr(), poolOf(old)); err == nil {
		t.Error("after complete the old CA still verifies the hub")
	}
	if clientCertAccepted(t, h.Addr(), old, newPool) {
		t.Error("after complete a client certificate of the old CA is accepted")
	}
}
