package scheduler

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Integration tests: the scheduler's controllers on a real store (embedded etcd), with the real clock.

// never is a backoff longer than any test: a shoot scheduled after a failure was retried because something changed.
const never = time.Hour

// TestSchedulesPendingShoots: waiting shoots are bound to the least loaded seed of their region, with an event;
// shoots that do not wait for this scheduler are left alone.
func TestSchedulesPendingShoots(t *testing.T) {
	e := newEnv(t)
	e.seed(testSeed("aws-a", "aws", "eu-west-1"))
	e.seed(testSeed("aws-b", "aws", "eu-west-1"))
	e.seed(testSeed("aws-us", "aws", "us-east-1"))
	e.shoot("on-a", func(s *corev1beta1.Shoot) { s.Spec.SeedName = proto.String("aws-a") })
	e.shoot("moving", func(s *corev1beta1.Shoot) { // counts for both seeds while it migrates
		s.Spec.SeedName = proto.String("aws-us")
		s.Status = &corev1beta1.ShootStatus{SeedName: proto.String("aws-a")}
	})
	e.shoot("custom", func(s *corev1beta1.Shoot) { s.Spec.SchedulerName = proto.String("custom") })
	e.shoot("first")
	e.run(Config{Workers: 2})
	e.placed(map[string]string{"first": "aws-b"}) // aws-a has on-a (and moving's status)
	e.shoot("second")
	e.shoot("us", region("us-east-1"))
	e.placed(map[string]string{"second": "aws-b", "us": "aws-us"}) // aws-a still counts two
	e.shoot("third")
	e.placed(map[string]string{"third": "aws-a"}) // 2:2, the first by name
	if evs := e.eventsWritten("first", EventSchedulingSuccessful); len(evs) != 1 || evs[0].GetMessage() != "Scheduled to seed 'aws-b'" {
		t.Fatalf("events of first: %v", evs)
	}
	controllertest.Consistently(t, "the custom scheduler's shoot stays unscheduled", 200*time.Millisecond, func() bool { return e.seedOf("custom") == "" })
}

// TestUnschedulableUntilASeedIsUsable: a shoot without a usable seed gets Gardener's Pending lastOperation and a
// SchedulingFailed event, and is scheduled as soon as a seed becomes usable, not after its backoff.
func TestUnschedulableUntilASeedIsUsable(t *testing.T) {
	e := newEnv(t)
	e.seed(testSeed("aws-a", "aws", "eu-west-1", condition(ConditionGardenletReady, "False")))
	e.seed(testSeed("aws-b", "aws", "eu-west-1", withBackup)) // backup without BackupBucketsReady
	e.run(Config{RetryMin: never, RetryMax: never})
	e.shoot("s")
	e.pendingWith("s", "Failed to schedule Shoot: none of the 2 seeds is valid for scheduling (not deleting, visible and ready)")
	if evs := e.eventsWritten("s", EventSchedulingFailed); len(evs) != 1 || evs[0].GetType() != "Warning" {
		t.Fatalf("events %v", evs)
	}
	e.setCondition("aws-b", ConditionBackupBucketsReady, "True")
	e.placed(map[string]string{"s": "aws-b"})
	if len(e.eventsWritten("s", EventSchedulingSuccessful)) != 1 {
		t.Fatal("no SchedulingSuccessful event")
	}
}

// TestCapacityFreed: a shoot that found every seed full is scheduled when a seed loses a shoot.
func TestCapacityFreed(t *testing.T) {
	e := newEnv(t)
	e.seed(testSeed("aws-a", "aws", "eu-west-1", allocatable("1")))
	e.shoot("old", func(s *corev1beta1.Shoot) { s.Spec.SeedName = proto.String("aws-a") })
	e.run(Config{RetryMin: never, RetryMax: never})
	e.shoot("new")
	e.pendingWith("new", "{aws-a => seed does not have available capacity for shoots}")
	controllertest.Delete(t, e.c.shoots, "garden-dev", "old")
	e.placed(map[string]string{"new": "aws-a"})
}

