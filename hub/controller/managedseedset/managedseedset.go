package managedseedset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// ControllerName names the controller in logs and in --controllers, as Gardener names it.
const ControllerName = "managedseedset"

// The ManagedSeedSet kind.
const (
	Group      = "seedmanagement.gardener.cloud"
	APIVersion = Group + "/v1alpha1"
	Kind       = "ManagedSeedSet"
)

// Names Gardener gives to what the controller reads and writes.
const (
	// FinalizerGardener keeps a set until its replicas are gone.
	FinalizerGardener = "gardener"
	// AnnotationProtectFromDeletion=true on a replica's Shoot or ManagedSeed keeps scale-in from choosing it.
	AnnotationProtectFromDeletion = "seedmanagement.gardener.cloud/protect-from-deletion"
	// AnnotationConfirmDeletion=true must be on a Shoot before it may be deleted.
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
	// AnnotationOperation with OperationRetry asks the agent to retry a shoot's failed operation.
	AnnotationOperation = "gardener.cloud/operation"
	OperationRetry      = "retry"
	// LabelShootStatus is the shoot's health, kept by the shoot-statuslabel controller.
	LabelShootStatus = "shoot.gardener.cloud/status"
	// GardenNamespace holds ManagedSeeds: a Seed's ManagedSeed has the seed's name there.
	GardenNamespace = "garden"
)

// Conditions the controller reads.
const (
	ConditionSeedRegistered              = "SeedRegistered"
	ConditionGardenletReady              = "GardenletReady"
	ConditionSeedSystemComponentsHealthy = "SeedSystemComponentsHealthy"
	ConditionBackupBucketsReady          = "BackupBucketsReady"
)

// Reasons of status.pendingReplica, Gardener's PendingReplicaReason.
const (
	ReasonShootReconciling     = "ShootReconciling"
	ReasonShootDeleting        = "ShootDeleting"
	ReasonShootReconcileFailed = "ShootReconcileFailed"
	ReasonShootDeleteFailed    = "ShootDeleteFailed"
	ReasonManagedSeedPreparing = "ManagedSeedPreparing"
	ReasonManagedSeedDeleting  = "ManagedSeedDeleting"
	ReasonSeedNotReady         = "SeedNotReady"
	ReasonShootNotHealthy      = "ShootNotHealthy"
)

// Event reasons, Gardener's.
const (
	EventCreatingShoot                   = "CreatingShoot"
	EventDeletingShoot                   = "DeletingShoot"
	EventRetryingShootReconciliation     = "RetryingShootReconciliation"
	EventNotRetryingShootReconciliation  = "NotRetryingShootReconciliation"
	EventRetryingShootDeletion           = "RetryingShootDeletion"
	EventNotRetryingShootDeletion        = "NotRetryingShootDeletion"
	EventWaitingForShootReconciled       = "WaitingForShootReconciled"
	EventWaitingForShootDeleted          = "WaitingForShootDeleted"
	EventWaitingForShootHealthy          = "WaitingForShootHealthy"
	EventCreatingManagedSeed             = "CreatingManagedSeed"
	EventDeletingManagedSeed             = "DeletingManagedSeed"
	EventWaitingForManagedSeedRegistered = "WaitingForManagedSeedRegistered"
	EventWaitingForManagedSeedDeleted    = "WaitingForManagedSeedDeleted"
	EventWaitingForSeedReady             = "WaitingForSeedReady"
	// EventReconcileError (Warning) carries the error of a failed reconciliation.
	EventReconcileError = "ReconcileError"
)

// Gardener's defaults of controllers.managedSeedSet.
const (
	DefaultWorkers         = 5
	DefaultMaxShootRetries = 3
	DefaultSyncPeriod      = 30 * time.Minute
)

