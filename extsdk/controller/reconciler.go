package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// reconciler is the generic reconciler of one kind and type.
type reconciler[T extensionsv1alpha1.Object] struct {
	client client.Client // writes
	reader client.Reader // live reads of the objects and Clusters
	args   AddArgs[T]
	noun   string // the kind in lowercase, for descriptions

	// retrying holds the objects whose last run failed: their retry runs even if the object no longer shows why
	// (the run had removed the reconcile annotation, then failed before it could report Processing).
	retrying sync.Map // types.NamespacedName → struct{}
}

// tracer makes a span per run that has work to do.
var tracer = otel.Tracer("github.com/trellis-dev/trellis/extsdk/controller")

// Reconcile runs one operation on the object named by req, if the object still asks for one, and notes a failure
// for the retry.
func (r *reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	_, retry := r.retrying.LoadAndDelete(req.NamespacedName)
	res, err := r.reconcileOnce(ctx, req, retry)
	if err != nil || res.RequeueAfter > 0 {
		r.retrying.Store(req.NamespacedName, struct{}{})
	}
	return res, err
}

// reconcileOnce is one run. The object and its Cluster are read live, not from the cache: requests are rare (the
// agent asks), the events of a run's own writes queue the object again while a migrate or restore annotation is
// still on it, and that run must see the object as it is, not an older cached copy that would repeat the operation;
// likewise it must see the Cluster the agent updated just before (force deletion). Every write is a patch whose
// response updates the object in hand, so one run works on a consistent object.
func (r *reconciler[T]) reconcileOnce(ctx context.Context, req reconcile.Request, retry bool) (_ reconcile.Result, err error) {
	log := logf.FromContext(ctx)
	obj := r.args.NewObject()
	if err := r.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !retry && !r.args.IgnoreOperationAnnotation && !asksForWork(obj) {
		log.V(1).Info("Nothing to do")
		return reconcile.Result{}, nil
	}
	// A run continues the trace the agent handed over in the trellis.dev/traceparent annotation (the shoot operation
	// that asked for it); without one it starts a trace of its own, sampled as configured.
	ctx, span := tracer.Start(tracing.WithTraceparent(ctx, obj.GetAnnotations()[tracing.Annotation]),
		"reconcile "+r.noun+" "+req.String())
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()

	// The operation annotation: wait-for-state means the agent is still writing the state to restore from;
	// reconcile is acknowledged by removing it before the work starts, so that a new request that arrives during the
	// work is not lost. migrate and restore stay until the operation succeeded.
	switch obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation] {
	case extensionsv1alpha1.OperationWaitForState:
		log.V(1).Info("Waiting for the state to be restored")
		return reconcile.Result{}, nil
	case extensionsv1alpha1.OperationReconcile:
		if err := r.removeOperationAnnotation(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}

	var cluster *extsdk.Cluster
	if ns := obj.GetNamespace(); ns != "" {
		c, err := extsdk.GetCluster(ctx, r.reader, ns)
		switch {
		case err == nil:
			cluster = c
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			// The seed's garden namespace (e.g. the seed's own DNSRecords) has no Cluster.
		default:
			return reconcile.Result{}, err
		}
	}
	if cluster.ShootFailed() {
		log.Info("Skipping the object of a failed shoot")
		return reconcile.Result{}, nil
	}

	op := ComputeOperationType(obj)
	if ShouldSkipOperation(op, obj) {
		log.V(1).Info("Skipping a migrated object", "operation", op)
		return reconcile.Result{}, nil
	}
	log = log.WithValues("operation", op)
	ctx = logf.IntoContext(ctx, log)
	switch {
	case op == extensionsv1alpha1.LastOperationTypeMigrate:
		return r.migrate(ctx, log, obj, cluster)
	case obj.GetDeletionTimestamp() != nil:
		return r.delete(ctx, log, obj, cluster)
	case op == extensionsv1alpha1.LastOperationTypeRestore:
		return r.restore(ctx, log, obj, cluster)
	default:
		return r.reconcile(ctx, log, obj, cluster, op)
	}
}

