package shoot

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// ErrorInfraRateLimitsExceeded is the error code of a failure caused by the infrastructure's rate limits; it is the
// only code Gardener's retry controller retries.
const ErrorInfraRateLimitsExceeded = "ERR_INFRA_RATE_LIMITS_EXCEEDED"

// failedDueToRateLimits reports whether the shoot's last operation failed for its current spec with a last error
// carrying ErrorInfraRateLimitsExceeded.
func failedDueToRateLimits(s *corev1beta1.Shoot) bool {
	if !failedAndUpToDate(s) {
		return false
	}
	for _, le := range s.GetStatus().GetLastErrors() {
		if slices.Contains(le.GetCodes(), ErrorInfraRateLimitsExceeded) {
			return true
		}
	}
	return false
}

// retryDigest: whether the shoot failed due to rate limits. Gardener looks at a shoot when it appears and when it
// turns into such a failure.
func retryDigest(o store.Object) string {
	return strconv.FormatBool(failedDueToRateLimits(o.(*corev1beta1.Shoot)))
}

// retryReconciler retries shoots that failed due to rate limits.
type retryReconciler struct {
	shoots         *store.Collection
	period, jitter time.Duration
	clock          clock.PassiveClock
	rand           func(int64) int64
	log            *slog.Logger
}

// retryAfter decides whether the shoot is retried now (0) or how long to wait: the retry period after the last
// operation's update, plus a random jitter so that shoots failed together are not retried together. now is strictly
// after the period's end to retry, as in Gardener.
func (r *retryReconciler) retryAfter(s *corev1beta1.Shoot, now time.Time) time.Duration {
	due := s.GetStatus().GetLastOperation().GetLastUpdateTime().AsTime().Add(r.period)
	if now.After(due) {
		return 0
	}
	var jitter time.Duration
	if r.jitter > 0 {
		jitter = time.Duration(r.rand(int64(r.jitter)))
	}
	return due.Add(jitter).Sub(now)
}

// Reconcile annotates gardener.cloud/operation=retry on a shoot that failed due to rate limits once the retry period
// has passed; the agent then reconciles it again.
func (r *retryReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.shoots, k)
	if err != nil || s == nil || !failedDueToRateLimits(s) {
		return controller.Result{}, err
	}
	if wait := r.retryAfter(s, r.clock.Now()); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	r.log.Info("retrying the shoot that failed due to rate limits", "shoot", k.String())
	_, err = updateShoot(ctx, r.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
		if !failedDueToRateLimits(cur) || cur.GetMetadata().GetAnnotations()[AnnotationOperation] == OperationRetry {
			return false
		}
		setAnnotation(cur, AnnotationOperation, OperationRetry)
		return true
	})
	return controller.Result{}, err
}
