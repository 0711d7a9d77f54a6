package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Messages Kubernetes uses for the same conditions; clients and people recognise them.
const (
	msgConflict        = "the object has been modified; please apply your changes to the latest version and try again"
	msgContinueExpired = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
)

func (c *Collection) notFound(name string) error { return apierrors.NewNotFound(c.gr, name) }

func (c *Collection) conflict(name string) error {
	return apierrors.NewConflict(c.gr, name, errors.New(msgConflict))
}

func (c *Collection) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(c.gk, name, errs)
}

// internal maps an error of etcd or of the codec to a StatusError.
func (c *Collection) internal(op string, err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return apierrors.NewServerTimeout(c.gr, op, 1)
	case errors.Is(err, context.Canceled):
		return apierrors.NewTimeoutError(fmt.Sprintf("%s %s: %v", op, c.gr, err), 1)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		return tooLargeError{apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("%s %s: %v", op, c.gr, err))}
	}
	return apierrors.NewInternalError(fmt.Errorf("%s %s: %w", op, c.gr, err))
}

// tooLargeError is a write etcd refused as larger than its request limit ("etcdserver: request is too large"): 413
// Request Entity Too Large with etcd's reason, which IsRequestTooLarge recognises. kube-apiserver passes etcd's error
// on as a 500; the hub says what it is, as it does for a body over its limit.
type tooLargeError struct{ *apierrors.StatusError }

// IsRequestTooLarge reports whether err is a write etcd refused as larger than its request limit. kube-apiserver
// writes such an object once more without its managedFields (package api does too).
func IsRequestTooLarge(err error) bool {
	var t tooLargeError
	return errors.As(err, &t)
}
