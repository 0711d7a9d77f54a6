package shoot

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// failedWith returns a mutation giving a shoot a last operation in state at lastUpdate and last errors with codes.
func failedWith(state string, lastUpdate time.Time, observed int64, codes ...string) func(*corev1beta1.Shoot) {
	return func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{ObservedGeneration: ptr(observed),
			LastOperation: &metav1.LastOperation{Type: "Reconcile", State: state, LastUpdateTime: timestamppb.New(lastUpdate)},
			LastErrors:    []*metav1.LastError{{Description: "boom", Codes: codes}}}
	}
}

func TestFailedDueToRateLimits(t *testing.T) {
	now := testNow
	for _, tc := range []struct {
		name string
		s    *corev1beta1.Shoot
		want bool
	}{
		{"failed with the code", newShoot("s", withGeneration(1), failedWith("Failed", now, 1, "ERR_CONFIGURATION_PROBLEM", ErrorInfraRateLimitsExceeded)), true},
		{"failed with other codes", newShoot("s", withGeneration(1), failedWith("Failed", now, 1, "ERR_INFRA_QUOTA_EXCEEDED")), false},
		{"error, not failed", newShoot("s", withGeneration(1), failedWith("Error", now, 1, ErrorInfraRateLimitsExceeded)), false},
		{"spec changed since", newShoot("s", withGeneration(2), failedWith("Failed", now, 1, ErrorInfraRateLimitsExceeded)), false},
		{"no last operation", newShoot("s"), false},
	} {
		if got := failedDueToRateLimits(tc.s); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func withGeneration(g int64) func(*corev1beta1.Shoot) {
	return func(s *corev1beta1.Shoot) { s.Metadata.Generation = g }
}

func TestRetryAfter(t *testing.T) {
	const period, jitter = 10 * time.Minute, 5 * time.Minute
	failedAt := testNow
	for _, tc := range []struct {
		name string
		now  time.Time
		rand func(int64) int64
		want time.Duration
	}{
		{"at once after the failure: the period", failedAt, func(int64) int64 { return 0 }, period},
		{"with jitter", failedAt, func(n int64) int64 { return n / 2 }, period + jitter/2},
		{"later: the rest", failedAt.Add(4 * time.Minute), func(int64) int64 { return 0 }, 6 * time.Minute},
		{"at the period's end without jitter: now", failedAt.Add(period), func(int64) int64 { return 0 }, 0},
		{"after the period: now", failedAt.Add(period + time.Second), func(int64) int64 { return 0 }, 0},
	} {
		r := &retryReconciler{period: period, jitter: jitter, rand: tc.rand}
		got := r.retryAfter(newShoot("s", failedWith("Failed", failedAt, 1)), tc.now)
		if got != tc.want {
			t.Errorf("%s: retry after %v, want %v", tc.name, got, tc.want)
		}
	}
	r := &retryReconciler{period: period, jitter: 0, rand: func(int64) int64 { panic("no jitter configured") }}
	if got := r.retryAfter(newShoot("s", failedWith("Failed", failedAt, 1)), failedAt); got != period {
		t.Errorf("without jitter: %v", got)
	}
}

// TestRetryReconcile: the retry annotation comes after the period, on the real store with a fake clock.
func TestRetryReconcile(t *testing.T) {
	failedAt := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, failedAt.Add(time.Minute))
	r := &retryReconciler{shoots: e.c.shoots, period: 10 * time.Minute, jitter: 5 * time.Minute, clock: e.clock,
		rand: func(n int64) int64 { return n - 1 }, log: testLog()}
	e.createShoot(newShoot("s", failedWith("Failed", failedAt, 1, ErrorInfraRateLimitsExceeded)))
	e.createShoot(newShoot("other", failedWith("Failed", failedAt, 1, "ERR_INFRA_UNAUTHORIZED")))

	res := reconcile(t, r, "s")
	if want := 9*time.Minute + 5*time.Minute - time.Nanosecond; res.RequeueAfter != want {
		t.Fatalf("requeue after %v, want %v", res.RequeueAfter, want)
	}
	if _, ok := e.shoot("s").GetMetadata().GetAnnotations()[AnnotationOperation]; ok {
		t.Fatal("retried before the period")
	}
	e.clock.Step(res.RequeueAfter)
	if res := reconcile(t, r, "s"); res.RequeueAfter != 0 {
		t.Fatalf("requeue after %v once retried", res.RequeueAfter)
	}
	if got := e.shoot("s").GetMetadata().GetAnnotations()[AnnotationOperation]; got != OperationRetry {
		t.Fatalf("operation %q, want retry", got)
	}
	if gen := e.shoot("s").GetMetadata().GetGeneration(); gen != 1 {
		t.Fatalf("the annotation moved the generation to %d", gen)
	}
	if res := reconcile(t, r, "other"); res.RequeueAfter != 0 || e.shoot("other").GetMetadata().GetAnnotations()[AnnotationOperation] != "" {
		t.Fatal("a shoot failed for another reason was retried")
	}
}
