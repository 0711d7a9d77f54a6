package hub

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/audit"
)

// The audit log's edges (package audit): every gRPC call and REST request begins an audit record under its request
// id, and finishes it with its response code; the kinds' authorizer (newAPI) says what the request is about.

// newAuditor builds the auditor of Config.Audit (nil without one). Request and response objects are rendered as the
// objects' JSON by the registry, which exists only after the auditor: reg is read when an object is rendered.
func (h *Hub) newAuditor(reg **api.Registry) (*audit.Auditor, error) {
	cfg := h.cfg.Audit
	cfg.Logger = h.log.With("component", "audit")
	return audit.New(cfg, func(m proto.Message) ([]byte, bool) {
		if *reg == nil {
			return nil, false
		}
		return (*reg).ObjectJSON(m)
	})
}

// beginGRPC begins a gRPC call's audit record; the verb is the method's name as the authorizer will name it.
func beginGRPC(ctx context.Context, a *audit.Auditor, fullMethod string) context.Context {
	if a == nil {
		return ctx
	}
	r := audit.Request{ID: api.RequestID(ctx), URI: fullMethod, Path: fullMethod, Verb: grpcVerb(fullMethod)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			r.SourceIPs = []string{host}
		}
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if ua := md.Get("user-agent"); len(ua) > 0 {
			r.UserAgent = ua[0]
		}
	}
	return a.Begin(ctx, r)
}

// grpcVerb is the authorization verb of a kind's method (Get, List, Watch, Create, Update, UpdateStatus, Patch,
// Delete ...), lower-cased as kube's verbs; the authorizer's attributes replace it for the kinds' calls.
func grpcVerb(fullMethod string) string {
	m := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
	for _, v := range []string{"Get", "List", "Watch", "Create", "Update", "Patch", "Delete"} {
		if strings.HasPrefix(m, v) {
			return strings.ToLower(v)
		}
	}
	return strings.ToLower(m)
}

// finishGRPC finishes a call's record with the HTTP code its error maps to (201 for a successful create, as
// kube-apiserver answers).
func finishGRPC(ctx context.Context, fullMethod string, err error, resp any) {
	code := http.StatusOK
	var apiStatus apierrors.APIStatus
	switch {
	case errors.As(err, &apiStatus):
		code = int(apiStatus.Status().Code)
	case err != nil:
		code = runtime.HTTPStatusFromCode(status.Code(err))
	case grpcVerb(fullMethod) == "create":
		code = http.StatusCreated
	}
	m, _ := resp.(proto.Message)
	audit.Finish(ctx, code, err, m, false)
}

// withAudit begins and finishes the audit records of REST requests (inside withRequestID, which gives their id).
func withAudit(a *audit.Auditor, next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := audit.Request{ID: api.RequestID(r.Context()), URI: r.URL.RequestURI(), Path: r.URL.Path,
			Verb: strings.ToLower(r.Method), UserAgent: r.UserAgent()}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			req.SourceIPs = []string{host}
		}
		ctx := a.Begin(r.Context(), req)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		panicked := true
		defer func() {
			// The response object is not rendered for REST requests: the gateway writes it as bytes.
			audit.Finish(ctx, sw.code, nil, nil, panicked)
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
		panicked = false
	})
}

// statusWriter remembers the response's status code; Unwrap lets http.ResponseController flush watches through it.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
