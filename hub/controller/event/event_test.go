package event_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/event"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestTTL(t *testing.T) {
	ctx := context.Background()
	reg := controllertest.NewRegistry(t)
	events := controllertest.Collection(t, reg, "", "events")
	t0 := time.Now().Truncate(time.Second)
	mk := func(name, apiVersion, kind string) {
		controllertest.Create(t, events, &kcorev1.Event{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
			InvolvedObject: &metav1.ObjectReference{ApiVersion: apiVersion, Kind: kind, Name: "x"}, Reason: "R",
			LastTimestamp: timestamppb.New(t0)})
	}
	mk("seed", "core.gardener.cloud/v1beta1", "Seed")
	mk("shoot", "core.gardener.cloud/v1beta1", "Shoot")
	mk("foreign-shoot", "example.com/v1", "Shoot")
	clk := clocktesting.NewFakeClock(t0)
	r := &event.Reconciler{Events: events, TTL: time.Hour, Clock: clk}
	exists := func(name string) bool {
		_, err := events.Get(ctx, "garden-dev", name)
		return !apierrors.IsNotFound(err)
	}
	for _, tc := range []struct {
		at      time.Duration
		name    string
		exists  bool
		requeue time.Duration
	}{
		{0, "seed", true, time.Hour},
		{30 * time.Minute, "seed", true, 30 * time.Minute},
		{time.Hour, "seed", false, 0},
		{48 * time.Hour, "shoot", true, 0},
		{48 * time.Hour, "foreign-shoot", false, 0},
	} {
		clk.SetTime(t0.Add(tc.at))
		res, err := r.Reconcile(ctx, controller.Key{Namespace: "garden-dev", Name: tc.name})
		if err != nil {
			t.Fatal(err)
		}
		if exists(tc.name) != tc.exists || res.RequeueAfter != tc.requeue {
			t.Errorf("at +%v, %s: exists %v requeue %v, want %v %v", tc.at, tc.name, exists(tc.name), res.RequeueAfter, tc.exists, tc.requeue)
		}
	}

	// The running controller deletes a new non-shoot event when the fake clock passes its TTL.
	c, err := event.New(event.Config{Source: reg, TTL: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer controllertest.Start(t, c)()
	t0 = clk.Now().Truncate(time.Second)
	mk("bastion", "operations.gardener.cloud/v1alpha1", "Bastion")
	// The queue's heartbeat and the event's requeue.
	controllertest.Eventually(t, "the controller's timer for the event", func() bool { return clk.Waiters() >= 2 })
	if !exists("bastion") {
		t.Fatal("the event was deleted before its TTL")
	}
	clk.Step(time.Hour + time.Second)
	controllertest.Eventually(t, "the event to go after its TTL", func() bool { return !exists("bastion") })
}
