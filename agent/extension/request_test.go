package extension

import (
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestRerequest: an object is requested again when its extension took the request but answered nothing within
// PickupTimeout, or when its last operation Failed; not while the request waits to be taken, nor when it has an
// answer that is not Failed.
func TestRerequest(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	obj := func(requested time.Duration, annotated bool, state extensionsv1alpha1.LastOperationState) *extensionsv1alpha1.BackupBucket {
		o := &extensionsv1alpha1.BackupBucket{ObjectMeta: kmetav1.ObjectMeta{Name: "b",
			Annotations: map[string]string{extensionsv1alpha1.AnnotationTimestamp: now.Add(-requested).Format(time.RFC3339Nano)}}}
		if annotated {
			o.Annotations[extensionsv1alpha1.AnnotationOperation] = extensionsv1alpha1.OperationReconcile
		}
		if state != "" {
			o.Status.LastOperation = &extensionsv1alpha1.LastOperation{State: state}
		}
		return o
	}
	for _, tc := range []struct {
		name string
		obj  *extensionsv1alpha1.BackupBucket
		want string
	}{
		{"taken, no answer past the timeout", obj(PickupTimeout+time.Second, false, ""), "not reconciled"},
		{"taken, no answer yet", obj(PickupTimeout-time.Second, false, ""), ""},
		{"not taken yet", obj(time.Hour, true, ""), ""},
		{"never requested", &extensionsv1alpha1.BackupBucket{}, "not reconciled"},
		{"failed", obj(time.Hour, false, extensionsv1alpha1.LastOperationStateFailed), "last operation failed"},
		{"error", obj(time.Hour, false, extensionsv1alpha1.LastOperationStateError), ""},
		{"succeeded", obj(time.Hour, false, extensionsv1alpha1.LastOperationStateSucceeded), ""},
	} {
		if got := Rerequest(tc.obj, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSameJSON: documents are compared as values; absent, empty and null are the same; what is not JSON is compared
// as bytes.
func TestSameJSON(t *testing.T) {
	raw := func(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
	for _, tc := range []struct {
		a, b *runtime.RawExtension
		want bool
	}{
		{raw(`{"a":1,"b":[1,2]}`), raw(`{ "b": [1, 2], "a": 1 }`), true},
		{raw(`{"a":1}`), raw(`{"a":2}`), false},
		{nil, raw(`null`), true},
		{nil, raw(``), true},
		{nil, raw(`{}`), false},
		{raw(`not json`), raw(`not json`), true},
		{raw(`not json`), raw(`not  json`), false},
	} {
		if got := SameJSON(tc.a, tc.b); got != tc.want {
			t.Errorf("SameJSON(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	hub := &metav1.RawExtension{Raw: []byte(`{"tier":"cold"}`)}
	r := RawExtension(hub)
	hub.Raw[2] = 'T'
	if string(r.Raw) != `{"tier":"cold"}` {
		t.Errorf("RawExtension shares the hub's bytes: %s", r.Raw)
	}
	if RawExtension(nil) != nil || RawExtension(&metav1.RawExtension{}) != nil {
		t.Error("RawExtension of nothing is not nil")
	}
}
