package gateway

import (
	"net/http"
	"net/url"
	"testing"
)

func TestIsCollection(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v1/namespaces":                                    true,
		"/api/v1/namespaces/dev":                                false,
		"/api/v1/namespaces/dev/status":                         false,
		"/api/v1/namespaces/dev/configmaps":                     true,
		"/api/v1/namespaces/dev/configmaps/x":                   false,
		"/api/v1/watch/namespaces/dev/configmaps":               true,
		"/apis/core.gardener.cloud/v1beta1/shoots":              true,
		"/apis/core.gardener.cloud/v1beta1/seeds/s1":            false,
		"/apis/core.gardener.cloud/v1beta1/seeds/s1/status":     false,
		"/apis/core.gardener.cloud/v1beta1/namespaces/g/shoots": true,
		"/apis/core.gardener.cloud/v1beta1":                     false,
		"/openapi/v2":                                           false,
	} {
		if got := isCollection(path); got != want {
			t.Errorf("isCollection(%q) = %v, want %v", path, got, want)
		}
	}
}

// FuzzRequestOptions: whatever the query and body of any verb, the options are refused with 400 or 422 and a
// message, or read; a dry run asked for in the query or a delete's body is never lost, and a read dryRun is only
// ever "All".
func FuzzRequestOptions(f *testing.F) {
	for _, c := range []struct{ method, query, body string }{
		{"POST", "dryRun=All&fieldManager=kubectl&fieldValidation=Strict", ""},
		{"PUT", "dryRun=All&dryRun=All", ""},
		{"PATCH", "force=true&dryRun=x", ""},
		{"DELETE", "gracePeriodSeconds=0&propagationPolicy=Foreground", `{"dryRun":["All"],"preconditions":{"uid":"u"}}`},
		{"GET", "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", ""},
		{"GET", "labelSelector=a%20in%20(b)&fieldSelector=x%3Dy&limit=5&continue=abc&resourceVersion=3", ""},
	} {
		f.Add(c.method, "/api/v1/namespaces/dev/configmaps", c.query, c.body)
	}
	f.Add("GET", "/api/v1/watch/namespaces/dev/configmaps", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", "")
	f.Add("GET", "/api/v1/namespaces/dev/configmaps/x", "resourceVersion=7", "")
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		o, st := requestOptions(method, path, q, "application/merge-patch+json", []byte(body))
		if st != nil {
			if c := st.ErrStatus.Code; c != http.StatusBadRequest && c != http.StatusUnprocessableEntity || st.ErrStatus.Message == "" {
				t.Fatalf("refused with %d %q", c, st.ErrStatus.Message)
			}
			return
		}
		for _, v := range o.dryRun {
			if v != "All" {
				t.Fatalf("dryRun %q read", v)
			}
		}
		asked := len(q["dryRun"]) > 0
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if asked && len(o.dryRun) == 0 {
				t.Fatalf("%s %q: dry run lost", method, query)
			}
		}
	})
}

// FuzzCheckAccept: an Accept header is refused (406 naming the types served) exactly when none of its entries is a
// type the hub writes or a wildcard without Kubernetes' as= parameter; refusing never panics.
func FuzzCheckAccept(f *testing.F) {
	for _, s := range []string{"", "*/*", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf, */*",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json;as=Table;g=meta.k8s.io;v=v1", "text/html;q=0.9, application/yaml;q=0.1", "application/json;stream=watch"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		st := checkAccept(accept)
		if st == nil {
			return
		}
		if st.ErrStatus.Code != http.StatusNotAcceptable || st.ErrStatus.Message != "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml" {
			t.Fatalf("refusal %d %q", st.ErrStatus.Code, st.ErrStatus.Message)
		}
		for _, e := range []string{"application/json", "application/yaml", "*/*"} {
			if accept == e {
				t.Fatalf("%q refused", accept)
			}
		}
	})
}
