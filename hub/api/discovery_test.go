package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/discovery"

	"github.com/trellis-dev/trellis/ctl/kinds"
	"github.com/trellis-dev/trellis/hub/api"
)

// discover reads one discovery document from the hub's handler.
func discover(t *testing.T, path string) *kmetav1.APIResourceList {
	t.Helper()
	rec := httptest.NewRecorder()
	api.DiscoveryHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	list := &kmetav1.APIResourceList{}
	if err := json.Unmarshal(rec.Body.Bytes(), list); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return list
}

func find(t *testing.T, list *kmetav1.APIResourceList, name string) kmetav1.APIResource {
	t.Helper()
	for _, r := range list.APIResources {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%s: no resource %s", list.GroupVersion, name)
	return kmetav1.APIResource{}
}

// The resource lists name every kind as Kubernetes' do: singular name, Gardener's short names and categories;
// subresources have none of them.
func TestDiscoveryNames(t *testing.T) {
	core := discover(t, "/apis/core.gardener.cloud/v1beta1")
	for _, tc := range []struct {
		list                 *kmetav1.APIResourceList
		name, singular       string
		shortNames, category []string
	}{
		{core, "cloudprofiles", "cloudprofile", []string{"cprofile", "cpfl"}, nil},
		{core, "controllerinstallations", "controllerinstallation", []string{"ctrlinst"}, nil},
		{core, "shoots", "shoot", nil, []string{"all"}},
		{core, "seeds", "seed", nil, nil},
		{discover(t, "/api/v1"), "configmaps", "configmap", []string{"cm"}, nil},
		{discover(t, "/apis/certificates.k8s.io/v1"), "certificatesigningrequests", "certificatesigningrequest", []string{"csr"}, nil},
	} {
		r := find(t, tc.list, tc.name)
		if r.SingularName != tc.singular || !slices.Equal(r.ShortNames, tc.shortNames) || !slices.Equal(r.Categories, tc.category) {
			t.Errorf("%s: singularName %q, shortNames %q, categories %q; want %q, %q, %q", tc.name, r.SingularName, r.ShortNames,
				r.Categories, tc.singular, tc.shortNames, tc.category)
		}
	}
	if st := find(t, core, "shoots/status"); st.SingularName != "" || st.ShortNames != nil || st.Categories != nil {
		t.Errorf("shoots/status: singularName %q, shortNames %q, categories %q; want none", st.SingularName, st.ShortNames, st.Categories)
	}
}

// Discovery and trellisctl's table of kinds (ctl/kinds) come from the same proto options: every kind has the same
// singular and short names in both, and every kind of the hub's registry has a proto message.
func TestDiscoveryMatchesCLI(t *testing.T) {
	lists := map[string]*kmetav1.APIResourceList{}
	for _, k := range api.Kinds {
		if d, err := protoregistry.GlobalFiles.FindDescriptorByName(k.Message); err != nil || string(d.Name()) != k.Kind {
			t.Errorf("%s %s: message %q: %v", k.APIVersion(), k.Kind, k.Message, err)
		}
	}
	for _, k := range kinds.All {
		gv := k.Group + "/" + k.Version
		path := "/apis/" + gv
		if k.Group == "" {
			gv, path = k.Version, "/api/"+k.Version
		}
		if lists[gv] == nil {
			lists[gv] = discover(t, path)
		}
		r := find(t, lists[gv], k.Resource)
		if r.SingularName != k.Singular || !slices.Equal(r.ShortNames, k.ShortNames) {
			t.Errorf("%s %s: discovery has singularName %q, shortNames %q; trellisctl %q, %q", gv, k.Resource, r.SingularName,
				r.ShortNames, k.Singular, k.ShortNames)
		}
	}
}

// TestDiscoveryContentTypes: discovery answers in the first type of the Accept header it serves: protobuf for
// clients asking for it first (decoded with apimachinery's serializer), JSON after client-go's aggregated-discovery
// entries, 406 naming the served types when the header names only aggregated discovery.
func TestDiscoveryContentTypes(t *testing.T) {
	get := func(path, accept string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", accept)
		api.DiscoveryHandler().ServeHTTP(rec, req)
		return rec
	}
	sc := runtime.NewScheme()
	kmetav1.AddToGroupVersion(sc, schema.GroupVersion{Version: "v1"})
	for _, p := range []string{"/api", "/api/v1", "/apis", "/apis/core.gardener.cloud", "/apis/core.gardener.cloud/v1beta1"} {
		rec := get(p, runtime.ContentTypeProtobuf+", application/json")
		obj, _, err := protobuf.NewSerializer(sc, sc).Decode(rec.Body.Bytes(), nil, nil)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != runtime.ContentTypeProtobuf || err != nil {
			t.Errorf("GET %s in protobuf: %d %s %v", p, rec.Code, rec.Header().Get("Content-Type"), err)
		} else if l, ok := obj.(*kmetav1.APIResourceList); ok && len(l.APIResources) == 0 {
			t.Errorf("GET %s in protobuf: no resources", p)
		}
	}
	if rec := get("/apis", discovery.AcceptV2+","+discovery.AcceptV2Beta1+","+discovery.AcceptV1); rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("client-go's discovery Accept: want JSON, got %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec := get("/apis", discovery.AcceptV2); rec.Code != http.StatusNotAcceptable {
		t.Errorf("aggregated discovery alone: want 406, got %d %s", rec.Code, rec.Body)
	}
}
