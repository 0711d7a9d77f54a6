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
	}
	return apierrors.NewInternalError(fmt.Errorf("%s %s: %w", op, c.gr, err))
}
