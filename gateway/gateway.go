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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/yaml"
)

// Config configures the gateway.
type Config struct {
	// Routes add the kinds' routes; they call the kinds' servers in-process, without serializing to protobuf.
	Routes []func(ctx context.Context, mux *runtime.ServeMux) error
	// Authenticate identifies the caller of a request and returns the context to serve it with.
	Authenticate func(r *http.Request) (context.Context, error)
	// ObjectJSON returns the memoized JSON of objects served from the hub's cache (see Marshaler.ObjectJSON).
	ObjectJSON func(m proto.Message) ([]byte, bool)
	// ObjectDeflated returns the Segment of ObjectJSON's JSON after before, memoized with it (see
	// Marshaler.ObjectDeflated).
	ObjectDeflated func(m proto.Message, before Before) (*Segment, bool)
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
	mux := newMux(cfg.ObjectJSON, cfg.ObjectDeflated, public)
	for _, reg := range cfg.Routes {
		if err := reg(ctx, mux); err != nil {
			return nil, err
		}
	}
	return &handler{mux: mux, authenticate: cfg.Authenticate, public: public}, nil
}

func newMux(objectJSON func(proto.Message) ([]byte, bool), objectDeflated func(proto.Message, Before) (*Segment, bool), public func(context.Context, error) error) *runtime.ServeMux {
	strict := &Marshaler{ObjectJSON: objectJSON, ObjectDeflated: objectDeflated}
	lenient := &Marshaler{Lenient: true, ObjectJSON: objectJSON, ObjectDeflated: objectDeflated}
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, strict),
		runtime.WithMarshalerOption(MIMEJSON, strict),
		runtime.WithMarshalerOption("application/merge-patch+json", strict),
		runtime.WithMarshalerOption("application/json-patch+json", strict),
		runtime.WithMarshalerOption("application/strategic-merge-patch+json", strict),
		// Server-side apply's YAML (or JSON) body, read into JSON; answers are JSON.
		runtime.WithMarshalerOption(PatchTypeApply, &Marshaler{ReadYAML: true, ObjectJSON: objectJSON, ObjectDeflated: objectDeflated}),
		runtime.WithMarshalerOption(mimeJSONLenient, lenient),
		runtime.WithMarshalerOption(MIMEYAML, &Marshaler{YAML: true, ObjectJSON: objectJSON}),
		runtime.WithMarshalerOption(mimeYAMLLenient, &Marshaler{YAML: true, Lenient: true, ObjectJSON: objectJSON}),
		runtime.WithErrorHandler(func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			forwardWarnings(ctx, w)
			writeStatus(w, StatusOf(public(r.Context(), err)))
		}),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(setHTTPCode),
		runtime.WithForwardResponseRewriter(writableAnswer),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
	)
}

// incomingHeader forwards what the hub needs from HTTP headers: the bearer token (forwarded by grpc-gateway anyway),
// the client's user agent for logs, and the options the gateway read from the request (set by handler.prepare).
func incomingHeader(key string) (string, bool) {
	switch k := strings.ToLower(key); k {
	case "user-agent":
		return "x-forwarded-user-agent", true
	case MetadataDryRun, MetadataFieldValidation, MetadataPropagationPolicy, MetadataFieldManager, MetadataForce, MetadataResetManagedFields:
		return k, true
	}
	return "", false
}

func setHTTPCode(ctx context.Context, w http.ResponseWriter, m proto.Message) error {
	forwardWarnings(ctx, w)
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

type (
	precompressKey struct{}
	plainStreamKey struct{}
)

// writableAnswer hands the marshaler an answer it may write itself as it joins it: gzipped, for a request that
// reaches its client through Compress unchanged, or plain, for another GET that is not a watch (ServeHTTP marks
// both).
func writableAnswer(ctx context.Context, resp proto.Message) (any, error) {
	if cw, ok := ctx.Value(precompressKey{}).(*compressWriter); ok {
		return &writable{msg: resp, gz: cw}, nil
	}
	if w, ok := ctx.Value(plainStreamKey{}).(http.ResponseWriter); ok {
		return &writable{msg: resp, plain: w}, nil
	}
	return resp, nil
}

// SetHTTPCode is called by a gRPC handler to choose the REST success code.
func SetHTTPCode(ctx context.Context, code int) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(HeaderHTTPCode, strconv.Itoa(code)))
}

