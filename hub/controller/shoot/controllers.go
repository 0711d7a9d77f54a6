package shoot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/trellis-dev/trellis/hub/admission"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Annotations, labels and operations, as Gardener names them (pkg/apis/core/v1beta1/constants).
const (
	// AnnotationOperation asks for an operation on a shoot; several are separated by ";".
	AnnotationOperation = "gardener.cloud/operation"
	// AnnotationMaintenanceOperation holds operations to be started with the next maintenance.
	AnnotationMaintenanceOperation = "maintenance.gardener.cloud/operation"
	// AnnotationNeedsRetryOperation ("true") on a failed shoot asks the maintenance to retry it.
	AnnotationNeedsRetryOperation = "maintenance.shoot.gardener.cloud/needs-retry-operation"
	// AnnotationTasks lists tasks (comma-separated) the next reconciliation of the shoot should do.
	AnnotationTasks = "shoot.gardener.cloud/tasks"
	// AnnotationExpirationTimestamp is when a shoot with a limited lifetime is deleted (RFC 3339).
	AnnotationExpirationTimestamp = "shoot.gardener.cloud/expiration-timestamp"
	// AnnotationConfirmDeletion must be "true" before a shoot may be deleted.
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
	// LabelStatus is the shoot's health summary.
	LabelStatus = "shoot.gardener.cloud/status"

	// OperationReconcile asks the agent to reconcile the shoot, OperationRetry to retry its failed operation,
	// OperationMaintain the maintenance controller to maintain it now.
	OperationReconcile = "reconcile"
	OperationRetry     = "retry"
	OperationMaintain  = "maintain"

	operationsSeparator = ";"
	tasksSeparator      = ","
)

// Tasks the maintenance adds to AnnotationTasks.
const (
	TaskDeployInfrastructure    = "deployInfrastructure"
	TaskDeployDNSRecordInternal = "deployDNSRecordInternal"
	TaskDeployDNSRecordExternal = "deployDNSRecordExternal"
	TaskDeployDNSRecordIngress  = "deployDNSRecordIngress"
	TaskRestartControlPlanePods = "restartControlPlanePods"
	TaskRestartCoreAddons       = "restartCoreAddons"
)

// States of status.lastOperation and status.lastMaintenance.
const (
	lastOperationStateFailed     = "Failed"
	lastOperationStateProcessing = "Processing"
	lastOperationStateSucceeded  = "Succeeded"
)

const (
	// eventComponent reports the controllers' Events.
	eventComponent = "gardener-controller-manager"
	// Gardener's defaults (also those of hub/componentconfig).
	defaultWorkers         = 5
	defaultTriggerDeadline = 2 * time.Hour
	defaultQuotaSyncPeriod = time.Hour
	defaultRetryPeriod     = 10 * time.Minute
)

// HibernationConfig configures the hibernation schedule controller (Gardener's shootHibernation section).
type HibernationConfig struct {
	// Workers is how many shoots are looked at at once (default 5).
	Workers int
	// TriggerDeadline is how late a missed schedule is still acted on (default 2h).
	TriggerDeadline time.Duration
}

// MaintenanceConfig configures the maintenance controller (Gardener's shootMaintenance section).
type MaintenanceConfig struct {
	// Workers is how many shoots are maintained at once (default 5).
	Workers int
	// RestartControlPlane and RestartCoreAddons add the tasks restartControlPlanePods and restartCoreAddons to every
	// maintenance (Gardener's enableShootControlPlaneRestarter and enableShootCoreAddonRestarter).
	RestartControlPlane, RestartCoreAddons bool
	// Admission are the admission plugins a maintained shoot is defaulted and validated with before it is written, as
	// the API would (the hub's: admission.Builtin()); required.
	Admission admission.Plugins
}

// QuotaConfig configures the cluster lifetime controller (Gardener's shootQuota section).
type QuotaConfig struct {
	// Workers is how many shoots are looked at at once (default 5).
	Workers int
	// SyncPeriod is how often a shoot's quotas are looked at again (default 1h).
	SyncPeriod time.Duration
}

// RetryConfig configures the retry controller (Gardener's shootRetry section).
type RetryConfig struct {
	// Workers is how many shoots are looked at at once (default 5).
	Workers int
	// Period is how long after its failure a shoot is retried (default 10m).
	Period time.Duration
	// JitterPeriod spreads the retries: a waiting shoot is looked at again up to this much after Period (0: no
	// jitter).
	JitterPeriod time.Duration
}

// WorkersConfig configures a controller that has nothing to configure but its workers.
type WorkersConfig struct {
	// Workers is how many shoots are looked at at once (default 5).
	Workers int
}

