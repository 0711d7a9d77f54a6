package controller_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestRecorderAggregatesRepeats(t *testing.T) {
	ctx := context.Background()
	events := controllertest.Collection(t, controllertest.NewRegistry(t), "", "events")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	r := &controller.Recorder{Events: events, Component: "test-controller", Clock: clk}
	shoot := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s", Uid: "u1"}}
	seed := &corev1beta1.Seed{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Metadata: &metav1.ObjectMeta{Name: "seed-1"}}

	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed for %s", "s")
	clk.SetTime(clk.Now().Add(time.Minute))
	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed for %s", "s")
	r.Eventf(ctx, shoot, controller.EventNormal, "SchedulingSuccessful", "placed")
	r.Eventf(ctx, seed, controller.EventNormal, "Reconciled", "ok")

	got := controllertest.Events(t, events, "garden-dev", "", "")
	if len(got) != 2 {
		t.Fatalf("events in garden-dev: %v, want one per distinct event", got)
	}
	for _, ev := range got {
		io := ev.GetInvolvedObject()
		if io.GetKind() != "Shoot" || io.GetApiVersion() != "core.gardener.cloud/v1beta1" || io.GetName() != "s" || io.GetUid() != "u1" {
			t.Errorf("involved object %v", io)
		}
		if ev.GetReason() == "SchedulingFailed" {
			if ev.GetCount() != 2 || ev.GetType() != "Warning" || !ev.GetLastTimestamp().AsTime().After(ev.GetFirstTimestamp().AsTime()) {
				t.Errorf("repeated event: count %d, type %s, first %v, last %v", ev.GetCount(), ev.GetType(), ev.GetFirstTimestamp().AsTime(), ev.GetLastTimestamp().AsTime())
			}
		}
		if ev.GetSource().GetComponent() != "test-controller" {
			t.Errorf("source %v", ev.GetSource())
		}
	}
	if d := controllertest.Events(t, events, "default", "", ""); len(d) != 1 || d[0].GetInvolvedObject().GetKind() != "Seed" {
		t.Errorf("events of the cluster-scoped seed: %v", d)
	}
}

// TestRecorderCoalesces: with Coalesce, repetitions within the window are counted, not written, and go out with the
// first repetition after it.
func TestRecorderCoalesces(t *testing.T) {
	ctx := context.Background()
	events := controllertest.Collection(t, controllertest.NewRegistry(t), "", "events")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	r := &controller.Recorder{Events: events, Component: "test-controller", Clock: clk, Coalesce: time.Minute}
	shoot := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s", Uid: "u1"}}
	count := func() (int32, string) {
		got := controllertest.Events(t, events, "garden-dev", "", "")
		if len(got) != 1 {
			t.Fatalf("events: %v, want one", got)
		}
		return got[0].GetCount(), got[0].GetMetadata().GetResourceVersion()
	}
	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed")
	n, rv := count()
	if n != 1 {
		t.Fatalf("count %d after the first event", n)
	}
	for range 3 {
		clk.SetTime(clk.Now().Add(10 * time.Second))
		r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed")
	}
	if n, rv2 := count(); n != 1 || rv2 != rv {
		t.Fatalf("repetitions within the window were written: count %d, resourceVersion %s → %s", n, rv, rv2)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed")
	if n, _ := count(); n != 5 {
		t.Fatalf("count %d after the window, want 5 (1 written, 3 counted, 1 now)", n)
	}
}
