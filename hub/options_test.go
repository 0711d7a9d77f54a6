package hub_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// TestRequestOptionsAndMediaTypes: the query parameters kube-apiserver accepts are honoured or refused with the
// parameter named (docs/api.md has the table), and bodies or answers in media types the hub does not serve get
// kube-apiserver's 415 and 406, naming the types it serves.
func TestRequestOptionsAndMediaTypes(t *testing.T) {
	h := quietHub(t)
	const cms = "/api/v1/namespaces/opts/configmaps"
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"opts"}}`)
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"cm"},"data":{"a":"1"}}`)
	const bodyTypes = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
	const patchTypes = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
	const merge = "application/merge-patch+json"
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		code                     int
		reason, message          string // message: a part of the Status' message
	}{
		// Media types.
		{"protobuf create without the magic", "POST", cms, "\x0a\x02k8s", []string{"Content-Type", "application/vnd.kubernetes.protobuf"}, 400, "BadRequest", "does not appear to be a protobuf message"},
		{"unknown type create", "POST", cms, `{}`, []string{"Content-Type", "text/x-unknown"}, 415, "UnsupportedMediaType", bodyTypes},
		{"malformed protobuf update", "PUT", cms + "/cm", "\x0a", []string{"Content-Type", "application/vnd.kubernetes.protobuf"}, 400, "BadRequest", "decoding the protobuf body"},
		{"apply patch without a field manager", "PATCH", cms + "/cm", "data: {}", []string{"Content-Type", "application/apply-patch+yaml"}, 422, "Invalid", "fieldManager: Required value: is required for apply patch"},
		{"apply patch in CBOR", "PATCH", cms + "/cm?fieldManager=a", "\xa0", []string{"Content-Type", "application/apply-patch+cbor"}, 415, "UnsupportedMediaType", patchTypes + ", application/apply-patch+yaml"},
		{"JSON is not a patch type", "PATCH", cms + "/cm", `{}`, []string{"Content-Type", "application/json"}, 415, "UnsupportedMediaType", patchTypes},
		{"protobuf delete options", "DELETE", cms + "/cm", "\x0a\x02k8s", []string{"Content-Type", "application/vnd.kubernetes.protobuf"}, 415, "UnsupportedMediaType", bodyTypes},
		{"YAML delete options", "DELETE", cms + "/cm", "dryRun: [All]\n", []string{"Content-Type", "application/yaml"}, 200, "", `"name":"cm"`},
		{"protobuf answer", "GET", cms + "/cm", "", []string{"Accept", "application/vnd.kubernetes.protobuf"}, 200, "", "k8s\x00"},
		{"CBOR answer", "GET", cms + "/cm", "", []string{"Accept", "application/cbor"}, 406, "NotAcceptable", "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml"},
		{"table answer only", "GET", cms, "", []string{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}, 200, "", `"kind":"Table","apiVersion":"meta.k8s.io/v1"`},
		{"metadata answer only", "GET", cms, "", []string{"Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}, 406, "NotAcceptable", "Available representations: application/json, application/yaml"},
		{"protobuf or anything", "GET", cms + "/cm", "", []string{"Accept", "application/vnd.kubernetes.protobuf, */*"}, 200, "", "\x0a\x02cm"},
		{"CBOR or anything", "GET", cms + "/cm", "", []string{"Accept", "application/cbor, */*"}, 200, "", `"name":"cm"`},
		{"kubectl get's table or JSON", "GET", cms, "", []string{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}, 200, "", `"kind":"Table"`},
		{"JSON before a table", "GET", cms, "", []string{"Accept", "application/json,application/json;as=Table;v=v1;g=meta.k8s.io"}, 200, "", `"kind":"ConfigMapList"`},
		{"YAML answer", "GET", cms + "/cm", "", []string{"Accept", "application/yaml"}, 200, "", "name: cm"},

		// Write options.
		{"fieldValidation unknown", "POST", cms + "?fieldValidation=Loose", `{"metadata":{"name":"x"}}`, nil, 422, "Invalid", `fieldValidation: Unsupported value: "Loose"`},
		{"fieldManager too long", "POST", cms + "?fieldManager=" + strings.Repeat("m", 129), `{"metadata":{"name":"x"}}`, nil, 422, "Invalid", "fieldManager: Too long"},
		{"force on a merge patch", "PATCH", cms + "/cm?force=true", `{}`, []string{"Content-Type", merge}, 422, "Invalid", "force: Forbidden: may not be specified for non-apply patch"},
		{"strict patch", "PATCH", cms + "/cm", `{"data":{"a":"2"},"spam":1}`, []string{"Content-Type", merge}, 422, "Invalid", `unknown field "spam"`},
		{"patch ignoring unknown fields", "PATCH", cms + "/cm?fieldValidation=Ignore", `{"data":{"a":"2"},"spam":1}`, []string{"Content-Type", merge}, 200, "", `"a":"2"`},
		{"orphaning", "DELETE", cms + "/cm?propagationPolicy=Orphan", "", nil, 200, "", `"finalizers":["orphan"]`},
		{"orphan and policy", "DELETE", cms + "/cm?orphanDependents=false&propagationPolicy=Background", "", nil, 422, "Invalid", "orphanDependents and deletionPropagation cannot be both set"},
		{"unsafe delete", "DELETE", cms + "/cm", `{"ignoreStoreReadErrorWithClusterBreakingPotential":true}`, nil, 400, "BadRequest", "ignoreStoreReadErrorWithClusterBreakingPotential: not supported"},
		{"grace period not a number", "DELETE", cms + "/cm?gracePeriodSeconds=soon", "", nil, 400, "BadRequest", `gracePeriodSeconds: strconv.ParseInt: parsing "soon"`},
		{"request timeout", "GET", cms + "?timeout=later", "", nil, 400, "BadRequest", `timeout: invalid duration "later"`},

		{"delete collection is not served", "DELETE", cms + "?dryRun=All", "", nil, 405, "MethodNotAllowed", "does not allow this method"},

		// List and watch options.
		{"exact list", "GET", cms + "?resourceVersion=1&resourceVersionMatch=Exact", "", nil, 400, "BadRequest", "resourceVersionMatch: Exact is not supported"},
		{"match without version", "GET", cms + "?resourceVersionMatch=NotOlderThan", "", nil, 422, "Invalid", "resourceVersionMatch: Forbidden"},
		{"watch list without bookmarks", "GET", cms + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "", nil, 400, "BadRequest", "sendInitialEvents needs allowWatchBookmarks"},
		{"watch without initial events from now", "GET", cms + "?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan", "", nil, 400, "BadRequest", "sendInitialEvents: false without a resourceVersion is not supported"},
		{"bad limit", "GET", cms + "?limit=many", "", nil, 400, "BadRequest", `limit: strconv.ParseInt: parsing "many"`},
		{"bad label selector", "GET", cms + "?labelSelector=a%20in%20(", "", nil, 400, "BadRequest", "labelSelector: unable to parse requirement"},
		{"bad field selector", "GET", cms + "?fieldSelector=metadata.name%3D%3D%3Dx", "", nil, 400, "BadRequest", "fieldSelector: invalid field selector"},
		{"unknown field selector", "GET", cms + "?fieldSelector=spec.bogus%3Dx", "", nil, 400, "BadRequest", "spec.bogus"},
		{"namespace is the path's", "GET", "/api/v1/configmaps?namespace=elsewhere&fieldSelector=metadata.name%3Dcm", "", nil, 200, "", `"name":"cm"`},
		{"list not older than", "GET", cms + "?resourceVersion=1&resourceVersionMatch=NotOlderThan&limit=1", "", nil, 200, "", `"name":"cm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := h.Do(t, tc.method, tc.path, tc.body, tc.header...)
			text := string(out)
			if tc.reason != "" {
				st := decodeStatus(t, out)
				if st.Reason != tc.reason || st.Code != tc.code {
					t.Errorf("Status %+v, want reason %s", st, tc.reason)
				}
				text = st.Message
			}
			if code != tc.code || !strings.Contains(text, tc.message) {
				t.Fatalf("%s %s: got %d %s, want %d with %q", tc.method, tc.path, code, out, tc.code, tc.message)
			}
		})
	}
	// A list or get not older than a revision the hub has not reached waits for it, then answers kube-apiserver's
	// Timeout.
	code, out := h.Do(t, "GET", cms+"/cm?resourceVersion=999999999", nil)
	if st := decodeStatus(t, out); code != 504 || st.Reason != "Timeout" || !strings.Contains(st.Message, "Too large resource version") {
		t.Errorf("get at a future resourceVersion: %d %s", code, out)
	}
}

// TestWatchList: Kubernetes' watch-list (sendInitialEvents=true) sends the current state as ADDED events, then a
// BOOKMARK annotated k8s.io/initial-events-end at the state's resourceVersion, then the changes.
func TestWatchList(t *testing.T) {
	h := quietHub(t)
	const cms = "/api/v1/namespaces/wl/configmaps"
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"wl"}}`)
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"a"}}`)
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"b"}}`)
	rv := listVersion(t, h, cms)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+cms+"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion="+rv, nil)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	next := func() (string, string, string, map[string]string) {
		t.Helper()
		var ev struct {
			Type   string
			Object struct {
				Metadata struct {
					Name            string
					ResourceVersion string
					Annotations     map[string]string
				}
			}
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		return ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.ResourceVersion, ev.Object.Metadata.Annotations
	}
	got := map[string]bool{}
	for range 2 {
		typ, name, _, _ := next()
		if typ != "ADDED" {
			t.Fatalf("initial event %s %s", typ, name)
		}
		got[name] = true
	}
	typ, _, bmRV, ann := next()
	if typ != "BOOKMARK" || ann["k8s.io/initial-events-end"] != "true" || !got["a"] || !got["b"] {
		t.Fatalf("after the initial events %v: %s %v", got, typ, ann)
	}
	if b, _ := strconv.ParseInt(bmRV, 10, 64); b < mustInt(t, rv) {
		t.Errorf("initial-events-end bookmark at %s, older than the asked %s", bmRV, rv)
	}
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"c"}}`)
	for {
		typ, name, _, _ := next()
		if typ == "BOOKMARK" {
			continue
		}
		if typ != "ADDED" || name != "c" {
			t.Fatalf("first change: %s %s", typ, name)
		}
		break
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestInformerUsesWatchList: a client-go informer (its reflector tries watch-list first, WatchListClient being on by
// default) syncs from the hub by a watch alone: no LIST request, no fallback.
func TestInformerUsesWatchList(t *testing.T) {
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Skip("client-go's WatchListClient is off")
	}
	h := quietHub(t)
	const cms = "/api/v1/namespaces/inf/configmaps"
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"inf"}}`)
	for _, n := range []string{"a", "b", "c"} {
		mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"`+n+`"}}`)
	}
	var mu sync.Mutex
	var requests []string
	cfg := &rest.Config{Host: h.URL, BearerToken: h.Token, TLSClientConfig: rest.TLSClientConfig{CAData: h.CA},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				requests = append(requests, r.Method+" "+r.URL.RequestURI())
				mu.Unlock()
				return rt.RoundTrip(r)
			})
		}}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	informer := dynamicinformer.NewFilteredDynamicInformer(client, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "inf", 0, cache.Indexers{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); informer.Informer().RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("the informer did not sync within 20s")
	}
	if got := len(informer.Informer().GetStore().ListKeys()); got != 3 {
		t.Errorf("the informer has %d objects, want 3", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range requests {
		if !strings.Contains(r, "watch=true") || !strings.Contains(r, "sendInitialEvents=true") {
			t.Errorf("a request other than a watch-list: %s (all: %q)", r, requests)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