// Config configures the Shoot controllers.
type Config struct {
	Source      controller.Collections
	Hibernation HibernationConfig
	Maintenance MaintenanceConfig
	Quota       QuotaConfig
	Retry       RetryConfig
	StatusLabel WorkersConfig
	Conditions  WorkersConfig
	Addresses   AddressesConfig
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	// Rand returns a uniformly random number in [0, n) for n > 0; it picks maintenance times within the window and
	// retry jitter (default math/rand/v2).
	Rand func(n int64) int64
	Log  *slog.Logger
}

func (c *Config) defaults() {
	for _, w := range []*int{&c.Hibernation.Workers, &c.Maintenance.Workers, &c.Quota.Workers, &c.Retry.Workers,
		&c.StatusLabel.Workers, &c.Conditions.Workers, &c.Addresses.Workers} {
		if *w <= 0 {
			*w = defaultWorkers
		}
	}
	if c.Hibernation.TriggerDeadline <= 0 {
		c.Hibernation.TriggerDeadline = defaultTriggerDeadline
	}
	if c.Quota.SyncPeriod <= 0 {
		c.Quota.SyncPeriod = defaultQuotaSyncPeriod
	}
	if c.Retry.Period <= 0 {
		c.Retry.Period = defaultRetryPeriod
	}
	if c.Retry.JitterPeriod < 0 {
		c.Retry.JitterPeriod = 0
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.Int64N
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// collections are the store collections the controllers read and write. events may be nil (no Events recorded).
type collections struct {
	shoots, seeds, cloudProfiles, namespacedCloudProfiles, secretBindings, credentialsBindings, quotas,
	managedSeeds, projects, events *store.Collection
	source controller.Collections
}

var (
	grShoots                  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	grSeeds                   = schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"}
	grCloudProfiles           = schema.GroupResource{Group: "core.gardener.cloud", Resource: "cloudprofiles"}
	grNamespacedCloudProfiles = schema.GroupResource{Group: "core.gardener.cloud", Resource: "namespacedcloudprofiles"}
	grSecretBindings          = schema.GroupResource{Group: "core.gardener.cloud", Resource: "secretbindings"}
	grQuotas                  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "quotas"}
	grCredentialsBindings     = schema.GroupResource{Group: "security.gardener.cloud", Resource: "credentialsbindings"}
	grManagedSeeds            = schema.GroupResource{Group: "seedmanagement.gardener.cloud", Resource: "managedseeds"}
	grEvents                  = schema.GroupResource{Group: "", Resource: "events"}
	grProjects                = schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}
)

func openCollections(src controller.Collections) (*collections, error) {
	c := &collections{source: src}
	if err := controller.OpenCollections(src, "shoot controllers", map[schema.GroupResource]**store.Collection{
		grShoots: &c.shoots, grSeeds: &c.seeds, grCloudProfiles: &c.cloudProfiles,
		grNamespacedCloudProfiles: &c.namespacedCloudProfiles, grSecretBindings: &c.secretBindings,
		grCredentialsBindings: &c.credentialsBindings, grQuotas: &c.quotas, grManagedSeeds: &c.managedSeeds,
		grProjects: &c.projects,
	}); err != nil {
		return nil, err
	}
	c.events, _ = src.Collection(grEvents)
	return c, nil
}

