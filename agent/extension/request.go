package extension

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// PickupTimeout is how long an extension may take to report a first lastOperation after it removed the operation
// annotation before the object is requested again (polls may fall between the two).
const PickupTimeout = 30 * time.Second

// RequestedAt is the time of obj's last request, its gardener.cloud/timestamp; zero when it has none.
func RequestedAt(obj extensionsv1alpha1.Object) time.Time {
	ts, _ := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp])
	return ts
}

// Rerequest says why obj, an existing object whose spec is as wanted, is to be requested again (Deploy), or "" when
// it is not: "not reconciled" when its extension took the last request (the operation annotation is gone) but
// reported no lastOperation within PickupTimeout of it, "last operation failed" when its last operation Failed.
func Rerequest(obj extensionsv1alpha1.Object, now time.Time) string {
	lo := obj.GetExtensionStatus().LastOperation
	_, annotated := obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation]
	switch {
	case lo == nil && !annotated && now.Sub(RequestedAt(obj)) > PickupTimeout:
		return "not reconciled"
	case lo != nil && lo.State == extensionsv1alpha1.LastOperationStateFailed:
		return "last operation failed"
	}
	return ""
}

// Raced reports whether a write of an extension object failed for a reason to look again at it later rather than
// an error: a conflict with the extension's own write, or the create of an object the informer cache does not show
// yet.
func Raced(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}
