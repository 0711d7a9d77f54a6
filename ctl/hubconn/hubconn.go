package hubconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/ctl/config"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Dial returns a client connection to the target's hub; it connects on first use. userAgent names the client.
func Dial(t config.Target, userAgent string) (*grpc.ClientConn, error) {
	u, err := url.Parse(t.Hub)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("hub %q: not a URL", t.Hub)
	}
	tc, err := tlsConfig(t)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithUserAgent(userAgent),
		grpc.WithChainUnaryInterceptor(unaryErrors),
		grpc.WithChainStreamInterceptor(streamErrors),
	}
	if t.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(t.Token)))
	}
	return grpc.NewClient("passthrough:///"+u.Host, opts...)
}

// tlsConfig verifies the hub with the target's CA, or the system's roots.
func tlsConfig(t config.Target) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CA) {
			return nil, errors.New("the hub's CA holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// HTTP returns an HTTP client for the hub's non-gRPC endpoints (the CA rotation), verifying the hub as Dial does;
// requests carry the target's token when they are made with Request.
func HTTP(t config.Target) (*http.Client, error) {
	tc, err := tlsConfig(t)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}, nil
}

// unaryErrors and streamErrors turn every error of a call into Error's, so that commands see *StatusError.
func unaryErrors(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return Error(invoker(ctx, method, req, reply, cc, opts...))
}

func streamErrors(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, Error(err)
	}
	return stream{s}, nil
}

type stream struct{ grpc.ClientStream }

func (s stream) RecvMsg(m any) error { return Error(s.ClientStream.RecvMsg(m)) }

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// StatusError is an error the hub answered, with the Kubernetes Status it carries.
type StatusError struct {
	Status *metav1.Status
}

func (e *StatusError) Error() string { return e.Status.GetMessage() }

// Reason is the Status' reason, or one derived from the HTTP code.
func (e *StatusError) Reason() string {
	if r := e.Status.GetReason(); r != "" {
		return r
	}
	return fmt.Sprintf("HTTP %d", e.Status.GetCode())
}

// Error turns a gRPC error into a *StatusError: the Status detail the hub attaches to every API error, or one made
// from the gRPC code and message. An unreachable hub (Unavailable without a Status: refused connections, TLS
// failures) gives an *UnreachableError instead. Other errors (io.EOF), and nil, are returned as they are.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var se *StatusError
	if errors.As(err, &se) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if s, ok := d.(*metav1.Status); ok {
			return &StatusError{Status: s}
		}
	}
	if st.Code() == codes.Unavailable {
		return &UnreachableError{Message: st.Message()}
	}
	code, reason := httpOf(st.Code())
	return &StatusError{Status: &metav1.Status{Message: st.Message(), Reason: reason, Code: code}}
}

// UnreachableError says the hub could not be reached; Message is gRPC's account of why.
type UnreachableError struct {
	Message string
}

func (e *UnreachableError) Error() string { return "cannot reach the hub: " + e.Message }

// Reason returns the Kubernetes reason of a hub error ("NotFound", "Forbidden", ...), "" for other errors.
func Reason(err error) string {
	var se *StatusError
	if errors.As(Error(err), &se) {
		return se.Status.GetReason()
	}
	return ""
}

// IsNotFound, IsAlreadyExists and IsForbidden classify hub errors.
func IsNotFound(err error) bool      { return Reason(err) == "NotFound" }
func IsAlreadyExists(err error) bool { return Reason(err) == "AlreadyExists" }
func IsForbidden(err error) bool     { return Reason(err) == "Forbidden" }

// httpOf maps the gRPC codes of errors without a Status to Kubernetes' code and reason, as the hub's gateway does.
func httpOf(c codes.Code) (int32, string) {
	switch c {
	case codes.InvalidArgument:
		return 400, "BadRequest"
	case codes.Unauthenticated:
		return 401, "Unauthorized"
	case codes.PermissionDenied:
		return 403, "Forbidden"
	case codes.NotFound:
		return 404, "NotFound"
	case codes.AlreadyExists:
		return 409, "AlreadyExists"
	case codes.Aborted:
		return 409, "Conflict"
	case codes.OutOfRange:
		return 410, "Expired"
	case codes.DeadlineExceeded:
		return 504, "Timeout"
	case codes.Unavailable:
		return 503, "ServiceUnavailable"
	case codes.Unimplemented:
		return 405, "MethodNotAllowed"
	case codes.Canceled:
		return 499, "Canceled"
	}
	return 500, "InternalError"
}
