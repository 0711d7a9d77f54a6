package openapi_test

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// Kubernetes' own clients read the hub's documents: client-go's discovery client the v2 document (protobuf, as
// kubectl asks for it) and the v3 root and group-version documents.
func TestServedToKubernetesClients(t *testing.T) {
	h := hubtest.Start(t)
	cfg := &rest.Config{Host: h.URL, BearerToken: h.Token, TLSClientConfig: rest.TLSClientConfig{CAData: h.CA}}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("v2: %v", err)
	}
	found := false
	for _, p := range v2.GetPaths().GetPath() {
		if p.GetName() == "/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots/{name}" {
			found = true
		}
	}
	if !found {
		t.Error("v2 document (protobuf) has no shoot path")
	}
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatalf("v3 discovery: %v", err)
	}
	if len(gvs) < 8 {
		t.Errorf("v3 discovery lists %v", gvs)
	}
	doc, err := root.GVSpec(schema.GroupVersion{Group: "core.gardener.cloud", Version: "v1beta1"})
	if err != nil {
		t.Fatalf("v3 core.gardener.cloud/v1beta1: %v", err)
	}
	shoot, ok := doc.Components.Schemas["trellis.core.v1beta1.Shoot"]
	if !ok || shoot.Properties["spec"].AllOf == nil {
		t.Errorf("v3 Shoot schema: %+v", shoot)
	}

	// Like discovery, the documents need credentials.
	code, body := h.DoToken(t, "", http.MethodGet, "/openapi/v2", nil)
	if code != http.StatusUnauthorized || !strings.Contains(string(body), `"reason":"Unauthorized"`) {
		t.Errorf("without a token: %d %s", code, body)
	}
	code, body = h.Do(t, http.MethodGet, "/openapi/v3/apis/no.such.group/v1", nil)
	if code != http.StatusNotFound {
		t.Errorf("unknown group: %d %s", code, body)
	}
}
