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
		if !prefersProtobuf(r.Header.Get("Accept")) || isWatch(r) {
			next.ServeHTTP(w, r)
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Accept", "application/json")
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

// prefersProtobuf reports whether the first entry of an Accept header is Kubernetes' protobuf (not its watch stream
// form), as client-go's protobuf clients send "application/vnd.kubernetes.protobuf,application/json".
func prefersProtobuf(accept string) bool {
	first, _, _ := strings.Cut(accept, ",")
	t, params, err := mime.ParseMediaType(strings.TrimSpace(first))
	return err == nil && t == MediaType && params["stream"] == "" && params["as"] == ""
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}
