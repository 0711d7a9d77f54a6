package api

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"sigs.k8s.io/yaml"

	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
)

// IsDiscoveryPath reports whether p is a discovery document: /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>.
func IsDiscoveryPath(p string) bool {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) == 1:
		return parts[0] == "api" || parts[0] == "apis"
	case parts[0] == "api":
		return len(parts) == 2
	case parts[0] == "apis":
		return len(parts) <= 3
	}
	return false
}

// Endpoint is a resource served outside the kinds' servers (the access reviews, package review; the shoots'
// kubeconfig subresources, package kubeconfig), listed in discovery with the kinds.
type Endpoint struct {
	Group, Version, Resource, Kind string
	Verbs                          []string
	// Namespaced says whether the resource lives in namespaces.
	Namespaced bool
	// KindGroup and KindVersion are the group and version of Kind when they differ from the endpoint's, as for a
	// subresource whose request is of another group (shoots/adminkubeconfig takes an
	// authentication.gardener.cloud/v1alpha1 AdminKubeconfigRequest).
	KindGroup, KindVersion string
}

// DiscoveryHandler serves Kubernetes' discovery documents for the kinds the hub serves and the extra endpoints, so
// clients can map a kind to its resource path.
func DiscoveryHandler(extra ...Endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var doc any
		switch {
		case len(parts) == 1 && parts[0] == "api":
			doc = &kmetav1.APIVersions{TypeMeta: kmetav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
		case len(parts) == 1 && parts[0] == "apis":
			doc = groupList(extra)
		case len(parts) == 2 && parts[0] == "api":
			doc = resourceList("", parts[1], extra)
		case len(parts) == 2:
			for _, g := range groupList(extra).Groups {
				if g.Name == parts[1] {
					g.TypeMeta = kmetav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
					doc = &g
				}
			}
		case len(parts) == 3:
			doc = resourceList(parts[1], parts[2], extra)
		}
		if doc == nil || doc == (*kmetav1.APIResourceList)(nil) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}` + "\n"))
			return
		}
		switch discoveryType(r.Header.Get("Accept")) {
		case runtime.ContentTypeProtobuf:
			if v, ok := doc.(*kmetav1.APIVersions); ok {
				// Its JSON has no apiVersion (as kube-apiserver's); protobuf's envelope needs one.
				c := *v
				c.APIVersion = "v1"
				doc = &c
			}
			var buf bytes.Buffer
			if err := discoveryPB.Encode(doc.(runtime.Object), &buf); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			_, _ = w.Write(buf.Bytes())
		case runtime.ContentTypeJSON:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		case runtime.ContentTypeYAML:
			y, err := yaml.Marshal(doc)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", runtime.ContentTypeYAML)
			_, _ = w.Write(y) //nolint:gosec // G705: a discovery document served as application/yaml, not HTML
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotAcceptable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf","reason":"NotAcceptable","code":406}` + "\n"))
		}
	})
}

// discoveryPB encodes discovery documents in Kubernetes' protobuf, as kube-apiserver serves them to clients asking
// for it first.
var discoveryPB = func() *protobuf.Serializer {
	sc := runtime.NewScheme()
	kmetav1.AddToGroupVersion(sc, schema.GroupVersion{Version: "v1"})
	return protobuf.NewSerializer(sc, sc)
}()

// discoveryType is the media type a discovery document is answered in: the first entry of the Accept header the hub
// serves, JSON (also for no header or a wildcard), YAML or protobuf; "" when it names none. Aggregated discovery
// (as=APIGroupDiscoveryList, what client-go asks for first) is not served: client-go takes the plain JSON its
// header also names, as from a kube-apiserver without it.
func discoveryType(accept string) string {
	if strings.TrimSpace(accept) == "" {
		return runtime.ContentTypeJSON
	}
	for _, entry := range strings.Split(accept, ",") {
		t, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil || params["as"] != "" {
			continue
		}
		switch t {
		case "*/*", "application/*", runtime.ContentTypeJSON:
			return runtime.ContentTypeJSON
		case runtime.ContentTypeProtobuf, runtime.ContentTypeYAML:
			return t
		}
	}
	return ""
}

func groupList(extra []Endpoint) *kmetav1.APIGroupList {
	byGroup := map[string][]string{}
	var names []string
	add := func(group, version string) {
		if group == "" {
			return
		}
		if _, ok := byGroup[group]; !ok {
			names = append(names, group)
		}
		if vs := byGroup[group]; !slices.Contains(vs, version) {
			byGroup[group] = append(vs, version)
		}
	}
	for _, k := range Kinds {
		add(k.Group, k.Version)
	}
	for _, e := range extra {
		add(e.Group, e.Version)
	}
	sort.Strings(names)
	out := &kmetav1.APIGroupList{TypeMeta: kmetav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, n := range names {
		g := kmetav1.APIGroup{Name: n}
		for _, v := range byGroup[n] {
			g.Versions = append(g.Versions, kmetav1.GroupVersionForDiscovery{GroupVersion: n + "/" + v, Version: v})
		}
		// Gardener's preferred version of core.gardener.cloud is v1beta1.
		g.PreferredVersion = g.Versions[0]
		for _, v := range g.Versions {
			if v.Version == "v1beta1" {
				g.PreferredVersion = v
			}
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// cliResource is the trellis.cli.v1.resource option of the kind's message: its short names and categories, the ones
// trellisctl knows it by (ctl/kinds is generated from the same option), or nil when it has none.
func (k Kind) cliResource() *cliv1.Resource {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(k.Message)
	if err != nil {
		return nil
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil
	}
	r, _ := proto.GetExtension(md.Options(), cliv1.E_Resource).(*cliv1.Resource)
	return r
}

// resourceList is the APIResourceList of group/version, nil when the hub serves nothing there. A kind's entry has
// Kubernetes' singular name (the kind in lower case, as trellisctl's), short names and categories; its subresources
// have none of them, as in Kubernetes.
func resourceList(group, version string, extra []Endpoint) *kmetav1.APIResourceList {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	out := &kmetav1.APIResourceList{TypeMeta: kmetav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	verbs := kmetav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, k := range Kinds {
		if k.Group != group || k.Version != version {
			continue
		}
		res := kmetav1.APIResource{Name: k.Resource, SingularName: strings.ToLower(k.Kind), Namespaced: k.Namespaced, Kind: k.Kind, Verbs: verbs}
		if r := k.cliResource(); r != nil {
			res.ShortNames, res.Categories = r.GetShortNames(), r.GetCategories()
		}
		out.APIResources = append(out.APIResources, res)
		if k.Status {
			out.APIResources = append(out.APIResources, kmetav1.APIResource{Name: k.Resource + "/status", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: kmetav1.Verbs{"get", "patch", "update"}})
		}
		if k.Binding {
			out.APIResources = append(out.APIResources, kmetav1.APIResource{Name: k.Resource + "/binding", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: kmetav1.Verbs{"patch", "update"}})
		}
	}
	for _, e := range extra {
		if e.Group == group && e.Version == version {
			res := kmetav1.APIResource{Name: e.Resource, Namespaced: e.Namespaced, Kind: e.Kind, Group: e.KindGroup, Version: e.KindVersion, Verbs: e.Verbs}
			if !strings.Contains(e.Resource, "/") {
				res.SingularName = strings.ToLower(e.Kind) // subresources have none, as in Kubernetes
			}
			out.APIResources = append(out.APIResources, res)
		}
	}
	if len(out.APIResources) == 0 {
		return nil
	}
	return out
}