// TestSpecChangeRetries: a changed spec is a new attempt at once (Gardener's spec-changed predicate); a status
// write is not.
func TestSpecChangeRetries(t *testing.T) {
	e := newEnv(t)
	e.seed(testSeed("aws-a", "aws", "eu-west-1"))
	e.run(Config{RetryMin: never, RetryMax: never})
	e.shoot("s", region("eu-central-1"))
	e.pendingWith("s", "Region 'eu-central-1', SeedDeterminationStrategy 'SameRegion'")
	controllertest.Update(t, e.c.shoots, "garden-dev", "s", false, func(o *corev1beta1.Shoot) { o.Spec.Region = "eu-west-1" })
	e.placed(map[string]string{"s": "aws-a"})
}

// TestExactCapacityAndBalance: many shoots scheduled by many workers at once fill the seeds evenly and never beyond
// their allocatable shoots; the next one finds them full.
func TestExactCapacityAndBalance(t *testing.T) {
	e := newEnv(t)
	const seeds, capacity = 4, 15
	for i := range seeds {
		e.seed(testSeed(fmt.Sprintf("aws-%d", i), "aws", "eu-west-1", allocatable(fmt.Sprint(capacity))))
	}
	for i := range seeds * capacity {
		e.shoot(fmt.Sprintf("s-%03d", i))
	}
	e.run(Config{Workers: 8, RetryMin: never, RetryMax: never})
	perSeed := map[string]int{}
	controllertest.Eventually(t, "every shoot bound", func() bool {
		clear(perSeed)
		res, err := e.c.shoots.List(e.ctx, "garden-dev", store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Items {
			if n := o.(*corev1beta1.Shoot).GetSpec().GetSeedName(); n != "" {
				perSeed[n]++
			}
		}
		total := 0
		for _, n := range perSeed {
			total += n
		}
		return total == seeds*capacity
	})
	for i := range seeds {
		if n := perSeed[fmt.Sprintf("aws-%d", i)]; n != capacity {
			t.Fatalf("shoots per seed %v, want %d each", perSeed, capacity)
		}
	}
	e.shoot("one-too-many")
	e.pendingWith("one-too-many", "0/4 seed cluster candidate(s) are eligible for scheduling")
}

// TestMinimalDistance: the strategy from the configuration, with the region ConfigMap of the shoot's cloud profile;
// a changed ConfigMap retries waiting shoots.
func TestMinimalDistance(t *testing.T) {
	e := newEnv(t)
	e.seed(testSeed("aws-central", "aws", "eu-central-1"))
	e.seed(testSeed("aws-us", "aws", "us-east-1"))
	controllertest.Create(t, e.c.configMaps, &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Namespace: GardenNamespace, Name: "aws-regions",
		Labels:      map[string]string{LabelSchedulingPurpose: SchedulingPurposeRegionConfig},
		Annotations: map[string]string{AnnotationSchedulingCloudProfiles: "azure,aws"}},
		Data: map[string]string{"eu-north-1": "us-east-1: 1\neu-central-1: 2\n", "ap-east-1": "not: [a, mapping"}})
	e.run(Config{Strategy: StrategyMinimalDistance, RetryMin: never, RetryMax: never})
	e.shoot("north", region("eu-north-1"))
	e.placed(map[string]string{"north": "aws-us"}) // the ConfigMap says so, against Levenshtein
	e.shoot("west", region("eu-west-1"))           // not in the ConfigMap: Levenshtein
	e.placed(map[string]string{"west": "aws-central"})
	e.shoot("east", region("ap-east-1"))
	e.pendingWith("east", `Wrong format in region ConfigMap garden/aws-regions, Region "ap-east-1"`)
	controllertest.Update(t, e.c.configMaps, GardenNamespace, "aws-regions", false, func(o *kcorev1.ConfigMap) {
		o.Data["ap-east-1"] = "eu-central-1: 1"
	})
	e.placed(map[string]string{"east": "aws-central"})
}
