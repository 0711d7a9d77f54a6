package shoot_test

import (
	"github.com/trellis-dev/trellis/hub/admission"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/shoot"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// garden runs the Shoot controllers on the real store behind the hub's API registry, on a fake clock.
type garden struct {
	t                                                 *testing.T
	clock                                             *clocktesting.FakeClock
	shoots, seeds, profiles, projects, quotas, events *store.Collection
	bindings, managedSeeds, registrations             *store.Collection
}

func newGarden(t *testing.T, now time.Time) *garden {
	t.Helper()
	reg := controllertest.NewRegistry(t)
	coll := func(group, resource string) *store.Collection {
		return controllertest.Collection(t, reg, group, resource)
	}
	g := &garden{t: t, clock: clocktesting.NewFakeClock(now),
		shoots: coll("core.gardener.cloud", "shoots"), seeds: coll("core.gardener.cloud", "seeds"),
		profiles: coll("core.gardener.cloud", "cloudprofiles"), projects: coll("core.gardener.cloud", "projects"),
		quotas: coll("core.gardener.cloud", "quotas"), bindings: coll("core.gardener.cloud", "secretbindings"),
		managedSeeds: coll("seedmanagement.gardener.cloud", "managedseeds"), events: coll("", "events"),
		registrations: coll("core.gardener.cloud", "controllerregistrations")}
	cs, err := shoot.New(shoot.Config{Source: reg, Clock: g.clock, Rand: func(int64) int64 { return 0 },
		Hibernation: shoot.HibernationConfig{TriggerDeadline: 2 * time.Hour},
		Maintenance: shoot.MaintenanceConfig{Admission: admission.Builtin()},
		Quota:       shoot.QuotaConfig{SyncPeriod: time.Hour},
		Retry:       shoot.RetryConfig{Period: 10 * time.Minute, JitterPeriod: 5 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Start(t, cs)
	return g
}

// createShoot creates s in garden-dev with its status.
func (g *garden) createShoot(s *corev1beta1.Shoot) {
	g.t.Helper()
	out := controllertest.Create(g.t, g.shoots, s)
	if s.Status == nil {
		return
	}
	// The controllers may write the shoot as soon as it exists: the status goes onto its newest version.
	for attempt := 0; ; attempt++ {
		out.Status = s.Status
		_, err := g.shoots.UpdateStatus(g.t.Context(), out)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || attempt == 10 {
			g.t.Fatal(err)
		}
		// The cache's object is shared with the controllers: the status goes onto a copy.
		out = proto.Clone(g.shoot(s.GetMetadata().GetNamespace(), s.GetMetadata().GetName())).(*corev1beta1.Shoot)
	}
}

// shoot returns the shoot, nil when it is gone.
func (g *garden) shoot(namespace, name string) *corev1beta1.Shoot {
	g.t.Helper()
	return controllertest.Get[*corev1beta1.Shoot](g.t, g.shoots, namespace, name)
}

// eventually waits for cond, moving the fake clock by step between the looks, so that whatever the controllers wait
// for on the clock comes to pass whenever they registered their wait — a requeue, or the backoff after a conflict
// between controllers writing the same shoot.
func (g *garden) eventually(what string, step time.Duration, cond func() bool) {
	g.t.Helper()
	controllertest.StepUntil(g.t, g.clock, what, step, cond)
}

func newShoot(name string, mutate ...func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
		Spec: &corev1beta1.ShootSpec{Region: "r", Provider: &corev1beta1.Provider{Type: "local"},
			CloudProfile: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
			Kubernetes:   &corev1beta1.Kubernetes{Version: "1.30.1"}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func reconciled(s *corev1beta1.Shoot) {
	s.Status = &corev1beta1.ShootStatus{ObservedGeneration: proto.Int64(1),
		LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Succeeded", LastUpdateTime: timestamppb.Now()}}
}

// TestHibernation: the schedule hibernates the shoot at its time in its time zone and wakes it up again.
func TestHibernation(t *testing.T) {
	// 19:59:30 in Berlin (summer); the shoot hibernates at 20:00 and wakes up at 08:00 Berlin time.
	g := newGarden(t, time.Date(2030, 6, 3, 17, 59, 30, 0, time.UTC))
	g.createShoot(newShoot("s", func(s *corev1beta1.Shoot) {
		s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: []*corev1beta1.HibernationSchedule{
			{Start: proto.String("0 20 * * *"), End: proto.String("0 8 * * *"), Location: proto.String("Europe/Berlin")}}}
	}))
	enabled := func(want bool) func() bool {
		return func() bool {
			h := g.shoot("garden-dev", "s").GetSpec().GetHibernation()
			return h.Enabled != nil && h.GetEnabled() == want
		}
	}
	controllertest.Consistently(t, "the shoot awake before the schedule", 300*time.Millisecond, func() bool {
		return g.shoot("garden-dev", "s").GetSpec().GetHibernation().Enabled == nil
	})
	// The controller writes spec.hibernation.enabled first and then the status' trigger time: wait for both.
	g.eventually("hibernation at 20:00 Berlin", time.Second, func() bool {
		return enabled(true)() && g.shoot("garden-dev", "s").GetStatus().GetLastHibernationTriggerTime() != nil
	})
	if at := g.shoot("garden-dev", "s").GetStatus().GetLastHibernationTriggerTime().AsTime(); at.Before(time.Date(2030, 6, 3, 18, 0, 0, 0, time.UTC)) {
		t.Fatalf("triggered at %v, before the schedule", at)
	}
	g.clock.SetTime(time.Date(2030, 6, 4, 5, 59, 59, 0, time.UTC))
	g.eventually("wake-up at 08:00 Berlin", time.Second, enabled(false))
}

// TestMaintenance: a shoot outside its window is not updated until asked to be (maintain) or its window comes; a
// shoot inside its window is maintained.
func TestMaintenance(t *testing.T) {
	noon := time.Date(2030, 6, 3, 12, 0, 0, 0, time.UTC)
	g := newGarden(t, noon)
	controllertest.Create(t, g.projects, &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: "dev"}, Spec: &corev1beta1.ProjectSpec{Namespace: proto.String("garden-dev")}})
	controllertest.Create(t, g.profiles, &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: "local"}, Spec: &corev1beta1.CloudProfileSpec{Type: "local",
		Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.30.1"}, {Version: "1.30.5"}}}}})
	// The maintenance writes through admission, which wants the shoots' provider type registered.
	controllertest.Create(t, g.registrations, &corev1beta1.ControllerRegistration{Metadata: &metav1.ObjectMeta{Name: "provider-local"},
		Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{
			{Kind: "ControlPlane", Type: "local"}, {Kind: "Infrastructure", Type: "local"}, {Kind: "Worker", Type: "local"}}}})
	window := func(begin, end string) func(*corev1beta1.Shoot) {
		return func(s *corev1beta1.Shoot) {
			s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: begin, End: end}}
		}
	}
	version := func(name string) string { return g.shoot("garden-dev", name).GetSpec().GetKubernetes().GetVersion() }
	g.createShoot(newShoot("outside", window("220000+0000", "230000+0000"), reconciled))
	g.createShoot(newShoot("inside", window("110000+0000", "130000+0000"), reconciled))

	g.eventually("the shoot inside its window maintained", time.Second, func() bool { return version("inside") == "1.30.5" })
	if op := g.shoot("garden-dev", "inside").GetMetadata().GetAnnotations()[shoot.AnnotationOperation]; op != shoot.OperationReconcile {
		t.Fatalf("operation %q after the maintenance, want reconcile", op)
	}
	rv := g.shoot("garden-dev", "outside").GetMetadata().GetResourceVersion()
	// The clock moves a minute between the looks.
	controllertest.Consistently(t, "the shoot outside its window untouched", time.Second, func() bool {
		untouched := g.shoot("garden-dev", "outside").GetMetadata().GetResourceVersion() == rv
		g.clock.Step(time.Minute)
		return untouched
	})

	// Asked to maintain now: done at once, outside the window.
	controllertest.Update(t, g.shoots, "garden-dev", "outside", false, func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{shoot.AnnotationOperation: shoot.OperationMaintain}
	})
	g.eventually("the maintain operation", time.Second, func() bool {
		s := g.shoot("garden-dev", "outside")
		return version("outside") == "1.30.5" && s.GetMetadata().GetAnnotations()[shoot.AnnotationOperation] == shoot.OperationReconcile &&
			s.GetStatus().GetLastMaintenance().GetState() == "Succeeded"
	})

	// A new patch; the window comes at 22:00.
	obj, err := g.profiles.Get(t.Context(), "", "local")
	if err != nil {
		t.Fatal(err)
	}
	cp := proto.CloneOf(obj.(*corev1beta1.CloudProfile))
	cp.Spec.Kubernetes.Versions = append(cp.Spec.Kubernetes.Versions, &corev1beta1.ExpirableVersion{Version: "1.30.6"})
	if _, err := g.profiles.Update(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	g.clock.SetTime(noon.Add(10*time.Hour - time.Second))
	g.eventually("the next window's maintenance", time.Second, func() bool { return version("outside") == "1.30.6" })
	if now := g.clock.Now(); now.Before(noon.Add(10 * time.Hour)) {
		t.Fatalf("maintained at %v, before the window", now)
	}
}

// TestQuotaLifetime: a shoot bound to a quota with a cluster lifetime gets its expiration and is deleted after it.
func TestQuotaLifetime(t *testing.T) {
	g := newGarden(t, time.Now())
	controllertest.Create(t, g.quotas, &corev1beta1.Quota{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "trial"},
		Spec: &corev1beta1.QuotaSpec{ClusterLifetimeDays: proto.Int32(1)}})
	controllertest.Create(t, g.bindings, &corev1beta1.SecretBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "trial"},
		Quotas: []*metav1.ObjectReference{{Namespace: "garden-dev", Name: "trial"}}})
	g.createShoot(newShoot("s", func(s *corev1beta1.Shoot) {
		s.Spec.SecretBindingName = proto.String("trial")
		s.Metadata.Finalizers = []string{"gardener"} // the agent's: deletion only marks the shoot
	}))
	var expiration time.Time
	g.eventually("the expiration annotation", time.Second, func() bool {
		v := g.shoot("garden-dev", "s").GetMetadata().GetAnnotations()[shoot.AnnotationExpirationTimestamp]
		t, err := time.Parse(time.RFC3339, v)
		expiration = t
		return err == nil
	})
	if created := g.shoot("garden-dev", "s").GetMetadata().GetCreationTimestamp().AsTime(); !expiration.Equal(created.Add(24 * time.Hour)) {
		t.Fatalf("expiration %v, want creation %v + 1 day", expiration, created)
	}
	g.clock.SetTime(expiration.Add(-time.Minute))
	g.eventually("the deletion after the expiration", 10*time.Second, func() bool {
		s := g.shoot("garden-dev", "s")
		return s.GetMetadata().GetDeletionTimestamp() != nil
	})
	if s := g.shoot("garden-dev", "s"); s.GetMetadata().GetAnnotations()[shoot.AnnotationConfirmDeletion] != "true" || !g.clock.Now().After(expiration) {
		t.Fatalf("deleted at %v (expiration %v) with annotations %v", g.clock.Now(), expiration, s.GetMetadata().GetAnnotations())
	}
}

