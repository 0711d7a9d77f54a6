package agentlink_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/hubtest"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time             { return c.now }
func (c *clock) Step(d time.Duration)       { c.now = c.now.Add(d) }
func (c *clock) ts() *timestamppb.Timestamp { return timestamppb.New(c.now) }

type env struct {
	t     *testing.T
	h     *hubtest.Hub
	clock *clock
}

func (e *env) coll(group, resource string) *store.Collection {
	c, ok := e.h.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		e.t.Fatalf("no %s", resource)
	}
	return c
}

func (e *env) seed(name string, ready string) {
	e.t.Helper()
	s := agentsim.Seed(name)
	if _, err := e.coll("core.gardener.cloud", "seeds").Create(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
	if ready == "" {
		return
	}
	_, err := e.coll("core.gardener.cloud", "seeds").GuaranteedUpdate(context.Background(), "", name, true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Seed)
		s.Status = &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{{Type: "GardenletReady", Status: ready, LastTransitionTime: e.clock.ts()}}}
		return s, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) ready(name string) *metav1.Condition {
	e.t.Helper()
	s, err := e.coll("core.gardener.cloud", "seeds").Get(context.Background(), "", name)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range s.(*corev1beta1.Seed).GetStatus().GetConditions() {
		if c.GetType() == "GardenletReady" {
			return c
		}
	}
	return nil
}

func (e *env) shootConditions(name string) map[string]string {
	s, err := e.coll("core.gardener.cloud", "shoots").Get(context.Background(), "garden-dev", name)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	st := s.(*corev1beta1.Shoot).GetStatus()
	for _, c := range append(st.GetConditions(), st.GetConstraints()...) {
		out[c.GetType()] = c.GetStatus()
	}
	return out
}

