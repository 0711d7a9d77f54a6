package scheduler_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/scheduler"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// placementBound is how long a shoot may wait for its seed in these tests (the scheduler reacts to the change at
// once; the bound leaves room for a loaded machine).
const placementBound = 10 * time.Second

type garden struct {
	t             *testing.T
	ctx           context.Context
	shoots, seeds *store.Collection
}

func newGarden(t *testing.T, h *hubtest.Hub) *garden {
	coll := func(resource string) *store.Collection {
		c, ok := h.Registry().Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: resource})
		if !ok {
			t.Fatalf("%s not served", resource)
		}
		return c
	}
	return &garden{t: t, ctx: context.Background(), shoots: coll("shoots"), seeds: coll("seeds")}
}

// seed creates a Seed of provider type and region whose GardenletReady condition is ready ("" for none).
func (g *garden) seed(name, typ, region, ready string) {
	g.t.Helper()
	if _, err := g.seeds.Create(g.ctx, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: typ, Region: region}}}); err != nil {
		g.t.Fatal(err)
	}
	if ready != "" {
		g.setReady(name, ready)
	}
}

func (g *garden) setReady(name, ready string) {
	g.t.Helper()
	_, err := g.seeds.GuaranteedUpdate(g.ctx, "", name, true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Seed)
		s.Status = &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{{Type: "GardenletReady", Status: ready, LastTransitionTime: timestamppb.Now()}}}
		return s, nil
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

// shoot creates a Shoot of provider type and region, on seed ("" for none).
func (g *garden) shoot(name, typ, region, seed string, mutate ...func(*corev1beta1.Shoot)) {
	g.t.Helper()
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
		Spec: &corev1beta1.ShootSpec{Region: region, Provider: &corev1beta1.Provider{Type: typ}}}
	if seed != "" {
		s.Spec.SeedName = proto.String(seed)
	}
	for _, m := range mutate {
		m(s)
	}
	if _, err := g.shoots.Create(g.ctx, s); err != nil {
		g.t.Fatal(err)
	}
}

func (g *garden) seedOf(name string) string {
	g.t.Helper()
	obj, err := g.shoots.Get(g.ctx, "garden-dev", name)
	if err != nil {
		g.t.Fatal(err)
	}
	return obj.(*corev1beta1.Shoot).GetSpec().GetSeedName()
}