// HeaderWarning is gRPC response metadata by which a handler adds a warning to its answer (Warn): a REST client gets
// each as a Warning header, as kube-apiserver sends its warnings; a gRPC client gets the metadata.
const HeaderWarning = "x-trellis-warning"

// Warn adds a warning to the answer of the call ctx belongs to (kube-apiserver's warning.AddWarning).
func Warn(ctx context.Context, text string) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(HeaderWarning, text))
}

// UnknownFieldWarning is the warning for a field that ?fieldValidation=Warn dropped, kube-apiserver's text.
func UnknownFieldWarning(path string) string { return fmt.Sprintf("unknown field %q", path) }

// DuplicateFieldWarning is the warning for a member that an object of a ?fieldValidation=Warn body repeats (its last
// value is kept), kube-apiserver's text.
func DuplicateFieldWarning(path string) string { return fmt.Sprintf("duplicate field %q", path) }

// forwardWarnings writes the warnings a handler added (Warn) as Warning headers.
func forwardWarnings(ctx context.Context, w http.ResponseWriter) {
	if md, ok := runtime.ServerMetadataFromContext(ctx); ok {
		for _, text := range md.HeaderMD.Get(HeaderWarning) {
			addWarning(w.Header(), text)
		}
	}
}

// addWarning adds a Warning header of text (`299 - "text"`, RFC 7234's form as kube-apiserver writes it) unless h has
// it already: kube-apiserver's recorder sends each warning once.
func addWarning(h http.Header, text string) {
	v, err := utilnet.NewWarningHeader(299, "-", text)
	if err != nil || slices.Contains(h.Values("Warning"), v) {
		return
	}
	h.Add("Warning", v)
}

