package scheduler

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

var epoch = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// newReconciler returns the scheduling reconciler on the env's store with a fake clock, its usage synced and
// following the store.
func newReconciler(e *env, clk clock.WithTicker, strategy string) *reconciler {
	e.t.Helper()
	log := slog.New(slog.DiscardHandler)
	u := newUsage(e.c.shoots, clk, log)
	ctx := e.t.Context()
	go u.run(ctx)
	if err := u.wait(ctx); err != nil {
		e.t.Fatal(err)
	}
	return &reconciler{c: e.c, strategy: strategy, usage: u, clock: clk, log: log,
		events: &controller.Recorder{Events: e.c.events, Component: EventComponent, Clock: clk, Log: log}}
}

func (e *env) reconcile(r *reconciler, name string) error {
	_, err := r.Reconcile(e.ctx, controller.Key{Namespace: "garden-dev", Name: name})
	return err
}

// TestReconcileBinds: the shoot gets the seed, a SchedulingSuccessful event stamped with the scheduler's clock, and
// the usage counts it at once.
func TestReconcileBinds(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1"))
	e.seed(testSeed("aws-2", "aws", "eu-west-1"))
	e.shoot("s")
	r := newReconciler(e, clk, StrategySameRegion)
	if err := e.reconcile(r, "s"); err != nil {
		t.Fatal(err)
	}
	if got := e.seedOf("s"); got != "aws-1" {
		t.Fatalf("bound to %q, want aws-1", got)
	}
	evs := e.events("s", EventSchedulingSuccessful)
	if len(evs) != 1 || evs[0].GetMessage() != "Scheduled to seed 'aws-1'" || evs[0].GetType() != "Normal" ||
		!evs[0].GetLastTimestamp().AsTime().Equal(epoch) || evs[0].GetSource().GetComponent() != EventComponent {
		t.Fatalf("events: %v", evs)
	}
	if got := r.usage.snapshot()["aws-1"]; got != 1 {
		t.Fatalf("usage of aws-1 after the bind: %d, want 1", got)
	}
	// The next shoot goes to the other seed, which now has fewer shoots.
	e.shoot("t")
	if err := e.reconcile(r, "t"); err != nil {
		t.Fatal(err)
	}
	if got := e.seedOf("t"); got != "aws-2" {
		t.Fatalf("second shoot bound to %q, want aws-2", got)
	}
}

// TestReconcileFailure: Gardener's report of an unschedulable shoot, on the fake clock: SchedulingFailed events
// (aggregated) and lastOperation {Create, Pending, description, lastUpdateTime}, an error for the backoff, and the
// lastOperation's other fields kept.
func TestReconcileFailure(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1", condition(ConditionGardenletReady, "False")))
	e.shoot("s")
	controllertest.Update(t, e.c.shoots, "garden-dev", "s", true, func(o *corev1beta1.Shoot) {
		o.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Progress: proto.Int32(0), Type: "Create", State: "Processing"}}
	})
	r := newReconciler(e, clk, StrategySameRegion)
	const reason = "none of the 1 seeds is valid for scheduling (not deleting, visible and ready)"
	err := e.reconcile(r, "s")
	if err == nil || !strings.Contains(err.Error(), "failed to determine seed for shoot: "+reason) {
		t.Fatalf("error %v", err)
	}
	op := e.getShoot("s").GetStatus().GetLastOperation()
	if op.GetType() != "Create" || op.GetState() != "Pending" || op.GetDescription() != "Failed to schedule Shoot: "+reason ||
		!op.GetLastUpdateTime().AsTime().Equal(epoch) || op.Progress == nil {
		t.Fatalf("lastOperation %v", op)
	}
	evs := e.events("s", EventSchedulingFailed)
	if len(evs) != 1 || evs[0].GetType() != "Warning" || evs[0].GetMessage() != "Failed to schedule Shoot: "+reason || evs[0].GetCount() != 1 {
		t.Fatalf("events %v", evs)
	}
	clk.Step(time.Minute)
	if err := e.reconcile(r, "s"); err == nil {
		t.Fatal("second attempt succeeded")
	}
	if got := e.getShoot("s").GetStatus().GetLastOperation().GetLastUpdateTime().AsTime(); !got.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("lastUpdateTime %s after the second attempt", got)
	}
	if evs := e.events("s", EventSchedulingFailed); len(evs) != 1 || evs[0].GetCount() != 2 {
		t.Fatalf("events after the second attempt %v", evs)
	}
	if e.seedOf("s") != "" {
		t.Fatal("bound")
	}
}

