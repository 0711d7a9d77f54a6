package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// DiscoveryHandler serves Kubernetes' discovery documents for the kinds the hub serves, so clients can map a kind
// to its resource path.
func DiscoveryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var doc any
		switch {
		case len(parts) == 1 && parts[0] == "api":
			doc = &kmetav1.APIVersions{TypeMeta: kmetav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
		case len(parts) == 1 && parts[0] == "apis":
			doc = groupList()
		case len(parts) == 2 && parts[0] == "api":
			doc = resourceList("", parts[1])
		case len(parts) == 2:
			for _, g := range groupList().Groups {
				if g.Name == parts[1] {
					g.TypeMeta = kmetav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
					doc = &g
				}
			}
		case len(parts) == 3:
			doc = resourceList(parts[1], parts[2])
		}
		if doc == nil || doc == (*kmetav1.APIResourceList)(nil) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}` + "\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}

func groupList() *kmetav1.APIGroupList {
	byGroup := map[string][]string{}
	var names []string
	for _, k := range Kinds {
		if k.Group == "" {
			continue
		}
		if _, ok := byGroup[k.Group]; !ok {
			names = append(names, k.Group)
		}
		vs := byGroup[k.Group]
		if len(vs) == 0 || vs[len(vs)-1] != k.Version {
			byGroup[k.Group] = append(vs, k.Version)
		}
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

func resourceList(group, version string) *kmetav1.APIResourceList {
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
		out.APIResources = append(out.APIResources, kmetav1.APIResource{Name: k.Resource, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: verbs})
		if k.Status {
			out.APIResources = append(out.APIResources, kmetav1.APIResource{Name: k.Resource + "/status", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: kmetav1.Verbs{"get", "patch", "update"}})
		}
		if k.Binding {
			out.APIResources = append(out.APIResources, kmetav1.APIResource{Name: k.Resource + "/binding", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: kmetav1.Verbs{"patch", "update"}})
		}
	}
	if len(out.APIResources) == 0 {
		return nil
	}
	return out
}
