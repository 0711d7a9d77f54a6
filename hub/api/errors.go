package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/trellis-dev/trellis/gateway"
)

// RequestIDHeader is the HTTP response header, and (lower-cased) the gRPC response header metadata, that carries a
// request's id: kube-apiserver's Audit-Id. A client may send its own id in the same header.
const RequestIDHeader = "Audit-Id"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries ("" for none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestIDOf returns the id a client sent, when it is usable (at most 64 characters of letters, digits and
// -_.:), or a new random one (a UUID, as kube-apiserver's audit ids).
func RequestIDOf(sent string) string {
	if len(sent) > 0 && len(sent) <= 64 {
		ok := true
		for _, c := range sent {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
				ok = false
				break
			}
		}
		if ok {
			return sent
		}
	}
	return string(uuid.NewUUID())
}

// Errors decides what clients see of an error, at the API's edges (the gRPC interceptors, the REST gateway and the
// REST watch): errors the API means clients to see pass as they are; anything else — an error nothing mapped, or a
// Kubernetes InternalError — is logged with its detail and the request's id, and the client gets a generic
// InternalError naming only that id. Internal detail (etcd endpoints, file paths, decoder state) never reaches a client.
type Errors struct {
	// Log receives the detail of internal errors (required).
	Log *slog.Logger
}

// Public returns err as a client may see it; see Errors.
func (e Errors) Public(ctx context.Context, err error) error {
	if err == nil || !isInternal(err) {
		return err
	}
	id := RequestID(ctx)
	if id == "" {
		id = RequestIDOf("")
	}
	e.Log.LogAttrs(ctx, slog.LevelError, "internal error", slog.String("requestID", id), slog.String("err", err.Error()))
	return InternalError(id)
}

// InternalError is what a client sees of an internal error: Kubernetes' InternalError Status (HTTP 500) naming the
// request id under which the hub logged the detail.
func InternalError(requestID string) error {
	return &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusInternalServerError, Reason: kmetav1.StatusReasonInternalError,
		Message: fmt.Sprintf("Internal error occurred: request %s failed; the hub's log has the details under this id", requestID),
	}}
}

// isInternal reports whether err is not meant for clients: an InternalError Status, a gRPC status with an internal
// code, or an error nothing mapped. Cancellations and deadlines are the client's own and pass.
func isInternal(err error) bool {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		s := apiStatus.Status()
		return s.Code == http.StatusInternalServerError || s.Reason == kmetav1.StatusReasonInternalError
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unknown, codes.Internal, codes.DataLoss:
			return true
		}
		return false
	}
	return true
}

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
