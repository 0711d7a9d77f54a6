package agentlink

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/trellis-dev/trellis/hub/store/storetest"
)

// TestReplicasCounted: each replica serving agents records itself under its presence lease, so the replicas on one
// etcd count each other (and share the Lease write budget); a replica whose lease ends is no longer counted.
func TestReplicasCounted(t *testing.T) {
	endpoint := storetest.StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
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
		deadline := time.Now().Add(30 * time.Second)
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
