package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Config configures the gateway.
type Config struct {
	// Routes add the kinds' routes; they call the kinds' servers in-process, without serializing to protobuf.
	Routes []func(ctx context.Context, mux *runtime.ServeMux) error
	// Authenticate identifies the caller of a request and returns the context to serve it with.
	Authenticate func(r *http.Request) (context.Context, error)
	// ObjectJSON returns the memoized JSON of objects served from the hub's cache (see Marshaler.ObjectJSON).
	ObjectJSON func(m proto.Message) ([]byte, bool)
	// PublicError maps an error to what the client may see before it is written (the hub hides internal errors'
	// detail behind a request id, api.Errors); nil writes errors as they are.
	PublicError func(ctx context.Context, err error) error
	Logger      *slog.Logger
}

// HeaderHTTPCode is gRPC response metadata by which a handler asks the gateway for a specific HTTP success code
// (201 for Create, as kube-apiserver answers).
const HeaderHTTPCode = "x-trellis-http-code"

// New returns the REST handler.
func New(ctx context.Context, cfg Config) (http.Handler, error) {
	public := cfg.PublicError
	if public == nil {
		public = func(_ context.Context, err error) error { return err }
	}
	mux := newMux(cfg.ObjectJSON, public)
	for _, reg := range cfg.Routes {
		if err := reg(ctx, mux); err != nil {
			return nil, err
		}
	}
	return &handler{mux: mux, authenticate: cfg.Authenticate, public: public}, nil
}

func newMux(objectJSON func(proto.Message) ([]byte, bool), public func(context.Context, error) error) *runtime.ServeMux {
	strict, lenient := &Marshaler{ObjectJSON: objectJSON}, &Marshaler{Lenient: true, ObjectJSON: objectJSON}
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, strict),
		runtime.WithMarshalerOption(MIMEJSON, strict),
		runtime.WithMarshalerOption("application/merge-patch+json", strict),
		runtime.WithMarshalerOption("application/json-patch+json", strict),
		runtime.WithMarshalerOption("application/strategic-merge-patch+json", strict),
		runtime.WithMarshalerOption(mimeJSONLenient, lenient),
		runtime.WithMarshalerOption(MIMEYAML, &Marshaler{YAML: true, ObjectJSON: objectJSON}),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			writeStatus(w, StatusOf(public(r.Context(), err)))
		}),
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
	if v := md.HeaderMD.Get(HeaderHTTPCode); len(v) > 0 {
		if code, err := strconv.Atoi(v[0]); err == nil {
			w.WriteHeader(code)
		}
	}
	return nil
}

// SetHTTPCode is called by a gRPC handler to choose the REST success code.
func SetHTTPCode(ctx context.Context, code int) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(HeaderHTTPCode, strconv.Itoa(code)))
}

// handler adapts Kubernetes' REST conventions to the routes grpc-gateway knows and authenticates the caller.
type handler struct {
	mux          *runtime.ServeMux
	authenticate func(r *http.Request) (context.Context, error)
	public       func(ctx context.Context, err error) error
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.authenticate != nil {
		ctx, err := h.authenticate(r)
		if err != nil {
			writeStatus(w, StatusOf(h.public(r.Context(), err)))
			return
		}
		r = r.WithContext(ctx)
	}
	q := r.URL.Query()
	changed := false
	// ?watch=true on a collection is the legacy /watch/ path.
	if r.Method == http.MethodGet && isTrue(q.Get("watch")) {
		r.URL.Path = watchPath(r.URL.Path)
		r.URL.RawPath = ""
		q.Del("watch")
		changed = true
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
	if r.Method == http.MethodDelete {
		var body []byte
		if r.Body != nil {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
			if err != nil {
				writeStatus(w, badRequest(err.Error()))
				return
			}
			body = b
			// The routes take no body on deletes: the options are all read here.
			r.Body, r.ContentLength = http.NoBody, 0
		}
		pre, msg := DeleteOptions(q, body)
		if msg != "" {
			writeStatus(w, badRequest(msg))
			return
		}
		for k, v := range pre {
			q.Set(k, v)
			changed = true
		}
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
	h.mux.ServeHTTP(w, r)
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

// DeleteOptions reads the DeleteOptions of a delete request, from its query and its body when it has one (as
// kubectl sends them). It returns the preconditions of the body as the query parameters of the route, or why the
// options cannot be honoured. The hub deletes the dependents of a deleted object in the background: orphaning them
// (propagationPolicy Orphan, orphanDependents true) is refused rather than ignored, and Foreground is served as
// Background (the same end state, without the owner waiting for its dependents).
func DeleteOptions(q url.Values, body []byte) (map[string]string, string) {
	var opts struct {
		PropagationPolicy *string `json:"propagationPolicy"`
		OrphanDependents  *bool   `json:"orphanDependents"`
		Preconditions     *struct {
			UID             *string `json:"uid"`
			ResourceVersion *string `json:"resourceVersion"`
		} `json:"preconditions"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return nil, "invalid DeleteOptions: " + err.Error()
		}
	}
	policy := q.Get("propagationPolicy")
	if opts.PropagationPolicy != nil {
		policy = *opts.PropagationPolicy
	}
	orphan := isTrue(q.Get("orphanDependents")) || opts.OrphanDependents != nil && *opts.OrphanDependents
	switch policy {
	case "", string(kmetav1.DeletePropagationBackground), string(kmetav1.DeletePropagationForeground):
	case string(kmetav1.DeletePropagationOrphan):
		orphan = true
	default:
		return nil, fmt.Sprintf("propagationPolicy: Unsupported value: %q: supported values: \"Background\", \"Foreground\", \"Orphan\"", policy)
	}
	if orphan {
		return nil, "propagationPolicy: Orphan is not supported: the hub's garbage collector deletes the dependents of a deleted object in the background"
	}
	pre := map[string]string{}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			pre["preconditions.uid"] = *p.UID
		}
		if p.ResourceVersion != nil {
			pre["preconditions.resource_version"] = *p.ResourceVersion
		}
	}
	return pre, ""
}

func badRequest(msg string) *metav1.Status {
	return &metav1.Status{ApiVersion: "v1", Kind: "Status", Status: kmetav1.StatusFailure, Message: msg, Reason: string(kmetav1.StatusReasonBadRequest), Code: http.StatusBadRequest}
}
