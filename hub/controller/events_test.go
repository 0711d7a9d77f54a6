package controller_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestRecorderAggregatesRepeats(t *testing.T) {
	ctx := context.Background()
	reg, err := api.NewRegistry(ctx, storetest.NewStore(t), grpc.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	events, _ := reg.Collection(schema.GroupResource{Resource: "events"})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	r := &controller.Recorder{Events: events, Component: "test-controller", Clock: clk}
	shoot := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s", Uid: "u1"}}
	seed := &corev1beta1.Seed{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Metadata: &metav1.ObjectMeta{Name: "seed-1"}}

	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed for %s", "s")
	clk.SetTime(clk.Now().Add(time.Minute))
	r.Eventf(ctx, shoot, controller.EventWarning, "SchedulingFailed", "no seed for %s", "s")
	r.Eventf(ctx, shoot, controller.EventNormal, "SchedulingSuccessful", "placed")
	r.Eventf(ctx, seed, controller.EventNormal, "Reconciled", "ok")

	list := func(ns string) []*kcorev1.Event {
		res, err := events.List(ctx, ns, store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*kcorev1.Event
		for _, o := range res.Items {
			out = append(out, o.(*kcorev1.Event))
		}
		return out
	}
	got := list("garden-dev")
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
	if d := list("default"); len(d) != 1 || d[0].GetInvolvedObject().GetKind() != "Seed" {
		t.Errorf("events of the cluster-scoped seed: %v", d)
	}
}