// TestRetry: a shoot failed due to rate limits is retried after the retry period.
func TestRetry(t *testing.T) {
	failedAt := time.Now().Truncate(time.Second)
	g := newGarden(t, failedAt)
	g.createShoot(newShoot("s", func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{ObservedGeneration: proto.Int64(1),
			LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Failed", LastUpdateTime: timestamppb.New(failedAt)},
			LastErrors:    []*metav1.LastError{{Description: "throttled", Codes: []string{shoot.ErrorInfraRateLimitsExceeded}}}}
	}))
	operation := func() string {
		return g.shoot("garden-dev", "s").GetMetadata().GetAnnotations()[shoot.AnnotationOperation]
	}
	controllertest.Consistently(t, "no retry before the period", 500*time.Millisecond, func() bool { return operation() == "" })
	g.eventually("the retry", 30*time.Second, func() bool { return operation() == shoot.OperationRetry })
	if g.clock.Now().Before(failedAt.Add(10 * time.Minute)) {
		t.Fatalf("retried at %v, before the retry period", g.clock.Now())
	}
}

// TestStatusLabel: the label follows the shoot's health.
func TestStatusLabel(t *testing.T) {
	g := newGarden(t, time.Now())
	g.createShoot(newShoot("s"))
	label := func(want string) func() bool {
		return func() bool { return g.shoot("garden-dev", "s").GetMetadata().GetLabels()[shoot.LabelStatus] == want }
	}
	g.eventually("healthy", time.Second, label("healthy"))
	controllertest.Update(t, g.shoots, "garden-dev", "s", true, func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Processing"},
			LastErrors: []*metav1.LastError{{Description: "boom"}}}
	})
	g.eventually("unhealthy", time.Second, label("unhealthy"))
	controllertest.Update(t, g.shoots, "garden-dev", "s", true, func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Succeeded"},
			Conditions: []*metav1.Condition{{Type: "APIServerAvailable", Status: "True"}, {Type: "EveryNodeReady", Status: "Progressing"}}}
	})
	g.eventually("progressing", time.Second, label("progressing"))
}

