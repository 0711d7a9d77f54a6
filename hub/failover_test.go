package hub_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// startReplica runs a hub replica on the external etcd until the test ends; replicas share the encryption keys.
func startReplica(t *testing.T, endpoint, keys string) *hub.Hub {
	t.Helper()
	h, err := hub.New(hub.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), EtcdEndpoints: []string{endpoint}, EncryptionKeyFile: keys,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); _ = <-done })
	select {
	case <-h.Ready():
	case err := <-done:
		t.Fatalf("replica did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("replica not ready within a minute")
	}
	return h
}

// TestLeaderFailover: two hub replicas share one etcd; only the leader runs the control-plane loops. When the
// leader loses its etcd session, its loops stop, the other replica's start, and nothing is done twice: every seed
// gets exactly one ControllerInstallation of an Always registration, before and after the failover.
func TestLeaderFailover(t *testing.T) {
	endpoint := storetest.StartEtcd(t)
	keys := filepath.Join(t.TempDir(), "encryption-keys")
	a := startReplica(t, endpoint, keys)
	b := startReplica(t, endpoint, keys)
	ctx := context.Background()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("a leader", func() bool { return a.IsLeader() != b.IsLeader() })
	leader, follower := a, b
	if b.IsLeader() {
		leader, follower = b, a
	}
	coll := func(h *hub.Hub, resource string) *store.Collection {
		c, _ := h.Registry().Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: resource})
		return c
	}
	// Written through the follower: every replica serves the API, only the leader acts.
	if _, err := coll(follower, "controllerdeployments").Create(ctx, &corev1.ControllerDeployment{Metadata: &metav1.ObjectMeta{Name: "ext"},
		Helm: &corev1.HelmControllerDeployment{RawChart: []byte("chart")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll(follower, "controllerregistrations").Create(ctx, &corev1beta1.ControllerRegistration{Metadata: &metav1.ObjectMeta{Name: "ext"},
		Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{{Kind: "Extension", Type: "ext", Primary: proto.Bool(true)}},
			Deployment: &corev1beta1.ControllerRegistrationDeployment{Policy: proto.String("Always"), DeploymentRefs: []*corev1beta1.DeploymentRef{{Name: "ext"}}}}}); err != nil {
		t.Fatal(err)
	}
	seed := func(name string) {
		t.Helper()
		if _, err := coll(follower, "seeds").Create(ctx, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: name},
			Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "ext", Region: "r"}}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(h *hub.Hub, seed string) int {
		objs, err := coll(h, "controllerinstallations").ByIndex(ctx, "seed", seed)
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	seed("seed-1")
	waitFor("the installation on seed-1", func() bool { return count(follower, "seed-1") == 1 })

	// The leader loses its session (as in a partition): the other replica takes over.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, store.DefaultPrefix+"/leader", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("election keys: %v %v", resp, err)
	}
	owner := resp.Kvs[0] // the lowest create revision leads
	for _, kv := range resp.Kvs {
		if kv.CreateRevision < owner.CreateRevision {
			owner = kv
		}
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(owner.Lease)); err != nil {
		t.Fatal(err)
	}
	waitFor("the follower to lead and the old leader to stop", func() bool { return follower.IsLeader() && !leader.IsLeader() })

	seed("seed-2")
	waitFor("the installation on seed-2", func() bool { return count(follower, "seed-2") == 1 })
	// A while later, still exactly one per seed: neither replica acted twice.
	time.Sleep(2 * time.Second)
	for _, s := range []string{"seed-1", "seed-2"} {
		for _, h := range []*hub.Hub{a, b} {
			if n := count(h, s); n != 1 {
				t.Fatalf("%d installations on %s (seen by replica %s), want 1", n, s, fmt.Sprint(h.Addr()))
			}
		}
	}
}
