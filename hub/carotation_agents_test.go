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

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestCARotationAgents rotates the CA under a fleet of simulated agents: after start the hub asks each of them to
// renew, and they rotate their client certificates over their live sessions (no reconnect) and get certificates of
// the new CA; after complete and a
// restart of the hub, every agent reconnects with its new certificate, trusting the new CA, and resyncs, while an
// agent still holding a certificate of the old CA is refused.
func TestCARotationAgents(t *testing.T) {
	dataDir := t.TempDir()
	linkEnvOn := restartableLink(dataDir)
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
		for _, s := range seeds {
			a := e.agent(s)
			agents[s] = a
			done.Go(func() { _ = a.Run(ctx) })
		}
		for _, s := range seeds {
			waitSynced(t, agents[s], 1)
		}
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
	reconnected := map[string]*agentsim.Agent{}
	for _, s := range seeds {
		d := e.dialer
		d.CA = newPool
		a := &agentsim.Agent{Seed: s, Dialer: d, Cert: agents[s].Cert, HeartbeatInterval: 100 * time.Millisecond, KeepObjects: true}
		reconnected[s] = a
		done.Go(func() { _ = a.Run(ctx) })
	}
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

// restartableLink returns a starter of hubs on dataDir, one after the other, each with the agent link on an
// in-memory listener; the agents' dialer of every linkEnv it returns dials the latest hub.
func restartableLink(dataDir string) func(t *testing.T, mutate func(*hub.Config)) *linkEnv {
	var cur atomic.Pointer[bufconn.Listener] // the running hub's gRPC-only listener
	return func(t *testing.T, mutate func(*hub.Config)) *linkEnv {
		lis := bufconn.Listen(1 << 20)
		cur.Store(lis)
		h := hubtest.Start(t, func(c *hub.Config) {
			c.DataDir, c.GRPCListener, c.HeartbeatInterval = dataDir, lis, 200*time.Millisecond
			mutate(c)
		})
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