// warningBody is the body of a request with ?fieldValidation=Warn: the decoder (Marshaler.NewDecoder) names each
// unknown field it drops and each repeated member in a Warning header of the answer, before the answer is written.
type warningBody struct {
	io.ReadCloser
	header http.Header
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
	if st := h.prepare(r); st != nil {
		writeStatus(w, StatusFromKube(st.ErrStatus))
		return
	}
	if t := r.URL.Query().Get("timeout"); t != "" && !strings.Contains(r.URL.Path, "/watch/") {
		// kube-apiserver's request deadline; watches end by timeoutSeconds instead.
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			writeStatus(w, StatusFromKube(apierrors.NewBadRequest(fmt.Sprintf("timeout: invalid duration %q: a positive Go duration such as 30s is expected", t)).ErrStatus))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if cw := compressorFor(r); cw != nil {
		r = r.WithContext(context.WithValue(r.Context(), precompressKey{}, cw))
	} else if r.Method == http.MethodGet && !IsWatch(r) {
		r = r.WithContext(context.WithValue(r.Context(), plainStreamKey{}, w))
	}
	if r.Header.Get(MetadataFieldValidation) == "Warn" && r.Body != nil {
		r.Body = &warningBody{ReadCloser: r.Body, header: w.Header()}
	}
	h.mux.ServeHTTP(w, r)
}

// prepare adapts a request to the grpc-gateway routes: it checks its media types and reads its options (see
// requestOptions), passes those for the kinds' services as gRPC metadata, and rewrites what Kubernetes' paths and
// parameters say in the routes' terms.
func (h *handler) prepare(r *http.Request) *apierrors.StatusError {
	// Options for the services come from the request's query and body only, never from a header of the client.
	r.Header.Del(MetadataDryRun)
	r.Header.Del(MetadataFieldValidation)
	r.Header.Del(MetadataPropagationPolicy)
	r.Header.Del(MetadataFieldManager)
	r.Header.Del(MetadataForce)
	r.Header.Del(MetadataResetManagedFields)
	if _, _, ok := resourcePath(r.URL.Path); !ok {
		return nil
	}
	if st := checkAccept(r.Header.Get("Accept")); st != nil {
		return st
	}
	if len(r.Header.Values("Accept")) == 0 {
		// kube-apiserver answers JSON when the client names no type; grpc-gateway would answer in the body's type
		// (YAML for a YAML body).
		r.Header.Set("Accept", MIMEJSON)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if st := checkContentType(r.Method, ct); st != nil {
		return st
	}
	q := r.URL.Query()
	var body []byte
	if r.Method == http.MethodDelete && r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		body = b
		// The routes take no body on deletes: the options are all read here (and the answer's type is the Accept's,
		// not the options').
		r.Body, r.ContentLength = http.NoBody, 0
		r.Header.Del("Content-Type")
		if len(bytes.TrimSpace(body)) > 0 {
			// DeleteOptions in JSON or YAML; in any other type (a client's protobuf) 415, not a decoding error.
			if st := checkContentType(http.MethodPost, ct); st != nil {
				return st
			}
			if ct == MIMEYAML {
				j, err := yaml.YAMLToJSON(body)
				if err != nil {
					return apierrors.NewBadRequest("invalid DeleteOptions: " + err.Error())
				}
				body = j
			}
		}
	}
	opts, st := requestOptions(r.Method, r.URL.Path, q, ct, body)
	if st != nil {
		return st
	}
	for _, v := range opts.dryRun {
		r.Header.Add(MetadataDryRun, v)
	}
	if opts.propagation != "" {
		r.Header.Set(MetadataPropagationPolicy, opts.propagation)
	}
	if opts.fieldManager != "" {
		r.Header.Set(MetadataFieldManager, opts.fieldManager)
	}
	if opts.force {
		r.Header.Set(MetadataForce, "true")
	}
	if r.Method == http.MethodPut {
		reset, st := resetsManagedFields(r, ct)
		if st != nil {
			return st
		}
		if reset {
			r.Header.Set(MetadataResetManagedFields, "true")
		}
	}
	// What the routes must not read from the query: the options are read above, and a route's request message
	// could take a parameter of the same name for something else.
	for _, p := range []string{"dryRun", "fieldValidation", "fieldManager", "force", "pretty", "propagationPolicy", "gracePeriodSeconds",
		"orphanDependents", "ignoreStoreReadErrorWithClusterBreakingPotential", "resourceVersionMatch"} {
		q.Del(p)
	}
	// A request's namespace, name and subresource are its path's (the routes bind them), never query parameters.
	q.Del("namespace")
	q.Del("name")
	q.Del("subresource")
	if r.Method == http.MethodPatch {
		q.Set("patchType", ct)
	}
	for k, v := range opts.route {
		q.Set(k, v)
	}
	// ?watch=true on a collection is the legacy /watch/ path.
	if r.Method == http.MethodGet && isTrue(q.Get("watch")) {
		r.URL.Path = watchPath(r.URL.Path)
		r.URL.RawPath = ""
	}
	q.Del("watch")
	switch opts.fieldValidation {
	case "Ignore", "Warn":
		switch ct {
		case "", MIMEJSON:
			r.Header.Set("Content-Type", mimeJSONLenient)
		case MIMEYAML:
			r.Header.Set("Content-Type", mimeYAMLLenient)
		}
		r.Header.Set(MetadataFieldValidation, opts.fieldValidation)
	}
	r.URL.RawQuery = q.Encode()
	return nil
}

// resetsManagedFields reports whether an update's body sets metadata.managedFields to an empty list, which resets
// them in Kubernetes (the kinds' services cannot tell it from no list: the gateway tells them). The body stays
// readable for the route.
func resetsManagedFields(r *http.Request, contentType string) (bool, *apierrors.StatusError) {
	if r.Body == nil {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return false, apierrors.NewBadRequest(err.Error())
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte("managedFields")) {
		return false, nil
	}
	if contentType == MIMEYAML {
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return false, nil // the route reports the body's error
		}
	}
	var doc struct {
		Metadata struct {
			ManagedFields *[]json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return false, nil
	}
	mf := doc.Metadata.ManagedFields
	return mf != nil && len(*mf) == 0, nil
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