func TestLifecycle(t *testing.T) {
	h := hubtest.Start(t)
	e := &env{t: t, h: h, clock: &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	ctx := context.Background()
	e.seed("never-reported", "")
	e.seed("present", "True")
	e.seed("absent", "True")
	e.seed("leased", "True")
	shoots := e.coll("core.gardener.cloud", "shoots")
	for _, sh := range []*corev1beta1.Shoot{
		agentsim.Shoot("garden-dev", "running", "absent", "b", "p"),
		agentsim.Shoot("garden-dev", "workerless", "absent", "b", "p"),
		agentsim.Shoot("garden-dev", "scheduled-only", "absent", "b", "p"),
	} {
		if sh.Metadata.Name == "running" {
			sh.Spec.Provider.Workers = []*corev1beta1.Worker{{Name: "w"}}
		}
		if _, err := shoots.Create(ctx, sh); err != nil {
			t.Fatal(err)
		}
		if sh.Metadata.Name == "scheduled-only" {
			continue // spec.seedName only: not yet running on the seed
		}
		_, err := shoots.GuaranteedUpdate(ctx, "garden-dev", sh.Metadata.Name, true, func(cur store.Object) (store.Object, error) {
			s := cur.(*corev1beta1.Shoot)
			s.Status = &corev1beta1.ShootStatus{SeedName: proto.String("absent"), Conditions: []*metav1.Condition{{Type: "APIServerAvailable", Status: "True"}}}
			return s, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The leased seed's agent renewed its Lease recently (in another replica's term, say).
	leases := e.coll("coordination.k8s.io", "leases")
	if _, err := leases.Create(ctx, &coordinationv1.Lease{Metadata: &metav1.ObjectMeta{Namespace: "gardener-system-seed-lease", Name: "leased"},
		Spec: &coordinationv1.LeaseSpec{HolderIdentity: proto.String("leased"), RenewTime: timestamppb.New(e.clock.now.Add(30 * time.Second))}}); err != nil {
		t.Fatal(err)
	}

	l := agentlink.NewLifecycle(agentlink.LifecycleConfig{Source: h.Registry(), Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l.Start()
	l.SetPresent("present", true)

	// A new leader grants the whole monitor period from its own start.
	e.clock.Step(39 * time.Second)
	l.Sync(ctx)
	if c := e.ready("absent"); c.GetStatus() != "True" {
		t.Fatalf("absent seed marked %s within the monitor period after the controller started", c.GetStatus())
	}
	e.clock.Step(2 * time.Second)
	l.Sync(ctx)
	if c := e.ready("absent"); c.GetStatus() != "Unknown" || c.GetReason() != "StatusUnknown" || c.GetMessage() != "Gardenlet stopped posting status updates." {
		t.Fatalf("absent seed after 41s: %v", c)
	}
	if c := e.ready("present"); c.GetStatus() != "True" {
		t.Fatalf("present seed: %v", c)
	}
	if c := e.ready("leased"); c.GetStatus() != "True" {
		t.Fatalf("seed with a recent Lease: %v", c)
	}
	if c := e.ready("never-reported"); c != nil {
		t.Fatalf("a seed whose agent never reported got %v", c)
	}
	if got := e.shootConditions("running"); got["APIServerAvailable"] != "True" {
		t.Fatalf("shoot conditions changed before the shoot monitor period: %v", got)
	}

	// The Lease expires too; the present seed's agent goes away.
	e.clock.Step(40 * time.Second)
	l.SetPresent("present", false)
	l.Sync(ctx)
	if c := e.ready("leased"); c.GetStatus() != "Unknown" {
		t.Fatalf("seed whose Lease is older than the monitor period: %v", c)
	}
	if c := e.ready("present"); c.GetStatus() != "True" {
		t.Fatalf("seed absent for 0s: %v", c)
	}

	// After the shoot monitor period (200 s of Unknown) the shoots running on the seed turn Unknown.
	e.clock.Step(158 * time.Second)
	l.Sync(ctx)
	if got := e.shootConditions("running"); got["APIServerAvailable"] != "True" {
		t.Fatalf("shoot conditions changed 199s after GardenletReady turned Unknown: %v", got)
	}
	e.clock.Step(2 * time.Second)
	l.Sync(ctx)
	want := map[string]string{"APIServerAvailable": "Unknown", "ControlPlaneHealthy": "Unknown", "ObservabilityComponentsHealthy": "Unknown",
		"EveryNodeReady": "Unknown", "SystemComponentsHealthy": "Unknown", "HibernationPossible": "Unknown", "MaintenancePreconditionsSatisfied": "Unknown"}
	if got := e.shootConditions("running"); !equal(got, want) {
		t.Fatalf("running shoot: %v, want %v", got, want)
	}
	delete(want, "EveryNodeReady")
	delete(want, "SystemComponentsHealthy")
	if got := e.shootConditions("workerless"); !equal(got, want) {
		t.Fatalf("workerless shoot: %v, want %v", got, want)
	}
	if got := e.shootConditions("scheduled-only"); len(got) != 0 {
		t.Fatalf("a shoot not yet running on the seed (status.seedName unset) was touched: %v", got)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A session writes GardenletReady=True as it starts; its presence key may lag. A seed whose condition was just
// updated counts as seen, even when the controller started long ago.
func TestLifecycleCountsAFreshReadyConditionAsSeen(t *testing.T) {
	h := hubtest.Start(t)
	e := &env{t: t, h: h, clock: &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	ctx := context.Background()
	l := agentlink.NewLifecycle(agentlink.LifecycleConfig{Source: h.Registry(), Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l.Start()
	l.SetPresent("other", false) // presence is loaded; the seed under test has no key
	e.clock.Step(10 * time.Minute)
	e.seed("connecting", "")
	_, err := e.coll("core.gardener.cloud", "seeds").GuaranteedUpdate(ctx, "", "connecting", true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Seed)
		s.Status = &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{{Type: "GardenletReady", Status: "True",
			LastTransitionTime: timestamppb.New(e.clock.now.Add(-10 * time.Minute)), LastUpdateTime: e.clock.ts()}}}
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Step(39 * time.Second)
	l.Sync(ctx)
	if c := e.ready("connecting"); c.GetStatus() != "True" {
		t.Fatalf("a seed whose agent reported 39s ago was marked %s", c.GetStatus())
	}
	e.clock.Step(2 * time.Second)
	l.Sync(ctx)
	if c := e.ready("connecting"); c.GetStatus() != "Unknown" {
		t.Fatalf("41s after the last report without presence: %s", c.GetStatus())
	}
}