// Config configures the controller; the zero values are Gardener's defaults.
type Config struct {
	Source controller.Collections
	// Admission are the admission plugins the replicas' Shoots and ManagedSeeds are defaulted and validated with,
	// as the API would (the hub's: admission.Builtin()); required.
	Admission admission.Plugins
	// Workers is concurrentSyncs (default 5).
	Workers int
	// MaxShootRetries is how often a replica's failed shoot operation is retried (nil: 3; 0: never).
	MaxShootRetries *int
	// SyncPeriod is how often every set is reconciled besides the changes watched (default 30m).
	SyncPeriod time.Duration
	// Clock is the controller's clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.MaxShootRetries == nil || *c.MaxShootRetries < 0 {
		n := DefaultMaxShootRetries
		c.MaxShootRetries = &n
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// NewReconciler returns the reconciler the controller runs, on cfg's collections.
func NewReconciler(cfg Config) (*Reconciler, error) {
	if cfg.Source == nil {
		return nil, errors.New("managedseedset: no source")
	}
	if cfg.Admission.Len() == 0 {
		return nil, errors.New("managedseedset: admission: no admission plugins (the API's are admission.Builtin())")
	}
	cfg.defaults()
	r := &Reconciler{maxShootRetries: *cfg.MaxShootRetries, syncPeriod: cfg.SyncPeriod, clock: cfg.Clock,
		log: cfg.Log.With("controller", ControllerName), admission: admission.CollectionsReader{Source: cfg.Source}, plugins: cfg.Admission}
	var events *store.Collection
	if err := controller.OpenCollections(cfg.Source, ControllerName, map[schema.GroupResource]**store.Collection{
		{Group: Group, Resource: "managedseedsets"}: &r.sets, {Group: Group, Resource: "managedseeds"}: &r.managedSeeds,
		{Group: "core.gardener.cloud", Resource: "shoots"}: &r.shoots, {Group: "core.gardener.cloud", Resource: "seeds"}: &r.seeds,
		{Resource: "events"}: &events,
	}); err != nil {
		return nil, err
	}
	r.recorder = &controller.Recorder{Events: events, Component: ControllerName + "-controller", Clock: cfg.Clock, Log: r.log}
	return r, nil
}

// New returns the ManagedSeedSet controller for cfg.
func New(cfg Config) (controller.Group, error) {
	r, err := NewReconciler(cfg)
	if err != nil {
		return nil, err
	}
	cfg.defaults()
	c, err := controller.New(controller.Config{Name: ControllerName, Reconciler: r, Workers: cfg.Workers,
		Clock: cfg.Clock, Log: cfg.Log,
		Sources: []controller.Source{
			{Collection: r.sets, Digest: setDigest},
			{Collection: r.shoots, Map: ownerKeys, Digest: shootDigest},
			{Collection: r.managedSeeds, Map: ownerKeys, Digest: managedSeedDigest},
			{Collection: r.seeds, Map: r.setOfSeed, Digest: seedDigest},
		}})
	if err != nil {
		return nil, err
	}
	return controller.Group{c}, nil
}

// setDigest: a set is looked at when its spec changes (Gardener's GenerationChangedPredicate) or its deletion starts
// (Kubernetes moves the generation then; the hub's store does not).
func setDigest(o store.Object) string {
	md := o.GetMetadata()
	return fmt.Sprintf("%d|%t", md.GetGeneration(), md.GetDeletionTimestamp() != nil)
}

// shootDigest: what of a replica's Shoot the rules read: the outcome of its operation, its health, its deletion and
// its protection. The retry annotation is left out: the controller's own retry triggers nothing, and the agent taking
// it is followed by the write of its Processing operation, which does.
func shootDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	md := s.GetMetadata()
	return fmt.Sprintf("%s|%s|%t|%t", (&replica{shoot: s}).status(), shootHealth(s), md.GetDeletionTimestamp() != nil, protected(md))
}

// managedSeedDigest: its registration, deletion and protection.
func managedSeedDigest(o store.Object) string {
	ms := o.(*seedmanagementv1alpha1.ManagedSeed)
	return fmt.Sprintf("%t|%t|%t", managedSeedRegistered(ms), ms.GetMetadata().GetDeletionTimestamp() != nil, protected(ms.GetMetadata()))
}

// seedDigest: its readiness (Gardener looks at a seed when it turns ready or not).
func seedDigest(o store.Object) string { return fmt.Sprintf("%t", seedReady(o.(*corev1beta1.Seed))) }

// ownerKeys maps a Shoot or ManagedSeed to the set controlling it.
func ownerKeys(o store.Object) []controller.Key {
	md := o.GetMetadata()
	if name := controllerOf(md); name != "" {
		return []controller.Key{{Namespace: md.GetNamespace(), Name: name}}
	}
	return nil
}

// setOfSeed maps a Seed to the set controlling the ManagedSeed of the same name in the garden namespace.
func (r *Reconciler) setOfSeed(o store.Object) []controller.Key {
	ms, err := r.managedSeeds.Get(context.Background(), GardenNamespace, o.GetMetadata().GetName())
	if err != nil {
		return nil
	}
	return ownerKeys(ms)
}