// placed waits until every shoot is on its seed ("": unscheduled; checked after passes that placed others).
func (g *garden) placed(want map[string]string) {
	g.t.Helper()
	deadline := time.Now().Add(placementBound)
	for {
		got := map[string]string{}
		done := true
		for shoot, seed := range want {
			got[shoot] = g.seedOf(shoot)
			if got[shoot] != seed {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("placement after %s:\n got  %v\n want %v", placementBound, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(t *testing.T, h *hubtest.Hub) {
	s := scheduler.New(scheduler.Config{Source: h.Registry(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestPlacement runs a scheduler of its own on a hub whose scheduler is off.
func TestPlacement(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.DisableScheduler = true })
	g := newGarden(t, h)
	g.seed("aws-eu-1", "aws", "eu", "True")
	g.seed("aws-us", "aws", "us", "True")
	g.seed("aws-ap", "aws", "ap", "False") // not ready: ignored
	g.seed("aws-sa", "aws", "sa", "")      // no GardenletReady yet: ignored
	g.seed("gcp-eu", "gcp", "eu", "True")
	g.seed("aws-eu-0", "aws", "eu", "True")
	if _, err := g.seeds.GuaranteedUpdate(g.ctx, "", "aws-eu-0", false, func(cur store.Object) (store.Object, error) {
		cur.GetMetadata().Finalizers = []string{"gardener"}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.seeds.Delete(g.ctx, "", "aws-eu-0", nil); err != nil { // being deleted: ignored
		t.Fatal(err)
	}
	g.shoot("pinned", "aws", "eu", "aws-ap")
	g.shoot("other-scheduler", "aws", "eu", "", func(s *corev1beta1.Shoot) { s.Spec.SchedulerName = proto.String("custom") })
	g.shoot("leaving", "aws", "eu", "", func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = []string{"gardener"} })
	if _, _, err := g.shoots.Delete(g.ctx, "garden-dev", "leaving", nil); err != nil {
		t.Fatal(err)
	}
	// Placed in one pass, in the order of their names.
	g.shoot("ap", "aws", "ap", "")         // its region's seed is not ready: the fewest shoots of its type, then the name
	g.shoot("azure-eu", "azure", "eu", "") // no seed of its type: any ready seed, its region first, then the fewest shoots
	g.shoot("eu", "aws", "eu", "")
	g.shoot("us", "aws", "us", "")
	run(t, h)
	g.placed(map[string]string{"ap": "aws-eu-1", "azure-eu": "gcp-eu", "eu": "aws-eu-1", "us": "aws-us"})

	// The fewest shoots, then the name: aws-eu-2 (empty) beats aws-eu-1 (two shoots) twice; then they tie and the
	// name decides.
	g.seed("aws-eu-2", "aws", "eu", "True")
	g.shoot("eu-2", "aws", "eu", "")
	g.placed(map[string]string{"eu-2": "aws-eu-2"})
	g.shoot("eu-3", "aws", "eu", "")
	g.placed(map[string]string{"eu-3": "aws-eu-2"})
	g.shoot("eu-4", "aws", "eu", "")
	g.placed(map[string]string{"eu-4": "aws-eu-1"})
	g.placed(map[string]string{"pinned": "aws-ap", "other-scheduler": "", "leaving": ""})
}

// TestPlacementWaitsForAReadySeed: a shoot without a usable seed waits, and is placed once a seed turns ready.
func TestPlacementWaitsForAReadySeed(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.DisableScheduler = true })
	g := newGarden(t, h)
	g.seed("local", "local", "local", "False")
	run(t, h)
	g.shoot("waiting", "local", "local", "")
	time.Sleep(300 * time.Millisecond)
	if seed := g.seedOf("waiting"); seed != "" {
		t.Fatalf("placed on %q, a seed that is not ready", seed)
	}
	g.setReady("local", "True")
	g.placed(map[string]string{"waiting": "local"})
}

// TestHubSchedules: the hub runs the scheduler in its leader.
func TestHubSchedules(t *testing.T) {
	h := hubtest.Start(t)
	g := newGarden(t, h)
	g.seed("local", "local", "local", "True")
	g.shoot("s", "local", "local", "")
	g.placed(map[string]string{"s": "local"})
}

// TestPick covers the preferences on their own.
func TestPick(t *testing.T) {
	seed := func(name, typ, region string) *corev1beta1.Seed {
		return &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: name}, Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: typ, Region: region}}}
	}
	shoot := &corev1beta1.Shoot{Spec: &corev1beta1.ShootSpec{Region: "eu", Provider: &corev1beta1.Provider{Type: "aws"}}}
	seeds := []*corev1beta1.Seed{seed("b", "aws", "us"), seed("c", "aws", "eu"), seed("d", "aws", "eu"), seed("a", "gcp", "eu")}
	for _, tc := range []struct {
		name  string
		seeds []*corev1beta1.Seed
		load  map[string]int
		want  string
	}{
		{"none", nil, nil, ""},
		{"type, then region, then name", seeds, nil, "c"},
		{"fewest shoots in the region", seeds, map[string]int{"c": 2, "d": 1}, "d"},
		{"the region before the load", seeds, map[string]int{"c": 5, "d": 5}, "c"},
		{"another region of the type before the type's absence", []*corev1beta1.Seed{seed("a", "gcp", "eu"), seed("b", "aws", "us")}, nil, "b"},
		{"any type when none matches", []*corev1beta1.Seed{seed("x", "gcp", "us"), seed("y", "azure", "eu")}, nil, "y"},
	} {
		if got := scheduler.Pick(shoot, tc.seeds, tc.load); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
