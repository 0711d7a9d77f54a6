package agentlink

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// testEtcd starts an etcd for the test and returns a client of it (closed at the test's end) and a silent logger.
func testEtcd(t *testing.T) (*clientv3.Client, *slog.Logger) {
	endpoint := storetest.StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestReplicasCounted: each replica serving agents records itself under its presence lease, so the replicas on one
// etcd count each other (and share the Lease write budget); a replica whose lease ends is no longer counted.
func TestReplicasCounted(t *testing.T) {
	cli, log := testEtcd(t)
	ctx := t.Context()
	run := func(id string) (*presence, context.CancelFunc, chan struct{}) {
		p := newPresence(cli, "/replicas-test", id, 5, log, newMetrics(nil, nil))
		pctx, cancel := context.WithCancel(ctx)
		granted, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); _ = p.run(pctx, granted) }()
		<-granted
		return p, cancel, done
	}
	a, stopA, doneA := run("a")
	defer func() { stopA(); <-doneA }()
	waitCount := func(want int) {
		t.Helper()
		deadline := time.Now().Add(timescale.Scale(30 * time.Second))
		for got := a.countReplicas(ctx); got != want; got = a.countReplicas(ctx) {
			if time.Now().After(deadline) {
				t.Fatalf("%d replicas counted, want %d", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCount(1)
	_, stopB, doneB := run("b")
	waitCount(2)
	stopB()
	<-doneB
	// b's key lives as long as its lease: revoke what b held, as its lease's expiry would.
	resp, err := cli.Get(ctx, "/replicas-test"+ReplicasPrefix+"b")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("b's key: %v %v", resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	waitCount(1)
}

type noSource struct{}

func (noSource) Collection(schema.GroupResource) (*store.Collection, bool) { return nil, false }

// TestUnhealthySeedKeepsItsTunnelRoute: while an agent reports its seed unhealthy, the lifecycle controller counts it
// as absent (as Gardener counts a gardenlet that stopped renewing its Lease), and the other replicas still find the
// replica of its session to reach its tunnels. A superseded session's end never takes a newer session's record away.
func TestUnhealthySeedKeepsItsTunnelRoute(t *testing.T) {
	cli, log := testEtcd(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	const prefix = "/unhealthy-test"
	run := func(id string) *presence {
		p := newPresence(cli, prefix, id, 5, log, newMetrics(nil, nil))
		p.peer = id + ".replicas.test:8445"
		granted := make(chan struct{})
		wg.Go(func() { _ = p.run(ctx, granted) })
		<-granted
		return p
	}
	a, b := run("a"), run("b")
	l := NewLifecycle(LifecycleConfig{Source: noSource{}, Etcd: cli, Prefix: prefix, Log: log})
	wg.Go(func() { l.followPresence(ctx) })
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(timescale.Scale(20 * time.Second)); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within %v: %s", timescale.Scale(20*time.Second), what)
			}
		}
	}
	present := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.present["s"]
	}
	routedTo := func(p *presence, want string) func() bool {
		return func() bool { got, err := p.tunnelPeer(ctx, "s"); return err == nil && got == want }
	}

	a.set("s", "one", true)
	eventually("a healthy session in a: present, routed to a", func() bool { return present() && routedTo(b, "a.replicas.test:8445")() })
	a.set("s", "one", false)
	eventually("the seed reported unhealthy: absent", func() bool { return !present() })
	eventually("and still routed to a", routedTo(b, "a.replicas.test:8445"))
	if got, _ := a.tunnelPeer(ctx, "s"); got != "" {
		t.Errorf("a finds its own session through %q; want none", got)
	}
	a.set("s", "one", true)
	eventually("healthy again: present", present)

	// The agent moves to b; a's session ends after b's started.
	b.set("s", "two", false)
	eventually("the new session in b: routed to b", routedTo(a, "b.replicas.test:8445"))
	a.remove("s", "one")
	b.set("s", "two", true)
	eventually("b's healthy record: present", present)
	time.Sleep(200 * time.Millisecond) // a's removal, had it hit b's record, has been written
	if !present() || !routedTo(a, "b.replicas.test:8445")() {
		t.Fatal("a's superseded session took b's record away")
	}
	b.set("s", "two", false)
	eventually("unhealthy in b: absent", func() bool { return !present() })
	b.remove("s", "two")
	eventually("b's session ended: no route", routedTo(a, ""))
}