// TestReconcileSkips: shoots that do not wait for this scheduler are left alone, without writes or events.
func TestReconcileSkips(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1"))
	e.seed(testSeed("aws-2", "aws", "eu-west-1"))
	e.shoot("scheduled", func(s *corev1beta1.Shoot) { s.Spec.SeedName = proto.String("aws-2") })
	e.shoot("other-scheduler", func(s *corev1beta1.Shoot) { s.Spec.SchedulerName = proto.String("custom") })
	e.shoot("empty-scheduler-name", func(s *corev1beta1.Shoot) { s.Spec.SchedulerName = proto.String("") }) // not default-scheduler, as in Gardener
	e.shoot("leaving", func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = []string{"gardener"} })
	controllertest.Delete(t, e.c.shoots, "garden-dev", "leaving")
	r := newReconciler(e, clk, StrategySameRegion)
	for _, name := range []string{"scheduled", "other-scheduler", "empty-scheduler-name", "leaving", "gone"} {
		var before string
		if name != "gone" {
			before = e.getShoot(name).GetMetadata().GetResourceVersion()
		}
		if err := e.reconcile(r, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "gone" {
			if after := e.getShoot(name).GetMetadata().GetResourceVersion(); after != before {
				t.Errorf("%s was written", name)
			}
		}
		if len(e.events(name, EventSchedulingSuccessful))+len(e.events(name, EventSchedulingFailed)) > 0 {
			t.Errorf("%s has events", name)
		}
	}
}

