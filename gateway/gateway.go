package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/gateway/kjson"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Registrar adds one kind's REST routes (a generated Register<Kind>ServiceHandler).
type Registrar func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error

// Config configures the gateway.
type Config struct {
	// Local add the kinds' routes served by calling their servers in-process (unary calls): no serialization
	// between the REST request and the handler.
	Local []func(ctx context.Context, mux *runtime.ServeMux) error
	// Remote add the kinds' routes served through Conn; the gateway uses them for watches (streams).
	Remote []Registrar
	// Conn reaches the hub's gRPC server in-process; calls through it run the gRPC interceptors.
	Conn *grpc.ClientConn
	// Authenticate identifies the caller of a request and returns the context to serve it with.
	Authenticate func(r *http.Request) (context.Context, error)
	// ObjectJSON returns the memoized JSON of objects served from the hub's cache (see Marshaler.ObjectJSON).
	ObjectJSON func(m proto.Message) ([]byte, bool)
	Logger     *slog.Logger
}

// HeaderHTTPCode is gRPC response metadata by which a handler asks the gateway for a specific HTTP success code
// (201 for Create, as kube-apiserver answers).
const HeaderHTTPCode = "x-trellis-http-code"

// New returns the REST handler.
func New(ctx context.Context, cfg Config) (http.Handler, error) {
	local, remote := newMux(cfg.ObjectJSON), newMux(cfg.ObjectJSON)
	for _, reg := range cfg.Local {
		if err := reg(ctx, local); err != nil {
			return nil, err
		}
	}
	for _, reg := range cfg.Remote {
		if err := reg(ctx, remote, cfg.Conn); err != nil {
			return nil, err
		}
	}
	return &handler{local: local, remote: remote, authenticate: cfg.Authenticate}, nil
}

func newMux(objectJSON func(proto.Message) ([]byte, bool)) *runtime.ServeMux {
	strict, lenient := &Marshaler{ObjectJSON: objectJSON}, &Marshaler{Lenient: true, ObjectJSON: objectJSON}
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, strict),
		runtime.WithMarshalerOption(MIMEJSON, strict),
		runtime.WithMarshalerOption("application/merge-patch+json", strict),
		runtime.WithMarshalerOption("application/json-patch+json", strict),
		runtime.WithMarshalerOption("application/strategic-merge-patch+json", strict),
		runtime.WithMarshalerOption(mimeJSONLenient, lenient),
		runtime.WithMarshalerOption(MIMEYAML, &Marshaler{YAML: true, ObjectJSON: objectJSON}),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(setHTTPCode),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
	)
}

// incomingHeader forwards what the hub needs from HTTP headers: the bearer token (forwarded by grpc-gateway anyway),
// and the client's user agent for logs.
func incomingHeader(key string) (string, bool) {
	switch strings.ToLower(key) {
	case "user-agent":
		return "x-forwarded-user-agent", true
	}
	return "", false
}

func setHTTPCode(ctx context.Context, w http.ResponseWriter, m proto.Message) error {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return nil
	}
	if m == nil && len(md.HeaderMD.Get(HeaderWatchStarted)) > 0 {
		// A watch is established: answer at once, as kube-apiserver does, not with the first event.
		w.Header().Set("Content-Type", MIMEJSON)
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return nil
	}
	if v := md.HeaderMD.Get(HeaderHTTPCode); len(v) > 0 {
		if code, err := strconv.Atoi(v[0]); err == nil {
			w.WriteHeader(code)
		}
	}
	return nil
}

// HeaderWatchStarted is gRPC response metadata a Watch sends once the watch is established.
const HeaderWatchStarted = "x-trellis-watch-started"

// SetHTTPCode is called by a gRPC handler to choose the REST success code.
func SetHTTPCode(ctx context.Context, code int) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(HeaderHTTPCode, strconv.Itoa(code)))
}

