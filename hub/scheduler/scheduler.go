package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// EventComponent is the reporting component of the scheduler's events (Gardener's recorder name).
const EventComponent = "shoot-scheduler"

// Config configures the scheduler.
type Config struct {
	Source controller.Collections
	// Workers is how many shoots are scheduled at once (SchedulerConfiguration
	// schedulers.shoot.concurrentSyncs; default 5).
	Workers int
	// Strategy is schedulers.shoot.candidateDeterminationStrategy: StrategySameRegion (default) or
	// StrategyMinimalDistance.
	Strategy string
	// RetryMin and RetryMax bound the exponential backoff of a shoot that could not be scheduled (the controller
	// framework's defaults: 500 ms and 5 min). Changes that may make it schedulable retry it at once anyway.
	RetryMin, RetryMax time.Duration
	// Clock is the scheduler's clock (default real): backoff, lastOperation and event times.
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Validate reports what is wrong with a Config.
func (c *Config) Validate() error {
	var errs []error
	if c.Source == nil {
		errs = append(errs, errors.New("source is required"))
	}
	if c.Strategy != "" && c.Strategy != StrategySameRegion && c.Strategy != StrategyMinimalDistance {
		errs = append(errs, fmt.Errorf("strategy %q is not one of %s, %s", c.Strategy, StrategySameRegion, StrategyMinimalDistance))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must not be negative, got %d", c.Workers))
	}
	return errors.Join(errs...)
}

// Controllers are the shoot scheduler of the hub's leader: the scheduling controller, which binds every shoot that
// waits for a seed, and the landscape controller, which retries all waiting shoots at once when something that may
// make them schedulable changed. Create them with New and run them with Run, once.
type Controllers struct {
	usage               *usage
	events              *eventSink
	schedule, landscape *controller.Controller
}

// collections are the store collections the scheduler reads and writes.
type collections struct {
	shoots, seeds, cloudProfiles, namespacedCloudProfiles, configMaps, events *store.Collection
}

func openCollections(src controller.Collections) (*collections, error) {
	c := &collections{}
	if err := controller.OpenCollections(src, "scheduler", map[schema.GroupResource]**store.Collection{
		{Group: "core.gardener.cloud", Resource: "shoots"}:                  &c.shoots,
		{Group: "core.gardener.cloud", Resource: "seeds"}:                   &c.seeds,
		{Group: "core.gardener.cloud", Resource: "cloudprofiles"}:           &c.cloudProfiles,
		{Group: "core.gardener.cloud", Resource: "namespacedcloudprofiles"}: &c.namespacedCloudProfiles,
		{Resource: "configmaps"}:                                            &c.configMaps,
		{Resource: "events"}:                                                &c.events,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// landscapeKey is the one key of the landscape controller: changes coalesce into one retry of all waiting shoots.
var landscapeKey = controller.Key{Name: "landscape"}

// New returns the scheduler for cfg.
func New(cfg Config) (*Controllers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.Strategy == "" {
		cfg.Strategy = StrategySameRegion
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c, err := openCollections(cfg.Source)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With("controller", "shoot-scheduler")
	u := newUsage(c.shoots, cfg.Clock, log)
	events := newEventSink(&controller.Recorder{Events: c.events, Component: EventComponent, Clock: cfg.Clock, Log: log,
		Coalesce: failureRefresh}, cfg.Workers, log)
	schedule, err := controller.New(controller.Config{
		Name: "shoot-scheduler", Workers: cfg.Workers, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax,
		Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &reconciler{c: c, strategy: cfg.Strategy, usage: u, clock: cfg.Clock, log: log, events: events},
		Sources:    []controller.Source{{Collection: c.shoots, Map: pendingShoot, Digest: shootDigest}},
	})
	if err != nil {
		return nil, err
	}
	toLandscape := func(store.Object) []controller.Key { return []controller.Key{landscapeKey} }
	landscape, err := controller.New(controller.Config{
		Name: "shoot-scheduler-landscape", Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: controller.ReconcilerFunc(func(ctx context.Context, _ controller.Key) (controller.Result, error) {
			if err := u.wait(ctx); err != nil {
				return controller.Result{}, err
			}
			for _, k := range u.pending() {
				schedule.Enqueue(k)
			}
			return controller.Result{}, nil
		}),
		Sources: []controller.Source{
			{Collection: c.seeds, Map: toLandscape, Digest: seedDigest},
			{Collection: c.cloudProfiles, Map: toLandscape, Digest: func(o store.Object) string {
				return hash(o.(*corev1beta1.CloudProfile).GetSpec().GetSeedSelector())
			}},
			{Collection: c.namespacedCloudProfiles, Map: toLandscape, Digest: func(o store.Object) string {
				return hash(o.(*corev1beta1.NamespacedCloudProfile).GetStatus().GetCloudProfileSpec().GetSeedSelector())
			}},
			{Collection: c.configMaps, Map: func(o store.Object) []controller.Key {
				if isRegionConfig(o.(*kcorev1.ConfigMap)) {
					return []controller.Key{landscapeKey}
				}
				return nil
			}, Digest: func(o store.Object) string {
				cm := o.(*kcorev1.ConfigMap)
				if !isRegionConfig(cm) {
					return ""
				}
				return hash(&kcorev1.ConfigMap{Data: cm.GetData(), Metadata: &metav1.ObjectMeta{Annotations: cm.GetMetadata().GetAnnotations()}})
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	// A seed that lost a shoot has room again: retry the waiting shoots (coalesced with other changes).
	u.freed = func() { landscape.Enqueue(landscapeKey) }
	return &Controllers{usage: u, events: events, schedule: schedule, landscape: landscape}, nil
}

// Run schedules shoots until ctx ends.
func (c *Controllers) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { c.usage.run(ctx) })
	wg.Go(func() { c.events.run(ctx) })
	wg.Go(func() { _ = c.schedule.Run(ctx) })
	wg.Go(func() { _ = c.landscape.Run(ctx) })
	wg.Wait()
	return nil
}

// pendingShoot maps a shoot to its own key while it waits for this scheduler (Gardener's predicates), else to none.
func pendingShoot(o store.Object) []controller.Key {
	if Pending(o.(*corev1beta1.Shoot)) {
		return []controller.Key{keyOf(o)}
	}
	return nil
}

// shootDigest is what of a shoot starts a new scheduling attempt: its spec (metadata.generation moves with every
// spec change, as Gardener's ShootSpecChangedPredicate asks) and its deletion. Status writes, the scheduler's own
// lastOperation among them, do not.
func shootDigest(o store.Object) string {
	return fmt.Sprintf("%d|%t", o.GetMetadata().GetGeneration(), o.GetMetadata().GetDeletionTimestamp() != nil)
}

// seedDigest is what of a seed a scheduling decision reads: labels, spec, deletion, the readiness conditions'
// statuses and the allocatable shoots; heartbeats that only move condition times change nothing.
func seedDigest(o store.Object) string {
	s := o.(*corev1beta1.Seed)
	var b strings.Builder
	b.WriteString(hash(s.GetSpec()))
	for _, k := range slices.Sorted(maps.Keys(s.GetMetadata().GetLabels())) {
		b.WriteString("|" + k + "=" + s.GetMetadata().GetLabels()[k])
	}
	fmt.Fprintf(&b, "|%t|%s|%s|%s", s.GetMetadata().GetDeletionTimestamp() != nil, conditionStatus(s, ConditionGardenletReady),
		conditionStatus(s, ConditionBackupBucketsReady), s.GetStatus().GetAllocatable()[ResourceShoots])
	return b.String()
}

func isRegionConfig(cm *kcorev1.ConfigMap) bool {
	return cm.GetMetadata().GetNamespace() == GardenNamespace &&
		cm.GetMetadata().GetLabels()[LabelSchedulingPurpose] == SchedulingPurposeRegionConfig
}

// hash is a digest of a message's deterministic encoding.
func hash(m proto.Message) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
