package hub_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// runHub runs a hub on dir with identity until it is ready (returning a stop function) or fails to start.
func runHub(t *testing.T, dir, identity string) (h *hub.Hub, stop func(), err error) {
	t.Helper()
	h, err = hub.New(hub.Config{Listen: "127.0.0.1:0", DataDir: dir, ClusterIdentity: identity,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	select {
	case <-h.Ready():
		return h, func() { cancel(); _ = <-done }, nil
	case err := <-done:
		cancel()
		return nil, nil, err
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("hub not ready within a minute")
	}
	return nil, nil, nil
}

// The garden's cluster identity is published in ConfigMap kube-system/cluster-identity: the configured one, or a
// random one kept across restarts; a different one is refused at start.
func TestClusterIdentity(t *testing.T) {
	identity := func(h *hub.Hub) *kcorev1.ConfigMap {
		t.Helper()
		c, _ := h.Registry().Collection(schema.GroupResource{Resource: "configmaps"})
		obj, err := c.Get(context.Background(), "kube-system", "cluster-identity")
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*kcorev1.ConfigMap)
	}
	dir := t.TempDir()
	h, stop, err := runHub(t, dir, "garden-e2e")
	if err != nil {
		t.Fatal(err)
	}
	if cm := identity(h); cm.GetData()["cluster-identity"] != "garden-e2e" || !cm.GetImmutable() {
		t.Fatalf("cluster identity ConfigMap: %v", cm)
	}
	stop()
	if _, _, err := runHub(t, dir, "another"); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Fatalf("a hub with another identity started: %v", err)
	}
	h, stop, err = runHub(t, dir, "") // the stored one
	if err != nil {
		t.Fatal(err)
	}
	if got := identity(h).GetData()["cluster-identity"]; got != "garden-e2e" {
		t.Errorf("identity after a restart without one: %q", got)
	}
	stop()

	// Without a configured identity a random one is made once.
	dir = t.TempDir()
	h, stop, err = runHub(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	first := identity(h).GetData()["cluster-identity"]
	stop()
	h, stop, err = runHub(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasPrefix(first, "garden-") || identity(h).GetData()["cluster-identity"] != first {
		t.Errorf("random identity %q not kept across a restart", first)
	}
}