// handler adapts Kubernetes' REST conventions to the routes grpc-gateway knows, authenticates the caller, and sends
// watches through the gRPC connection and everything else straight to the servers.
type handler struct {
	local, remote *runtime.ServeMux
	authenticate  func(r *http.Request) (context.Context, error)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.authenticate != nil {
		ctx, err := h.authenticate(r)
		if err != nil {
			writeStatus(w, StatusOf(err))
			return
		}
		r = r.WithContext(ctx)
	}
	mux := h.local
	q := r.URL.Query()
	changed := false
	// ?watch=true on a collection is the legacy /watch/ path.
	if r.Method == http.MethodGet && isTrue(q.Get("watch")) {
		r.URL.Path = watchPath(r.URL.Path)
		r.URL.RawPath = ""
		q.Del("watch")
		changed = true
	}
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/watch/") {
		w = &watchWriter{ResponseWriter: w}
		mux = h.remote
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method == http.MethodPatch {
		q.Set("patchType", ct)
		changed = true
	}
	switch q.Get("fieldValidation") {
	case "", "Strict":
	case "Ignore", "Warn":
		if ct == "" || ct == MIMEJSON {
			r.Header.Set("Content-Type", mimeJSONLenient)
		}
	default:
		writeStatus(w, badRequest("fieldValidation must be Strict, Warn or Ignore"))
		return
	}
	if q.Has("fieldValidation") {
		q.Del("fieldValidation")
		changed = true
	}
	if ct == MIMEYAML && r.Body != nil && (r.Method == http.MethodPatch) {
		// A YAML patch document becomes JSON before the merge.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			writeStatus(w, badRequest(err.Error()))
			return
		}
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			writeStatus(w, badRequest("invalid YAML: "+err.Error()))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(j))
		r.ContentLength = int64(len(j))
		r.Header.Set("Content-Type", MIMEJSON)
	}
	for _, p := range []string{"pretty", "fieldManager", "propagationPolicy", "gracePeriodSeconds", "orphanDependents", "timeout"} {
		if q.Has(p) {
			q.Del(p)
			changed = true
		}
	}
	if changed {
		r.URL.RawQuery = q.Encode()
	}
	mux.ServeHTTP(w, r)
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// watchPath turns /apis/<g>/<v>/... or /api/v1/... into the same path under .../watch/.
func watchPath(p string) string {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 4)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		return "/api/" + parts[1] + "/watch/" + strings.Join(parts[2:], "/")
	case len(parts) == 4 && parts[0] == "apis":
		return "/apis/" + parts[1] + "/" + parts[2] + "/watch/" + parts[3]
	}
	return p
}

func badRequest(msg string) *metav1.Status {
	return &metav1.Status{ApiVersion: "v1", Kind: "Status", Status: kmetav1.StatusFailure, Message: msg, Reason: string(kmetav1.StatusReasonBadRequest), Code: http.StatusBadRequest}
}

// watchWriter makes a watch that fails before its first event answer like kube-apiserver: with the error's HTTP code
// (410 for an expired resourceVersion) and a Status body, instead of grpc-gateway's mapping of the gRPC code and an
// ERROR event. Once events flow, errors stay ERROR events in the stream, as in Kubernetes.
type watchWriter struct {
	http.ResponseWriter
	started, failed bool
}

func (w *watchWriter) WriteHeader(code int) {
	if !w.started && code != http.StatusOK {
		w.failed = true
		return
	}
	w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *watchWriter) Write(b []byte) (int, error) {
	if w.failed {
		var ev struct {
			Object json.RawMessage `json:"object"`
		}
		st := &metav1.Status{}
		if json.Unmarshal(b, &ev) != nil || kjson.Unmarshal(ev.Object, st) != nil || st.Code == 0 {
			st = &metav1.Status{ApiVersion: "v1", Kind: "Status", Status: kmetav1.StatusFailure, Message: strings.TrimSpace(string(b)), Code: http.StatusInternalServerError}
		}
		w.failed = false
		w.started = true
		writeStatus(w.ResponseWriter, st)
		return len(b), nil
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *watchWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.failed {
		f.Flush()
	}
}

func (w *watchWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
