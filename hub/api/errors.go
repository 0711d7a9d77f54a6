package api

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/gateway"
)

// ToGRPC maps an error to a gRPC status error. Kubernetes API errors (from the store, validation and admission) keep
// their full Kubernetes Status as a status detail, so the REST gateway can answer with the same body and HTTP code
// kube-apiserver would. It is applied once, by the server interceptors.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		return statusError(apiStatus.Status())
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return statusError(apierrors.NewTimeoutError(err.Error(), 0).ErrStatus)
	}
	return statusError(apierrors.NewInternalError(err).ErrStatus)
}

func statusError(s kmetav1.Status) error {
	st := status.New(codeForHTTP(int(s.Code), s.Reason), s.Message)
	if withDetail, err := st.WithDetails(gateway.StatusFromKube(s)); err == nil {
		st = withDetail
	}
	return st.Err()
}

// codeForHTTP maps a Kubernetes HTTP status code and reason to the gRPC code that carries it.
func codeForHTTP(code int, reason kmetav1.StatusReason) codes.Code {
	switch code {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case http.StatusConflict:
		if reason == kmetav1.StatusReasonAlreadyExists {
			return codes.AlreadyExists
		}
		return codes.Aborted
	case http.StatusGone:
		// Expired: the resourceVersion or continue token is no longer kept; the client relists.
		return codes.OutOfRange
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}
