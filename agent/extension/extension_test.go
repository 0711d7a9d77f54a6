package extension

import (
	"errors"
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// TestCheckReady covers Gardener's readiness rule for extension objects, one broken clause at a time.
func TestCheckReady(t *testing.T) {
	ts := time.Date(2026, 11, 22, 12, 0, 0, 500_000_000, time.UTC)
	ready := func() *extensionsv1alpha1.Infrastructure {
		o := &extensionsv1alpha1.Infrastructure{ObjectMeta: kmetav1.ObjectMeta{Name: "s", Namespace: "shoot--p--s", Generation: 2,
			Annotations: map[string]string{extensionsv1alpha1.AnnotationTimestamp: ts.Format(time.RFC3339Nano)}}}
		o.Status.ObservedGeneration = 2
		// Extensions write seconds: an update in the same second as the request counts.
		o.Status.LastOperation = &extensionsv1alpha1.LastOperation{Type: extensionsv1alpha1.LastOperationTypeReconcile,
			State: extensionsv1alpha1.LastOperationStateSucceeded, LastUpdateTime: kmetav1.NewTime(ts.Truncate(time.Second))}
		return o
	}
	if err := CheckReady(ready(), ""); err != nil {
		t.Fatalf("ready object: %v", err)
	}
	for name, tc := range map[string]struct {
		break_ func(*extensionsv1alpha1.Infrastructure)
		coded  bool
	}{
		"last error": {func(o *extensionsv1alpha1.Infrastructure) {
			o.Status.LastError = &extensionsv1alpha1.LastError{Description: "quota", Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraQuotaExceeded}}
		}, true},
		"old generation": {func(o *extensionsv1alpha1.Infrastructure) { o.Status.ObservedGeneration = 1 }, false},
		"annotation left": {func(o *extensionsv1alpha1.Infrastructure) {
			o.Annotations[extensionsv1alpha1.AnnotationOperation] = "reconcile"
		}, false},
		"no last operation": {func(o *extensionsv1alpha1.Infrastructure) { o.Status.LastOperation = nil }, false},
		"processing": {func(o *extensionsv1alpha1.Infrastructure) {
			o.Status.LastOperation.State = extensionsv1alpha1.LastOperationStateProcessing
		}, false},
		"older than timestamp": {func(o *extensionsv1alpha1.Infrastructure) {
			o.Status.LastOperation.LastUpdateTime = kmetav1.NewTime(ts.Add(-time.Second))
		}, false},
	} {
		o := ready()
		tc.break_(o)
		err := CheckReady(o, "")
		if err == nil {
			t.Errorf("%s: want not ready", name)
			continue
		}
		var ce *CodedError
		if errors.As(err, &ce) != tc.coded {
			t.Errorf("%s: coded error %v, want %v (%v)", name, !tc.coded, tc.coded, err)
		}
		if tc.coded && (len(Codes(err)) != 1 || !HasNonRetryable(Codes(err))) {
			t.Errorf("%s: codes %v", name, Codes(err))
		}
	}
	if err := CheckReady(ready(), extensionsv1alpha1.LastOperationTypeMigrate); err == nil {
		t.Error("a reconciled object is not migrated")
	}
}
