package openapi

import (
	"io/fs"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/trellis-dev/trellis/gateway"
)

// Paths the documents are served at, as kube-apiserver serves them.
const (
	PathV2 = "/openapi/v2"
	PathV3 = "/openapi/v3"
)

// Handler serves the documents Write wrote into fsys with kube-openapi's handlers: the v2 document at /openapi/v2
// (JSON, or protobuf when asked, with ETags), the v3 discovery document at /openapi/v3 and each group-version's
// document at /openapi/v3/<key>?hash=<etag> (cacheable for a year when the hash matches, as kube-apiserver does).
// Each document is read on its first request (they take a while to parse; the hub's start should not wait for them).
func Handler(fsys fs.FS) (http.Handler, error) {
	keys, err := v3Keys(fsys)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	v2 := cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		doc, err := readV2(fsys)
		return doc, "", err
	}))
	handler.NewOpenAPIServiceLazy(v2).RegisterOpenAPIVersionedService(PathV2, mux)
	v3 := handler3.NewOpenAPIService()
	for _, key := range keys {
		v3.UpdateGroupVersionLazy(key, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := readV3(fsys, key)
			return doc, "", err
		})))
	}
	mux.HandleFunc(PathV3, v3.HandleDiscovery)
	known := map[string]bool{}
	for _, key := range keys {
		known[key] = true
	}
	mux.HandleFunc(PathV3+"/", func(w http.ResponseWriter, r *http.Request) {
		// kube-openapi answers an unknown group with an empty 200; a client should learn that there is none.
		if key := strings.TrimPrefix(r.URL.Path, PathV3+"/"); !known[key] {
			gateway.WriteError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "openapi/v3"}, key))
			return
		}
		v3.HandleGroupVersion(w, r)
	})
	return mux, nil
}

// IsPath reports whether p is one of the paths Handler serves. Like discovery documents, they describe the API and
// hold no objects.
func IsPath(p string) bool {
	return p == PathV2 || p == PathV3 || strings.HasPrefix(p, PathV3+"/")
}
