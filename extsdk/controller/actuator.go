package controller

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Actuator does the work of an extension for one kind: it makes the world match obj (Reconcile) and removes what it
// made (Delete). Both are called again after an error and must be idempotent.
//
// obj is the object as read, after the reconciler's own patches. The actuator may set status fields on it
// (providerStatus, state, resources and the kind's own fields: nodesCIDR, machineDeployments, cloudConfig, zone,
// generatedSecretRef, ingress, ...); the reconciler writes the status changes together with the final lastOperation.
// It must not write lastOperation, lastError or observedGeneration itself.
//
// cluster is nil when the namespace has no Cluster (the seed's garden namespace, cluster-scoped kinds). Errors may
// carry codes (extsdk.WithCodes) and may ask for a fixed retry delay (extsdk.RequeueAfter).
type Actuator[T extensionsv1alpha1.Object] interface {
	// Reconcile creates or updates what obj asks for.
	Reconcile(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error
	// Delete removes what Reconcile made, including external resources, before the finalizer goes.
	Delete(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error
}

// ForceDeleter is implemented by actuators that delete differently when the shoot is force-deleted
// (confirmation.gardener.cloud/force-deletion=true on the Shoot): strip finalizers of seed objects, do not wait on
// external systems, ignore shoot resources. Without it the reconciler calls Delete.
type ForceDeleter[T extensionsv1alpha1.Object] interface {
	// ForceDelete removes what it can without waiting, before the finalizer goes.
	ForceDelete(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error
}

// Migrator is implemented by actuators that keep objects in the seed: Migrate removes them without touching external
// or shoot resources (finalizers of own custom resources first; ManagedResources with keepObjects) and is the last
// chance to save status.state and status.resources. Without it migration does nothing but report success.
type Migrator[T extensionsv1alpha1.Object] interface {
	// Migrate removes the seed's objects of obj, keeping external and shoot resources, and saves its state in obj.
	Migrate(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error
}

// Restorer is implemented by actuators that restore differently from reconciling: Restore rebuilds what Migrate
// removed from obj.Status.State (the agent put the saved state there before asking for the restore) and then
// reconciles. Without it the reconciler calls Reconcile.
type Restorer[T extensionsv1alpha1.Object] interface {
	// Restore rebuilds from obj.Status.State and reconciles.
	Restore(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error
}

// ConfigValidator checks obj (typically its providerConfig) before Reconcile and Restore. Errors fail the operation
// with code ERR_CONFIGURATION_PROBLEM, which stops automatic retries of the shoot, unless one of them is of type
// field.ErrorTypeInternal: then the problem is the extension's, not the user's, and no code is given.
type ConfigValidator[T extensionsv1alpha1.Object] interface {
	// Validate returns what is wrong with obj; nothing when it is fine.
	Validate(ctx context.Context, obj T, cluster *extsdk.Cluster) field.ErrorList
}