// TestSeedConditions: a shoot registered as a seed carries the seed's conditions, follows their changes, and loses
// them with its ManagedSeed; a writer dropping them does not win.
func TestSeedConditions(t *testing.T) {
	g := newGarden(t, time.Now())
	own := &metav1.Condition{Type: "APIServerAvailable", Status: "True"}
	s := newShoot("infra", func(s *corev1beta1.Shoot) {
		s.Metadata.Namespace = "garden"
		s.Status = &corev1beta1.ShootStatus{Conditions: []*metav1.Condition{own}}
	})
	g.createShoot(s)
	controllertest.Create(t, g.seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "infra"}})
	setSeedConditions := func(status string) {
		cur, err := g.seeds.Get(t.Context(), "", "infra")
		if err != nil {
			t.Fatal(err)
		}
		next := proto.CloneOf(cur.(*corev1beta1.Seed))
		next.Status = &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{{Type: "GardenletReady", Status: status}}}
		if _, err := g.seeds.UpdateStatus(t.Context(), next); err != nil {
			t.Fatal(err)
		}
	}
	setSeedConditions("True")
	conditions := func(want ...string) func() bool {
		return func() bool {
			var got []string
			for _, c := range g.shoot("garden", "infra").GetStatus().GetConditions() {
				got = append(got, c.GetType()+"="+c.GetStatus())
			}
			return slices.Equal(got, want)
		}
	}
	controllertest.Consistently(t, "no seed conditions without a ManagedSeed", 300*time.Millisecond, conditions("APIServerAvailable=True"))
	controllertest.Create(t, g.managedSeeds, &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "infra"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "infra"}}})
	g.eventually("the seed's conditions", time.Second, conditions("APIServerAvailable=True", "GardenletReady=True"))
	setSeedConditions("Unknown")
	g.eventually("the seed's new conditions", time.Second, conditions("APIServerAvailable=True", "GardenletReady=Unknown"))
	// The agent's care writes the shoot's own conditions only.
	controllertest.Update(t, g.shoots, "garden", "infra", true, func(cur *corev1beta1.Shoot) {
		cur.Status.Conditions = []*metav1.Condition{own}
	})
	g.eventually("the seed's conditions back", time.Second, conditions("APIServerAvailable=True", "GardenletReady=Unknown"))
	controllertest.Delete(t, g.managedSeeds, "garden", "infra")
	g.eventually("the seed's conditions gone with the ManagedSeed", time.Second, conditions("APIServerAvailable=True"))
}

type noCollections struct{}

func (noCollections) Collection(schema.GroupResource) (*store.Collection, bool) { return nil, false }

func TestNewNeedsCollections(t *testing.T) {
	if _, err := shoot.New(shoot.Config{}); err == nil {
		t.Fatal("no source: no error")
	}
	_, err := shoot.New(shoot.Config{Source: noCollections{}})
	if err == nil || !strings.Contains(err.Error(), "shoots.core.gardener.cloud") || !strings.Contains(err.Error(), "managedseeds.seedmanagement.gardener.cloud") {
		t.Fatalf("missing collections: %v", err)
	}
}