// TestReconcileCloudProfiles: the cloud profile comes from spec.cloudProfile (CloudProfile or
// NamespacedCloudProfile, whose status.cloudProfileSpec applies) or spec.cloudProfileName; a missing one is the
// reason.
func TestReconcileCloudProfiles(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1"))
	e.seed(testSeed("aws-gold", "aws", "eu-west-1", seedLabels("tier", "gold")))
	controllertest.Create(t, e.c.namespacedCloudProfiles, &corev1beta1.NamespacedCloudProfile{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "aws-gold"},
		Spec: &corev1beta1.NamespacedCloudProfileSpec{Parent: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "aws"}}})
	controllertest.Update(t, e.c.namespacedCloudProfiles, "garden-dev", "aws-gold", true, func(o *corev1beta1.NamespacedCloudProfile) {
		o.Status = &corev1beta1.NamespacedCloudProfileStatus{CloudProfileSpec: &corev1beta1.CloudProfileSpec{
			Type: "aws", SeedSelector: &corev1beta1.SeedSelector{MatchLabels: map[string]string{"tier": "gold"}}}}
	})
	ref := func(kind, name string) shootOpt {
		return func(s *corev1beta1.Shoot) {
			s.Spec.CloudProfileName = nil
			s.Spec.CloudProfile = &corev1beta1.CloudProfileReference{Kind: kind, Name: name}
		}
	}
	e.shoot("by-name")
	e.shoot("by-reference", ref("", "aws"))
	e.shoot("namespaced", ref("NamespacedCloudProfile", "aws-gold"))
	e.shoot("missing", ref("CloudProfile", "nope"))
	e.shoot("none", func(s *corev1beta1.Shoot) { s.Spec.CloudProfileName = nil })
	r := newReconciler(e, clk, StrategySameRegion)
	for _, name := range []string{"by-name", "by-reference", "namespaced"} {
		if err := e.reconcile(r, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := []string{e.seedOf("by-name"), e.seedOf("by-reference"), e.seedOf("namespaced")}; got[0] != "aws-1" || got[1] != "aws-gold" || got[2] != "aws-gold" {
		t.Fatalf("placed on %v, want [aws-1 aws-gold aws-gold]", got)
	}
	for name, reason := range map[string]string{"missing": `cloudprofiles.core.gardener.cloud "nope" not found`, "none": "could not determine cloudprofile from shoot"} {
		if err := e.reconcile(r, name); err == nil {
			t.Fatalf("%s scheduled", name)
		}
		if got := e.getShoot(name).GetStatus().GetLastOperation().GetDescription(); got != "Failed to schedule Shoot: "+reason {
			t.Errorf("%s: description %q", name, got)
		}
	}
}

// TestBindConditions: a decision is written only on the shoot it was made for, while it still waits, with the same
// spec, and while its seed exists and is not being deleted.
func TestBindConditions(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1", func(s *corev1beta1.Seed) { s.Metadata.Finalizers = []string{"x"} }))
	e.seed(testSeed("aws-2", "aws", "eu-west-1"))
	r := newReconciler(e, clk, StrategySameRegion)
	decided := e.shoot("s")

	controllertest.Update(t, e.c.shoots, "garden-dev", "s", false, func(o *corev1beta1.Shoot) { o.Spec.Region = "eu-central-1" })
	if _, outcome, err := r.bind(e.ctx, decided, "aws-1"); err != nil || outcome != bindStale {
		t.Fatalf("spec changed: %v %v, want stale", outcome, err)
	}
	decided = e.getShoot("s")
	controllertest.Update(t, e.c.shoots, "garden-dev", "s", true, func(o *corev1beta1.Shoot) {
		o.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Type: "Create", State: "Pending"}}
	})
	controllertest.Delete(t, e.c.seeds, "", "aws-1")
	if _, outcome, err := r.bind(e.ctx, decided, "aws-1"); err != nil || outcome != bindStale {
		t.Fatalf("seed being deleted: %v %v, want stale", outcome, err)
	}
	if _, outcome, err := r.bind(e.ctx, decided, "aws-9"); err != nil || outcome != bindStale {
		t.Fatalf("seed gone: %v %v, want stale", outcome, err)
	}
	// A status write in between does not invalidate the decision: the bind keeps it.
	out, outcome, err := r.bind(e.ctx, decided, "aws-2")
	if err != nil || outcome != bindDone || out.GetSpec().GetSeedName() != "aws-2" || out.GetStatus().GetLastOperation().GetState() != "Pending" {
		t.Fatalf("bind: %v %v %v", out, outcome, err)
	}
	if _, outcome, _ := r.bind(e.ctx, decided, "aws-2"); outcome != bindSkipped {
		t.Fatalf("bound shoot: %v, want skipped", outcome)
	}
	controllertest.Delete(t, e.c.shoots, "garden-dev", "s")
	e.shoot("s") // same name, another uid
	if _, outcome, _ := r.bind(e.ctx, decided, "aws-2"); outcome != bindSkipped {
		t.Fatalf("replaced shoot: %v, want skipped", outcome)
	}
	if e.seedOf("s") != "" {
		t.Fatal("the new shoot got the old one's decision")
	}
}

// TestRetryOnTheFakeClock: a failed shoot is retried after the backoff, and only when the clock has moved.
func TestRetryOnTheFakeClock(t *testing.T) {
	e := newEnv(t)
	clk := testingclock.NewFakeClock(epoch)
	e.seed(testSeed("aws-1", "aws", "eu-west-1", condition(ConditionGardenletReady, "False")))
	e.shoot("s")
	e.run(Config{Clock: clk, RetryMin: time.Second, RetryMax: time.Minute})
	count := func() int32 {
		if evs := e.events("s", EventSchedulingFailed); len(evs) == 1 {
			return evs[0].GetCount()
		}
		return 0
	}
	// The first attempts come at once: the shoot's own event, and the landscape controller retrying waiting shoots
	// when it first sees the seed. Then nothing until the backoff has passed on the clock.
	controllertest.Eventually(t, "the first attempt", func() bool { return count() >= 1 })
	time.Sleep(200 * time.Millisecond)
	n := count()
	controllertest.Consistently(t, "no retry before the backoff", 300*time.Millisecond, func() bool { return count() == n })
	controllertest.Eventually(t, "a retry after the backoff", func() bool {
		clk.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
		return count() > n
	})
}
