package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
)

// AnnotationFailPrefix starts the failure-injection annotations: <prefix><kind> fails Reconcile and Restore,
// <prefix>delete-<kind> fails Delete and <prefix>migrate-<kind> fails Migrate of the kind (lowercase, e.g.
// provider.local.trellis.dev/fail-infrastructure). The value is the error code to report
// (ERR_RETRYABLE_INFRA_DEPENDENCIES; several separated by commas); "true" fails without a code, "false" or an empty
// value does not fail. The annotation works on the extension object and on its Shoot (read from the Cluster).
const AnnotationFailPrefix = "provider.local.trellis.dev/fail-"

// Operations that can be made to fail; the empty one is Reconcile and Restore.
const (
	failReconcile = ""
	failDelete    = "delete-"
	failMigrate   = "migrate-"
)

// injectedFailure returns the error the annotations on obj or on the Cluster's Shoot ask for, or nil. The object's
// annotation wins over the Shoot's.
func injectedFailure(kind, op string, obj extensionsv1alpha1.Object, cluster *extsdk.Cluster) error {
	key := AnnotationFailPrefix + op + kind
	value, ok := obj.GetAnnotations()[key]
	where := "object"
	if !ok && cluster != nil {
		value, ok = cluster.Shoot.GetMetadata().GetAnnotations()[key]
		where = "shoot"
	}
	value = strings.TrimSpace(value)
	if !ok || value == "" {
		return nil
	}
	if b, err := strconv.ParseBool(value); err == nil {
		if !b {
			return nil
		}
		return fmt.Errorf("injected failure (annotation %s on the %s)", key, where)
	}
	var codes []extensionsv1alpha1.ErrorCode
	for _, c := range strings.Split(value, ",") {
		if c = strings.TrimSpace(c); c != "" {
			codes = append(codes, extensionsv1alpha1.ErrorCode(c))
		}
	}
	return extsdk.WithCodes(fmt.Errorf("injected failure %s (annotation %s on the %s)", value, key, where), codes...)
}

// guarded wraps a kind's actuator with failure injection and gives it every optional method of the generic
// reconciler: Restore defaults to Reconcile, Migrate to doing nothing, ForceDelete to Delete. ForceDelete ignores
// the injected failures: force deletion is the way out of a Delete that keeps failing.
type guarded[T extensionsv1alpha1.Object] struct {
	inner controller.Actuator[T]
	kind  string // lowercase kind, as in the annotations
	// cluster, when set, finds the Cluster of objects the reconciler has none for (cluster-scoped BackupEntry).
	cluster func(ctx context.Context, obj T) *extsdk.Cluster
}

var (
	_ controller.ForceDeleter[*extensionsv1alpha1.Worker] = (*guarded[*extensionsv1alpha1.Worker])(nil)
	_ controller.Migrator[*extensionsv1alpha1.Worker]     = (*guarded[*extensionsv1alpha1.Worker])(nil)
	_ controller.Restorer[*extensionsv1alpha1.Worker]     = (*guarded[*extensionsv1alpha1.Worker])(nil)
)

func (g *guarded[T]) fail(ctx context.Context, op string, obj T, cluster *extsdk.Cluster) error {
	if cluster == nil && g.cluster != nil {
		cluster = g.cluster(ctx, obj)
	}
	return injectedFailure(g.kind, op, obj, cluster)
}

// Reconcile implements controller.Actuator.
func (g *guarded[T]) Reconcile(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	if err := g.fail(ctx, failReconcile, obj, cluster); err != nil {
		return err
	}
	return g.inner.Reconcile(ctx, log, obj, cluster)
}

// Delete implements controller.Actuator.
func (g *guarded[T]) Delete(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	if err := g.fail(ctx, failDelete, obj, cluster); err != nil {
		return err
	}
	return g.inner.Delete(ctx, log, obj, cluster)
}

// Restore implements controller.Restorer.
func (g *guarded[T]) Restore(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	if err := g.fail(ctx, failReconcile, obj, cluster); err != nil {
		return err
	}
	if r, ok := g.inner.(controller.Restorer[T]); ok {
		return r.Restore(ctx, log, obj, cluster)
	}
	return g.inner.Reconcile(ctx, log, obj, cluster)
}

// Migrate implements controller.Migrator.
func (g *guarded[T]) Migrate(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	if err := g.fail(ctx, failMigrate, obj, cluster); err != nil {
		return err
	}
	if m, ok := g.inner.(controller.Migrator[T]); ok {
		return m.Migrate(ctx, log, obj, cluster)
	}
	return nil
}

// ForceDelete implements controller.ForceDeleter.
func (g *guarded[T]) ForceDelete(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	if f, ok := g.inner.(controller.ForceDeleter[T]); ok {
		return f.ForceDelete(ctx, log, obj, cluster)
	}
	return g.inner.Delete(ctx, log, obj, cluster)
}