// New returns the Shoot controllers for cfg.
func New(cfg Config) (controller.Group, error) {
	if cfg.Source == nil {
		return nil, errors.New("shoot controllers: no source")
	}
	cfg.defaults()
	c, err := openCollections(cfg.Source)
	if err != nil {
		return nil, err
	}
	if cfg.Maintenance.Admission.Len() == 0 {
		return nil, errors.New("shoot controllers: maintenance.admission: no admission plugins (the API's are admission.Builtin())")
	}
	rec := &controller.Recorder{Events: c.events, Component: eventComponent, Clock: cfg.Clock, Log: cfg.Log}
	newController := func(name string, workers int, r controller.Reconciler, sources ...controller.Source) (*controller.Controller, error) {
		return controller.New(controller.Config{Name: name, Reconciler: r, Workers: workers, Sources: sources,
			Clock: cfg.Clock, Log: cfg.Log})
	}
	var cs controller.Group
	mks := []func() (*controller.Controller, error){
		func() (*controller.Controller, error) {
			return newController("shoot-hibernation", cfg.Hibernation.Workers,
				&hibernationReconciler{shoots: c.shoots, deadline: cfg.Hibernation.TriggerDeadline, clock: cfg.Clock,
					recorder: rec, log: cfg.Log.With("controller", "shoot-hibernation")},
				controller.Source{Collection: c.shoots, Digest: hibernationDigest})
		},
		func() (*controller.Controller, error) {
			return newController("shoot-maintenance", cfg.Maintenance.Workers,
				newMaintenanceReconciler(c, cfg.Maintenance, cfg.Clock, cfg.Rand, rec, cfg.Log.With("controller", "shoot-maintenance")),
				controller.Source{Collection: c.shoots, Digest: maintenanceDigest})
		},
		func() (*controller.Controller, error) {
			return newController("shoot-quota", cfg.Quota.Workers,
				&quotaReconciler{c: c, syncPeriod: cfg.Quota.SyncPeriod, clock: cfg.Clock, log: cfg.Log.With("controller", "shoot-quota")},
				controller.Source{Collection: c.shoots, Digest: quotaDigest})
		},
		func() (*controller.Controller, error) {
			return newController("shoot-retry", cfg.Retry.Workers,
				&retryReconciler{shoots: c.shoots, period: cfg.Retry.Period, jitter: cfg.Retry.JitterPeriod, clock: cfg.Clock,
					rand: cfg.Rand, log: cfg.Log.With("controller", "shoot-retry")},
				controller.Source{Collection: c.shoots, Digest: retryDigest})
		},
		func() (*controller.Controller, error) {
			return newController("shoot-statuslabel", cfg.StatusLabel.Workers,
				&statusLabelReconciler{shoots: c.shoots, log: cfg.Log.With("controller", "shoot-statuslabel")},
				controller.Source{Collection: c.shoots, Digest: statusLabelDigest})
		},
		func() (*controller.Controller, error) {
			r := &conditionsReconciler{c: c, log: cfg.Log.With("controller", "shoot-conditions")}
			return newController("shoot-conditions", cfg.Conditions.Workers, r,
				controller.Source{Collection: c.shoots, Digest: conditionsShootDigest},
				controller.Source{Collection: c.managedSeeds, Map: shootOfManagedSeed, Digest: managedSeedDigest},
				controller.Source{Collection: c.seeds, Map: r.shootsOfSeed, Digest: seedConditionsDigest})
		},
	}
	if cfg.Addresses.External != nil {
		mks = append(mks, func() (*controller.Controller, error) {
			return newController("shoot-addresses", cfg.Addresses.Workers,
				&addressesReconciler{c: c, external: cfg.Addresses.External, log: cfg.Log.With("controller", "shoot-addresses")},
				controller.Source{Collection: c.shoots, Digest: addressesDigest})
		})
	}
	for _, mk := range mks {
		ctrl, err := mk()
		if err != nil {
			return nil, err
		}
		cs = append(cs, ctrl)
	}
	return cs, nil
}

// getShoot reads the shoot key from the cache; nil without error when it is gone. The shoot is shared: clone it
// before modifying it.
func getShoot(ctx context.Context, shoots *store.Collection, key controller.Key) (*corev1beta1.Shoot, error) {
	s, _, err := controller.Get[*corev1beta1.Shoot](ctx, shoots, key)
	if err != nil {
		return nil, fmt.Errorf("read shoot %s: %w", key, err)
	}
	return s, nil
}

// updateShoot applies mutate to the current state of the shoot key and writes the result: status (true) or
// everything else. mutate returns false to write nothing. A shoot that is gone is not an error.
func updateShoot(ctx context.Context, shoots *store.Collection, key controller.Key, status bool, mutate func(*corev1beta1.Shoot) bool) (*corev1beta1.Shoot, error) {
	obj, err := shoots.GuaranteedUpdate(ctx, key.Namespace, key.Name, status, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Shoot)
		if !mutate(s) {
			return nil, nil
		}
		return s, nil
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		what := "shoot"
		if status {
			what = "status of shoot"
		}
		return nil, fmt.Errorf("update the %s %s: %w", what, key, err)
	}
	return obj.(*corev1beta1.Shoot), nil
}

// setAnnotation sets an annotation of md's object, creating the map.
func setAnnotation(s *corev1beta1.Shoot, key, value string) {
	md := s.GetMetadata()
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[key] = value
}

// operations splits an operation annotation's value into its operations, as Gardener's SplitAndTrimString does.
func operations(value string) []string {
	var ops []string
	for _, op := range strings.Split(value, operationsSeparator) {
		if op = strings.TrimSpace(op); op != "" {
			ops = append(ops, op)
		}
	}
	return ops
}

func deletionDigest(o store.Object) string {
	if o.GetMetadata().GetDeletionTimestamp() != nil {
		return "|deleting"
	}
	return ""
}

// hash is a short digest of a message's deterministic encoding.
func hash(m proto.Message) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func key(s *corev1beta1.Shoot) controller.Key {
	return controller.Key{Namespace: s.GetMetadata().GetNamespace(), Name: s.GetMetadata().GetName()}
}
