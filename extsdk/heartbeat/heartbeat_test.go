package heartbeat_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/heartbeat"
	"github.com/trellis-dev/trellis/extsdk/internal/exttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

// TestHeartbeat covers the Lease a manager's heartbeat writes and renews, taking over a Lease left by an earlier
// holder.
func TestHeartbeat(t *testing.T) {
	env := exttest.New(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: env.Namespace, Name: extensionsv1alpha1.HeartbeatLeaseName}
	old := "old-holder"
	if err := env.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{"kept": "yes"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &old},
	}); err != nil {
		t.Fatal(err)
	}
	if err := heartbeat.Add(env.Manager, heartbeat.Config{
		Namespace: env.Namespace, ExtensionName: "provider-test", RenewInterval: 200 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	env.Start(t)

	var first time.Time
	exttest.Eventually(t, "Lease taken over", func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, key, l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "provider-test" || l.Spec.RenewTime == nil {
			return fmt.Errorf("spec %+v", l.Spec)
		}
		if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 1 {
			return fmt.Errorf("leaseDurationSeconds %v, want 1 (at least a second)", l.Spec.LeaseDurationSeconds)
		}
		if l.Labels["kept"] != "yes" {
			return fmt.Errorf("labels %v: the renewal must only patch the spec", l.Labels)
		}
		first = l.Spec.RenewTime.Time
		return nil
	})
	if d := time.Since(first); d < -time.Second || d > 10*time.Second {
		t.Errorf("renewTime %v is not now", first)
	}
	exttest.Eventually(t, "Lease renewed", func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, key, l); err != nil {
			return err
		}
		if !l.Spec.RenewTime.Time.After(first) {
			return fmt.Errorf("renewTime still %v", l.Spec.RenewTime)
		}
		return nil
	})
}

// TestRenewCreates covers a first renewal without a manager: it creates the Lease with the default interval.
func TestRenewCreates(t *testing.T) {
	env := exttest.New(t)
	h, err := heartbeat.New(heartbeat.Config{Client: env.Client, Namespace: env.Namespace, ExtensionName: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: extensionsv1alpha1.HeartbeatLeaseName}, l); err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "ext" || *l.Spec.LeaseDurationSeconds != 30 {
		t.Errorf("spec %+v", l.Spec)
	}
	if !h.NeedLeaderElection() {
		t.Error("the heartbeat must run in the leader only")
	}
	if _, err := heartbeat.New(heartbeat.Config{Client: env.Client, Namespace: env.Namespace}); err == nil {
		t.Error("New without an extension name succeeded")
	}
}
