package healthcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// reconciler runs the checks of one kind and type.
type reconciler[T extensionsv1alpha1.Object] struct {
	client client.Client // cached reads of the extension objects, status patches
	reader client.Reader // uncached, for the checks
	args   Args[T]
}

// Reconcile runs one round of checks on the object named by req and comes back after the sync period.
func (r *reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	again := reconcile.Result{RequeueAfter: r.args.SyncPeriod}
	obj := r.args.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	if skip := skipReason(obj); skip != "" {
		log.V(1).Info("Not checking health", "reason", skip)
		return again, nil
	}

	var cluster *extsdk.Cluster
	if ns := obj.GetNamespace(); ns != "" {
		c, err := extsdk.GetCluster(ctx, r.client, ns)
		switch {
		case err == nil:
			cluster = c
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		default:
			return reconcile.Result{}, err
		}
	}

	types := r.conditionTypes()
	var conds []condition
	if cluster.ShootHibernated() {
		for _, t := range types {
			conds = append(conds, condition{typ: t, status: extensionsv1alpha1.ConditionTrue, reason: ReasonSuccessful,
				message: "Shoot is hibernated"})
		}
	} else {
		results := r.run(ctx, Request{Reader: r.reader, Object: obj.DeepCopyObject().(T), Cluster: cluster})
		for _, t := range types {
			conds = append(conds, r.aggregate(obj, t, results[t]))
		}
	}
	if err := r.write(ctx, obj, conds); err != nil {
		return reconcile.Result{}, err
	}
	return again, nil
}

// skipReason says why obj is not checked now, or "".
func skipReason(obj extensionsv1alpha1.Object) string {
	last := obj.GetExtensionStatus().LastOperation
	switch {
	case obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation] == extensionsv1alpha1.OperationMigrate ||
		last != nil && last.Type == extensionsv1alpha1.LastOperationTypeMigrate:
		return "migrating or migrated"
	case last == nil:
		return "never reconciled"
	case (last.Type == extensionsv1alpha1.LastOperationTypeCreate || last.Type == extensionsv1alpha1.LastOperationTypeRestore) &&
		last.State != extensionsv1alpha1.LastOperationStateSucceeded:
		return "not yet created"
	}
	return ""
}

// conditionTypes returns the distinct condition types in the order of the checks.
func (r *reconciler[T]) conditionTypes() []string {
	var out []string
	for _, c := range r.args.Checks {
		if !slices.Contains(out, c.ConditionType) {
			out = append(out, c.ConditionType)
		}
	}
	return out
}

// outcome is one check's result or error.
type outcome struct {
	result Result
	err    error
}

// run runs all checks at once, bounded by the sync period, and groups the outcomes by condition type in the order
// of the checks.
func (r *reconciler[T]) run(ctx context.Context, req Request) map[string][]outcome {
	ctx, cancel := context.WithTimeout(ctx, r.args.SyncPeriod)
	defer cancel()
	out := make([]outcome, len(r.args.Checks))
	var wg sync.WaitGroup
	for i, c := range r.args.Checks {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					out[i] = outcome{err: fmt.Errorf("check panicked: %v", p)}
				}
			}()
			res, err := c.Check.Check(ctx, req)
			out[i] = outcome{result: res, err: err}
		})
	}
	wg.Wait()
	grouped := map[string][]outcome{}
	for i, c := range r.args.Checks {
		grouped[c.ConditionType] = append(grouped[c.ConditionType], out[i])
	}
	return grouped
}

// condition is a condition to write.
type condition struct {
	typ     string
	status  extensionsv1alpha1.ConditionStatus
	reason  string
	message string
	codes   []extensionsv1alpha1.ErrorCode
}

