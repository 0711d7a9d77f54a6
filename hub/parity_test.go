package hub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/test/seedtest"
)

// TestOptionsParityWithKubeAPIServer sends the same requests to the hub and to a real kube-apiserver (bin/testbin)
// and compares the answers: dry runs answer the same shape (a created object without resourceVersion, a deleted
// one held by a finalizer with its deletionTimestamp) and leave the object as it was, and refused options and media
// types get the same code, reason and message (for media types, the message up to the list of types each serves).
func TestOptionsParityWithKubeAPIServer(t *testing.T) {
	seed := seedtest.Start(t)
	kubeHTTP, err := rest.HTTPClientFor(seed.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := quietHub(t)
	ns := seed.Namespace(t)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`)
	cms := "/api/v1/namespaces/" + ns + "/configmaps"

	type answer struct {
		code     int
		body     map[string]any
		warnings []string
	}
	send := func(client *http.Client, base, token, method, path, body string, header ...string) answer {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{code: resp.StatusCode, warnings: resp.Header.Values("Warning")}
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, b)
		}
		return a
	}
	both := func(method, path, body string, header ...string) (hub, kube answer) {
		t.Helper()
		return send(h.HTTP, h.URL, h.Token, method, path, body, header...), send(kubeHTTP, strings.TrimSuffix(seed.Config.Host, "/"), "", method, path, body, header...)
	}
	meta := func(a answer) map[string]any {
		m, _ := a.body["metadata"].(map[string]any)
		return m
	}
	for _, c := range [][]string{
		{"POST", cms, `{"metadata":{"name":"cm"},"data":{"a":"1"}}`},
		{"POST", cms, `{"metadata":{"name":"held","finalizers":["test/hold"]}}`},
	} {
		if hub, kube := both(c[0], c[1], c[2]); hub.code != 201 || kube.code != 201 {
			t.Fatalf("%s %s: hub %d, kube-apiserver %d", c[0], c[1], hub.code, kube.code)
		}
	}

	// Dry runs.
	hub, kube := both("POST", cms+"?dryRun=All", `{"metadata":{"name":"dry"},"data":{"a":"1"}}`)
	for name, a := range map[string]answer{"hub": hub, "kube-apiserver": kube} {
		m := meta(a)
		if a.code != 201 || m["uid"] == nil || m["creationTimestamp"] == nil || m["resourceVersion"] != nil {
			t.Errorf("%s: dry-run create answered %d %v", name, a.code, a.body)
		}
	}
	hub, kube = both("DELETE", cms+"/held", `{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`)
	for name, a := range map[string]answer{"hub": hub, "kube-apiserver": kube} {
		if m := meta(a); a.code != 200 || m["deletionTimestamp"] == nil {
			t.Errorf("%s: dry-run delete of a held object answered %d %v", name, a.code, a.body)
		}
	}
	hub, kube = both("PATCH", cms+"/cm?dryRun=All", `{"data":{"a":"2"}}`, "Content-Type", "application/merge-patch+json")
	if hub.code != 200 || kube.code != 200 || hub.body["data"].(map[string]any)["a"] != "2" || kube.body["data"].(map[string]any)["a"] != "2" {
		t.Errorf("dry-run patch: hub %d %v, kube-apiserver %d %v", hub.code, hub.body, kube.code, kube.body)
	}
	for _, p := range []string{cms + "/dry", cms + "/held", cms + "/cm"} {
		hub, kube = both("GET", p, "")
		if hub.code != kube.code || meta(hub)["deletionTimestamp"] != nil || meta(kube)["deletionTimestamp"] != nil {
			t.Errorf("GET %s after the dry runs: hub %d %v, kube-apiserver %d %v", p, hub.code, hub.body, kube.code, kube.body)
		}
		if hub.code == 200 && (hub.body["data"] != nil && hub.body["data"].(map[string]any)["a"] != "1") {
			t.Errorf("GET %s after the dry runs: %v", p, hub.body)
		}
	}

	// Refusals.
	merge := []string{"Content-Type", "application/merge-patch+json"}
	for _, r := range []struct {
		method, path, body string
		header             []string
		upTo               string // compare messages up to this text (the media types each serves differ); "*": not at all
	}{
		{"POST", cms + "?dryRun=all", `{"metadata":{"name":"x"}}`, nil, ""},
		{"PUT", cms + "/cm?dryRun=Yes", `{"metadata":{"name":"cm"}}`, nil, ""},
		{"PATCH", cms + "/cm?dryRun=None", `{}`, merge, ""},
		{"DELETE", cms + "/cm?dryRun=all", "", nil, ""},
		{"DELETE", cms + "/cm", `{"dryRun":["Some"]}`, nil, ""},
		{"DELETE", cms + "/cm?propagationPolicy=Sideways", "", nil, ""},
		{"DELETE", cms + "/cm?orphanDependents=false&propagationPolicy=Background", "", nil, ""},
		{"POST", cms + "?fieldValidation=Loose", `{"metadata":{"name":"x"}}`, nil, ""},
		{"POST", cms + "?fieldManager=" + strings.Repeat("m", 129), `{"metadata":{"name":"x"}}`, nil, ""},
		{"PATCH", cms + "/cm?force=true", `{}`, merge, ""},
		{"GET", cms + "?resourceVersionMatch=NotOlderThan", "", nil, ""},
		{"POST", cms, `{}`, []string{"Content-Type", "text/x-unknown"}, "include: "},
		// kube-apiserver's router answers "415: Unsupported Media Type" here; the hub names the patch types.
		{"PATCH", cms + "/cm", `{}`, []string{"Content-Type", "application/x-unknown-patch"}, "*"},
		{"GET", cms + "/cm", "", []string{"Accept", "text/x-unknown"}, "representations: "},
	} {
		hub, kube := both(r.method, r.path, r.body, r.header...)
		hm, km := hub.body["message"].(string), kube.body["message"].(string)
		switch r.upTo {
		case "":
		case "*":
			hm, km = "", ""
		default:
			hm, km = hm[:strings.Index(hm, r.upTo)+1], km[:strings.Index(km, r.upTo)+1]
		}
		if hub.code != kube.code || hub.body["reason"] != kube.body["reason"] || hm != km {
			t.Errorf("%s %s:\n hub            %d %v %q\n kube-apiserver %d %v %q", r.method, r.path, hub.code, hub.body["reason"], hub.body["message"], kube.code, kube.body["reason"], kube.body["message"])
		}
	}
	// fieldValidation=Warn drops unknown fields and names each in a Warning header, Ignore drops them silently, in
	// JSON and YAML bodies, creates, updates and patches.
	yaml := []string{"Content-Type", "application/yaml"}
	for _, r := range []struct {
		method, path, body string
		header             []string
		warnings           int
	}{
		{"POST", cms + "?fieldValidation=Warn", `{"metadata":{"name":"warned","bogus":1},"data":{"a":"1"},"spam":1}`, nil, 2},
		{"PUT", cms + "/warned?fieldValidation=Warn", `{"metadata":{"name":"warned"},"data":{"a":"2"},"spam":2}`, nil, 1},
		{"PATCH", cms + "/warned?fieldValidation=Warn", `{"data":{"a":"3"},"eggs":1}`, merge, 1},
		{"POST", cms + "?fieldValidation=Warn", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-warned\nspam: 1\n", yaml, 1},
		{"POST", cms + "?fieldValidation=Ignore", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-ignored\nspam: 1\n", yaml, 0},
		{"POST", cms + "?fieldValidation=Ignore", `{"metadata":{"name":"ignored"},"spam":1}`, nil, 0},
	} {
		hub, kube := both(r.method, r.path, r.body, r.header...)
		if hub.code != kube.code || hub.code >= 300 || len(hub.warnings) != r.warnings || strings.Join(hub.warnings, "|") != strings.Join(kube.warnings, "|") {
			t.Errorf("%s %s:\n hub            %d %q\n kube-apiserver %d %q", r.method, r.path, hub.code, hub.warnings, kube.code, kube.warnings)
		}
	}

	// The hub names the parameter that does not decode, where kube-apiserver gives the decoder's error alone.
	hub, kube = both("GET", cms+"?limit=many", "")
	if hub.code != kube.code || hub.body["message"] != "limit: "+kube.body["message"].(string) {
		t.Errorf("limit=many: hub %d %q, kube-apiserver %d %q", hub.code, hub.body["message"], kube.code, kube.body["message"])
	}
}
