package kubeproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/trellis-dev/trellis/hub/api"
)

// MediaType is Kubernetes' protobuf media type.
const MediaType = runtime.ContentTypeProtobuf

// maxBody bounds a protobuf body, as the REST gateway bounds JSON ones.
const maxBody = 16 << 20

var pb = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// Served reports whether the hub serves kind of apiVersion and k8s.io/api has its protobuf type.
func Served(apiVersion, kind string) bool {
	if _, ok := api.KindFor(apiVersion, kind); !ok {
		return false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && clientgoscheme.Scheme.Recognizes(gv.WithKind(kind))
}

// Decode reads a protobuf body into the JSON of its k8s.io/api type, with apiVersion and kind. A body of a kind
// the hub does not serve in protobuf is an UnsupportedMediaType error, a malformed one a BadRequest.
func Decode(body []byte) ([]byte, error) {
	obj, gvk, err := pb.Decode(body, nil, nil)
	if err != nil {
		if gvk != nil && !clientgoscheme.Scheme.Recognizes(*gvk) {
			return nil, unsupported(gvk.Kind)
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the protobuf body: %v", err))
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	if !Served(apiVersion, kind) {
		return nil, unsupported(kind)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the protobuf body of %s: %v", kind, err))
	}
	return j, nil
}

// Encode turns the JSON of a served Kubernetes kind (an object or its List) into protobuf; ok is false for
// anything else (a Status, a Gardener kind), which is answered in JSON.
func Encode(doc []byte) (out []byte, ok bool) {
	var tm kmetav1.TypeMeta
	if json.Unmarshal(doc, &tm) != nil {
		return nil, false
	}
	kind := strings.TrimSuffix(tm.Kind, "List")
	if !Served(tm.APIVersion, kind) {
		return nil, false
	}
	gv, _ := schema.ParseGroupVersion(tm.APIVersion)
	obj, err := clientgoscheme.Scheme.New(gv.WithKind(tm.Kind))
	if err != nil || json.Unmarshal(doc, obj) != nil {
		return nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(gv.WithKind(tm.Kind))
	var buf bytes.Buffer
	if err := pb.Encode(obj, &buf); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

func unsupported(kind string) error {
	return &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: kmetav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - %s: %s is served in protobuf only for Kubernetes' kinds; accepted media types include: application/json, application/yaml", MediaType, kind),
	}}
}

// Handler translates protobuf bodies of creates and updates into JSON, and answers gets, lists, creates and
// updates in protobuf when the Accept header prefers it and the answer is a served Kubernetes kind; everything else
// passes to next unchanged. writeError writes an error as a Kubernetes Status.
func Handler(next http.Handler, writeError func(http.ResponseWriter, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct == MediaType && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				writeError(w, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err)))
				return
			}
			j, err := Decode(body)
			if err != nil {
				writeError(w, err)
				return
			}
			r = r.Clone(r.Context())
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(j)), int64(len(j))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Content-Length", strconv.Itoa(len(j)))
		}
		if isWatch(r) {
			if !prefersProtobuf(r.Header.Get("Accept"), true) || !servedPath(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			r = r.Clone(r.Context())
			r.Header.Set("Accept", "application/json")
			sw := &watchWriter{w: w}
			next.ServeHTTP(sw, r)
			sw.Flush()
			return
		}
		if !prefersProtobuf(r.Header.Get("Accept"), false) {
			next.ServeHTTP(w, r)
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Accept", "application/json")
		// Re-encoded here: compressed, if at all, as it leaves (gateway.Compress).
		r.Header.Del("Accept-Encoding")
		rec := httptest.NewRecorder() // the answer to re-encode
		next.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		if out, ok := Encode(rec.Body.Bytes()); ok && rec.Code/100 == 2 {
			w.Header().Set("Content-Type", MediaType)
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write(out)
			return
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// prefersProtobuf reports whether the first entry of an Accept header is Kubernetes' protobuf, as client-go's
// protobuf clients send "application/vnd.kubernetes.protobuf,application/json"; for a watch also its stream form
// (";stream=watch"), which kube-apiserver serves for either.
func prefersProtobuf(accept string, watch bool) bool {
	first, _, _ := strings.Cut(accept, ",")
	t, params, err := mime.ParseMediaType(strings.TrimSpace(first))
	stream := params["stream"] == "" || watch && params["stream"] == "watch"
	return err == nil && t == MediaType && stream && params["as"] == ""
}

// servedPath reports whether a resource path (/api/v1/..., /apis/<group>/<version>/..., with or without the legacy
// watch segment and a namespace) is that of a Kubernetes kind served in protobuf.
func servedPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var apiVersion string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		apiVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		apiVersion, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		return false
	}
	if len(parts) > 0 && parts[0] == "watch" {
		parts = parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return false
	}
	for _, k := range api.Kinds {
		if k.APIVersion() == apiVersion && k.Resource == parts[0] {
			return Served(apiVersion, k.Kind)
		}
	}
	return false
}

// MediaTypeWatch is the content type of a protobuf watch stream: length-prefixed frames of metav1.WatchEvent.
const MediaTypeWatch = MediaType + ";stream=watch"

// rawPB encodes watch events without the envelope (magic number and runtime.Unknown) of objects, as
// kube-apiserver's stream serializer does; the objects inside carry it.
var rawPB = protobuf.NewRawSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// watchWriter turns a watch's JSON event lines into Kubernetes' protobuf watch stream, with apimachinery's streaming
// encoder and length-delimited framer: each event a metav1.WatchEvent whose object is the protobuf of the k8s.io/api
// type (an ERROR event's a Status). An answer that is not a watch stream (an error before it) passes unchanged.
type watchWriter struct {
	w    http.ResponseWriter
	enc  streaming.Encoder
	code int
	buf  []byte // an incomplete line
	err  error
}

func (t *watchWriter) Header() http.Header { return t.w.Header() }

func (t *watchWriter) WriteHeader(code int) {
	t.code = code
	if code == http.StatusOK {
		t.w.Header().Set("Content-Type", MediaTypeWatch)
		t.enc = streaming.NewEncoder(framer.NewLengthDelimitedFrameWriter(t.w), rawPB)
	}
	t.w.WriteHeader(code)
}

func (t *watchWriter) Write(b []byte) (int, error) {
	if t.code == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if t.enc == nil {
		return t.w.Write(b)
	}
	if t.err != nil {
		return 0, t.err
	}
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if t.err = t.event(t.buf[:i]); t.err != nil {
			return 0, t.err
		}
		t.buf = t.buf[i+1:]
	}
}

// Flush flushes what was written to the client.
func (t *watchWriter) Flush() {
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

// event encodes one JSON watch event line as a protobuf frame.
func (t *watchWriter) event(line []byte) error {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return fmt.Errorf("watch event: %w", err)
	}
	obj, ok := Encode(ev.Object)
	if !ok {
		var st kmetav1.Status
		if err := json.Unmarshal(ev.Object, &st); err != nil || st.Kind != "Status" {
			return fmt.Errorf("watch event %s: its object is neither a served kind nor a Status", ev.Type)
		}
		st.APIVersion = "v1"
		var buf bytes.Buffer
		if err := pb.Encode(&st, &buf); err != nil {
			return err
		}
		obj = buf.Bytes()
	}
	return t.enc.Encode(&kmetav1.WatchEvent{Type: ev.Type, Object: runtime.RawExtension{Raw: obj}})
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}