// aggregate turns the outcomes of one condition type into its condition; obj holds the previous condition.
func (r *reconciler[T]) aggregate(obj T, typ string, outcomes []outcome) condition {
	var failed, unsuccessful, progressing []string
	var codes []extensionsv1alpha1.ErrorCode
	threshold := time.Duration(0)
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			failed = append(failed, o.err.Error())
			continue
		case o.result.Status == extensionsv1alpha1.ConditionTrue:
			continue
		case o.result.Status == extensionsv1alpha1.ConditionProgressing:
			progressing = append(progressing, o.result.Detail)
			t := o.result.ProgressingThreshold
			if t <= 0 {
				t = r.args.ProgressingThreshold
			}
			if threshold == 0 || t < threshold {
				threshold = t
			}
		default: // False, and anything a check should not have returned
			unsuccessful = append(unsuccessful, o.result.Detail)
		}
		for _, c := range o.result.Codes {
			if !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
	}
	n := len(outcomes)
	c := condition{typ: typ, codes: codes}
	switch {
	case len(failed) > 0:
		c.status, c.reason = extensionsv1alpha1.ConditionUnknown, ReasonCheckError
		c.message = fmt.Sprintf("(%d/%d) Health checks could not be executed: %s", len(failed), n, details(failed))
		c.codes = nil
	case len(unsuccessful) > 0:
		c.status, c.reason = extensionsv1alpha1.ConditionFalse, ReasonUnsuccessful
		c.message = fmt.Sprintf("(%d/%d) Health checks unsuccessful: %s", len(unsuccessful), n,
			details(append(unsuccessful, progressing...)))
	case len(progressing) > 0:
		c.status, c.reason = extensionsv1alpha1.ConditionProgressing, ReasonProgressing
		c.message = fmt.Sprintf("(%d/%d) Health checks progressing: %s", len(progressing), n, details(progressing))
		// Progressing is a grace period, not a state to stay in: once it ran out, or when the condition is already
		// False (a failure does not become progress again by starting over), it is False.
		if old := extensionsv1alpha1.GetCondition(obj.GetExtensionStatus().Conditions, typ); old != nil {
			expired := old.Status != extensionsv1alpha1.ConditionTrue &&
				r.args.Clock.Since(old.LastTransitionTime.Time) > threshold
			if old.Status == extensionsv1alpha1.ConditionFalse || expired {
				c.status, c.reason = extensionsv1alpha1.ConditionFalse, ReasonUnsuccessful
			}
		}
	default:
		c.status, c.reason = extensionsv1alpha1.ConditionTrue, ReasonSuccessful
		c.message = fmt.Sprintf("(%d/%d) Health checks successful", n, n)
		c.codes = nil
	}
	return c
}

// details joins the details of several checks: "a" or "1) a 2) b".
func details(ds []string) string {
	if len(ds) == 1 {
		return ds[0]
	}
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d) %s", i+1, d)
	}
	return b.String()
}

// write merges conds into obj's conditions and patches the status when anything changed. The patch carries the
// resourceVersion: conditions are a list, and a merge patch replaces lists, so without it a condition another
// controller wrote meanwhile could be lost.
func (r *reconciler[T]) write(ctx context.Context, obj T, conds []condition) error {
	base := obj.DeepCopyObject().(T)
	now := metav1.NewTime(r.args.Clock.Now())
	st := obj.GetExtensionStatus()
	for _, c := range conds {
		old := extensionsv1alpha1.GetCondition(st.Conditions, c.typ)
		if old == nil {
			st.Conditions = append(st.Conditions, extensionsv1alpha1.Condition{
				Type: c.typ, Status: c.status, Reason: c.reason, Message: c.message, Codes: c.codes,
				LastTransitionTime: now, LastUpdateTime: now,
			})
			continue
		}
		if old.Status == c.status && old.Reason == c.reason && old.Message == c.message && slices.Equal(old.Codes, c.codes) {
			continue
		}
		if old.Status != c.status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message, old.Codes, old.LastUpdateTime = c.status, c.reason, c.message, c.codes, now
	}
	if equality.Semantic.DeepEqual(base.GetExtensionStatus().Conditions, st.Conditions) {
		return nil
	}
	// An object deleted since it was read has no health to report: not an error, nothing to retry.
	if err := r.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write health conditions: %w", err)
	}
	return nil
}
