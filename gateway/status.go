package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// StatusOf returns the Kubernetes Status carried by a gRPC error (the hub attaches one to every API error), or builds
// one from the gRPC code for errors that have none, such as those raised by gRPC or the gateway itself.
func StatusOf(err error) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		return StatusFromKube(apiStatus.Status())
	}
	switch {
	case errors.Is(err, context.Canceled):
		return StatusFromKube(apierrors.NewGenericServerResponse(499, "", schema.GroupResource{}, "", "the request was canceled", 0, false).ErrStatus)
	case errors.Is(err, context.DeadlineExceeded):
		return StatusFromKube(apierrors.NewTimeoutError(err.Error(), 0).ErrStatus)
	}
	st, ok := status.FromError(err)
	if !ok {
		return StatusFromKube(apierrors.NewInternalError(err).ErrStatus)
	}
	for _, d := range st.Details() {
		if s, ok := d.(*metav1.Status); ok {
			return s
		}
	}
	code, reason := httpForCode(st.Code())
	return &metav1.Status{ApiVersion: "v1", Kind: "Status", Status: kmetav1.StatusFailure, Message: st.Message(), Reason: string(reason), Code: int32(code)} //nolint:gosec // G115: an HTTP status code
}

// StatusFromKube converts apimachinery's Status to the API's Status message.
func StatusFromKube(s kmetav1.Status) *metav1.Status {
	out := &metav1.Status{
		ApiVersion: "v1",
		Kind:       "Status",
		Status:     kmetav1.StatusFailure,
		Message:    s.Message,
		Reason:     string(s.Reason),
		Code:       s.Code,
	}
	if d := s.Details; d != nil {
		out.Details = &metav1.StatusDetails{
			Name:              d.Name,
			Group:             d.Group,
			Kind:              d.Kind,
			Uid:               string(d.UID),
			RetryAfterSeconds: d.RetryAfterSeconds,
		}
		for _, c := range d.Causes {
			out.Details.Causes = append(out.Details.Causes, &metav1.StatusCause{
				Reason: string(c.Type), Message: c.Message, Field: c.Field,
			})
		}
	}
	return out
}

func httpForCode(c codes.Code) (int, kmetav1.StatusReason) {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest, kmetav1.StatusReasonBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized, kmetav1.StatusReasonUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden, kmetav1.StatusReasonForbidden
	case codes.NotFound:
		return http.StatusNotFound, kmetav1.StatusReasonNotFound
	case codes.AlreadyExists:
		return http.StatusConflict, kmetav1.StatusReasonAlreadyExists
	case codes.Aborted:
		return http.StatusConflict, kmetav1.StatusReasonConflict
	case codes.OutOfRange:
		return http.StatusGone, kmetav1.StatusReasonExpired
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests, kmetav1.StatusReasonTooManyRequests
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout, kmetav1.StatusReasonTimeout
	case codes.Unavailable:
		return http.StatusServiceUnavailable, kmetav1.StatusReasonServiceUnavailable
	case codes.Unimplemented:
		return http.StatusMethodNotAllowed, kmetav1.StatusReasonMethodNotAllowed
	case codes.Canceled:
		return 499, kmetav1.StatusReasonUnknown
	}
	return http.StatusInternalServerError, kmetav1.StatusReasonInternalError
}

// writeStatus writes st as the response, with its HTTP code. (The gateway's error handler writes every error this
// way; body decoding errors, which the gateway reports as InvalidArgument without a Status, keep the decoder's
// field path in the message.)
func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	body, err := kjson.Marshal(st)
	if err != nil {
		body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internal error","code":500}`)
		st.Code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", MIMEJSON)
	w.Header().Del("Trailer")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(body, '\n')) //nolint:gosec // G705: a JSON Status served as application/json, not HTML
}

// routingErrorHandler answers unknown paths and methods with Kubernetes' 404/405 Status.
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	reason := kmetav1.StatusReasonNotFound
	msg := "the server could not find the requested resource"
	if code == http.StatusMethodNotAllowed {
		reason, msg = kmetav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource"
	}
	writeStatus(w, &metav1.Status{ApiVersion: "v1", Kind: "Status", Status: kmetav1.StatusFailure, Message: msg + ": " + r.Method + " " + r.URL.Path, Reason: string(reason), Code: int32(code)}) //nolint:gosec // G115: an HTTP status code
}

// WriteError answers a REST request with the Kubernetes Status of err.
func WriteError(w http.ResponseWriter, err error) { writeStatus(w, StatusOf(err)) }

// AppendWatchError appends the watch line Kubernetes sends for an error inside a watch stream:
// {"type":"ERROR","object":Status}.
func AppendWatchError(b []byte, err error) []byte {
	obj, merr := kjson.Marshal(StatusOf(err))
	if merr != nil {
		obj = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	b = append(b, `{"type":"ERROR","object":`...)
	b = append(b, obj...)
	return append(b, "}\n"...)
}