func (r *reconciler[T]) reconcile(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster,
	op extensionsv1alpha1.LastOperationType) (reconcile.Result, error) {
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.processing(ctx, obj, op, "Reconciling the "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	base := copyOf(obj)
	err := r.call(ctx, func(ctx context.Context) error {
		if err := r.validate(ctx, obj, cluster); err != nil {
			return err
		}
		return r.args.Actuator.Reconcile(ctx, log, obj, cluster)
	})
	if err != nil {
		return r.failed(ctx, log, obj, base, op, "Error reconciling "+r.noun, err)
	}
	return reconcile.Result{}, r.succeeded(ctx, log, obj, base, op, "Successfully reconciled "+r.noun)
}

func (r *reconciler[T]) delete(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, r.args.Finalizer) {
		log.V(1).Info("Deletion without our finalizer is a no-op")
		return reconcile.Result{}, nil
	}
	op := extensionsv1alpha1.LastOperationTypeDelete
	if err := r.processing(ctx, obj, op, "Deleting the "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	base := copyOf(obj)
	err := r.call(ctx, func(ctx context.Context) error {
		if fd, ok := r.args.Actuator.(ForceDeleter[T]); ok && cluster.ShootForceDeletion() {
			log.Info("Force-deleting")
			return fd.ForceDelete(ctx, log, obj, cluster)
		}
		return r.args.Actuator.Delete(ctx, log, obj, cluster)
	})
	if err != nil {
		return r.failed(ctx, log, obj, base, op, "Error deleting "+r.noun, err)
	}
	if err := r.succeeded(ctx, log, obj, base, op, "Successfully deleted "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.removeFinalizer(ctx, obj)
}

func (r *reconciler[T]) migrate(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) (reconcile.Result, error) {
	op := extensionsv1alpha1.LastOperationTypeMigrate
	if err := r.processing(ctx, obj, op, "Starting migration of the "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	base := copyOf(obj)
	err := r.call(ctx, func(ctx context.Context) error {
		if m, ok := r.args.Actuator.(Migrator[T]); ok {
			return m.Migrate(ctx, log, obj, cluster)
		}
		return nil
	})
	if err != nil {
		return r.failed(ctx, log, obj, base, op, "Error migrating "+r.noun, err)
	}
	if err := r.succeeded(ctx, log, obj, base, op, "Successfully migrated "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.removeFinalizer(ctx, obj); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.removeOperationAnnotation(ctx, obj)
}

func (r *reconciler[T]) restore(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) (reconcile.Result, error) {
	op := extensionsv1alpha1.LastOperationTypeRestore
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.processing(ctx, obj, op, "Restoring the "+r.noun); err != nil {
		return reconcile.Result{}, err
	}
	base := copyOf(obj)
	err := r.call(ctx, func(ctx context.Context) error {
		if err := r.validate(ctx, obj, cluster); err != nil {
			return err
		}
		if rs, ok := r.args.Actuator.(Restorer[T]); ok {
			return rs.Restore(ctx, log, obj, cluster)
		}
		return r.args.Actuator.Reconcile(ctx, log, obj, cluster)
	})
	if err != nil {
		return r.failed(ctx, log, obj, base, op, "Error restoring "+r.noun, err)
	}
	// Gardener's order: the annotation goes before the success is reported. Until both are written the object reads
	// as an unfinished Restore and is restored again. The annotation is removed through a copy so that obj keeps the
	// actuator's status changes for the status patch.
	if err := r.removeOperationAnnotation(ctx, copyOf(obj)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.succeeded(ctx, log, obj, base, op, "Successfully restored "+r.noun)
}

// asksForWork says whether obj, as it is now, asks for an operation: the conditions of DefaultPredicate's create
// case, which hold for every event it admits as long as the request is not done.
func asksForWork(obj extensionsv1alpha1.Object) bool {
	last := obj.GetExtensionStatus().LastOperation
	return hasOperationAnnotation(obj) || obj.GetDeletionTimestamp() != nil ||
		last == nil || last.State != extensionsv1alpha1.LastOperationStateSucceeded
}

// call runs f with the actuator's timeout; the status writes after it keep the outer context, so that a timeout is
// still reported.
func (r *reconciler[T]) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.args.Timeout)
	defer cancel()
	return f(ctx)
}

// validate runs the ConfigValidator, if any.
func (r *reconciler[T]) validate(ctx context.Context, obj T, cluster *extsdk.Cluster) error {
	if r.args.ConfigValidator == nil {
		return nil
	}
	errs := r.args.ConfigValidator.Validate(ctx, obj, cluster)
	if len(errs) == 0 {
		return nil
	}
	if internal := errs.Filter(field.NewErrorTypeMatcher(field.ErrorTypeInternal)); len(internal) < len(errs) {
		// Filter drops the matching errors: an internal error among them is the extension's fault, not the user's.
		return errs.ToAggregate()
	}
	return extsdk.WithCodes(errs.ToAggregate(), extensionsv1alpha1.ErrorConfigurationProblem)
}

// failed reports err and returns the result that retries: after the error's delay for a RequeueAfterError, else
// with the controller's backoff.
func (r *reconciler[T]) failed(ctx context.Context, log logr.Logger, obj, base T,
	op extensionsv1alpha1.LastOperationType, description string, err error) (reconcile.Result, error) {
	cause := err
	requeue := extsdk.AsRequeueAfter(err)
	if requeue != nil && requeue.Cause != nil {
		cause = requeue.Cause
	}
	if serr := r.errored(ctx, obj, base, op, description, cause); serr != nil {
		log.Error(serr, "Could not report the error")
	}
	if requeue != nil {
		log.Info("Requeueing", "after", requeue.RequeueAfter, "reason", cause)
		return reconcile.Result{RequeueAfter: requeue.RequeueAfter}, nil
	}
	return reconcile.Result{}, fmt.Errorf("%s: %w", description, err)
}

// ensureFinalizer adds the finalizer. The patch carries the resourceVersion: finalizers are a list, and a merge
// patch would drop one another client added meanwhile.
func (r *reconciler[T]) ensureFinalizer(ctx context.Context, obj T) error {
	if controllerutil.ContainsFinalizer(obj, r.args.Finalizer) {
		return nil
	}
	base := copyOf(obj)
	controllerutil.AddFinalizer(obj, r.args.Finalizer)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// removeFinalizer removes the finalizer, with the same care as ensureFinalizer. An object already gone is fine.
func (r *reconciler[T]) removeFinalizer(ctx context.Context, obj T) error {
	if !controllerutil.ContainsFinalizer(obj, r.args.Finalizer) {
		return nil
	}
	base := copyOf(obj)
	controllerutil.RemoveFinalizer(obj, r.args.Finalizer)
	err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// removeOperationAnnotation removes gardener.cloud/operation if it still has the value obj shows, with a JSON patch
// that tests the value first: a new request the agent wrote meanwhile (restore right after migrate) must not be
// removed with the old one. A failed test is an error; the retry then sees the new request.
func (r *reconciler[T]) removeOperationAnnotation(ctx context.Context, obj T) error {
	value, ok := obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation]
	if !ok {
		return nil
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(extensionsv1alpha1.AnnotationOperation, "~", "~0"), "/", "~1")
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("remove annotation %s=%s: %w", extensionsv1alpha1.AnnotationOperation, value, err)
	}
	return nil
}

// copyOf returns a deep copy of obj.
func copyOf[T extensionsv1alpha1.Object](obj T) T {
	return obj.DeepCopyObject().(T)
}

// now returns the time to write as lastUpdateTime: the clock's, but not before the gardener.cloud/timestamp the
// agent wrote with its request. The agent counts the object ready only when lastUpdateTime is at or after that
// timestamp (both truncated to the second), and the agent's clock may run ahead of ours.
func (r *reconciler[T]) now(obj T) time.Time {
	now := r.args.Clock.Now()
	if v, ok := obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp]; ok {
		if ts, err := time.Parse(time.RFC3339Nano, v); err == nil && ts.After(now) {
			return ts
		}
	}
	return now
}
