package hub_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
		// Repeated members: the last value wins, repeated objects merge, null clears; Warn names each.
		{"POST", cms + "?fieldValidation=Warn", dupBody("dup-warned"), nil, 4},
		{"POST", cms + "?fieldValidation=Ignore", dupBody("dup-ignored"), nil, 0},
		{"PUT", cms + "/dup-warned?fieldValidation=Warn", `{"metadata":{"name":"dup-warned"},"data":{"c":"3"},"data":{"d":"4"},"spam":{},"spam":[]}`, nil, 2},
		// In YAML a repeated key's last value wins (no merge), named by the YAML decoder's words.
		{"POST", cms + "?fieldValidation=Warn", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-dup\n  labels:\n    x: a\n    x: b\ndata:\n  a: \"1\"\ndata:\n  b: \"2\"\n", yaml, 2},
	} {
		hub, kube := both(r.method, r.path, r.body, r.header...)
		if hub.code != kube.code || hub.code >= 300 || len(hub.warnings) != r.warnings || strings.Join(hub.warnings, "|") != strings.Join(kube.warnings, "|") {
			t.Errorf("%s %s:\n hub            %d %q\n kube-apiserver %d %q", r.method, r.path, hub.code, hub.warnings, kube.code, kube.warnings)
		}
	}

	// Events as a Table: kube-apiserver's columns (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE, the wide ones between and
	// after, no NAME and AGE of their own) and cells, for an event of the core API and one with a series.
	evs := "/api/v1/namespaces/" + ns + "/events"
	for _, ev := range []string{
		`{"metadata":{"name":"legacy"},"involvedObject":{"kind":"ConfigMap","name":"cm","namespace":"` + ns + `","fieldPath":"data"},
			"reason":"Tested","message":" hello ","type":"Normal","source":{"component":"parity","host":"h1"},
			"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-02T00:00:00Z","count":3}`,
		`{"metadata":{"name":"series"},"involvedObject":{"kind":"Namespace","name":"` + ns + `","namespace":"` + ns + `"},
			"reason":"Seen","message":"again","type":"Warning","eventTime":"2026-01-01T00:00:00.000000Z",
			"series":{"count":2,"lastObservedTime":"2026-01-03T00:00:00.000000Z"},
			"reportingComponent":"parity.test/ctrl","reportingInstance":"inst","action":"Check"}`,
	} {
		if hub, kube := both("POST", evs, ev); hub.code != 201 || kube.code != 201 {
			t.Fatalf("create an event: hub %d %v, kube-apiserver %d %v", hub.code, hub.body, kube.code, kube.body)
		}
	}
	hub, kube = both("GET", evs, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	columns := func(a answer) string {
		var cs []string
		defs, _ := a.body["columnDefinitions"].([]any)
		for _, d := range defs {
			d := d.(map[string]any)
			cs = append(cs, fmt.Sprintf("%s/%v", strings.ToUpper(d["name"].(string)), d["priority"]))
		}
		return strings.Join(cs, " ")
	}
	cells := func(a answer) string {
		var rs []string
		rows, _ := a.body["rows"].([]any)
		for _, r := range rows {
			rs = append(rs, fmt.Sprint(r.(map[string]any)["cells"]))
		}
		return strings.Join(rs, "\n")
	}
	if hub.code != 200 || kube.code != 200 || columns(hub) != columns(kube) || cells(hub) != cells(kube) {
		t.Errorf("events as a Table:\n hub            %d %s\n%s\n kube-apiserver %d %s\n%s", hub.code, columns(hub), cells(hub),
			kube.code, columns(kube), cells(kube))
	}

	// Updates without metadata.resourceVersion: a ConfigMap's applies to the current object (its strategy allows
	// it), a Shoot's and its status' are refused before validation, as kube-apiserver's generic registry refuses them
	// for a custom resource (gardener-apiserver's Shoot registry is the same store, and its strategies do not allow
	// them either). kube-apiserver serves Shoots from a CRD here, with a status subresource.
	toKube := func(method, path, body string) answer {
		return send(kubeHTTP, strings.TrimSuffix(seed.Config.Host, "/"), "", method, path, body)
	}
	if a := toKube("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", shootCRD); a.code != 201 {
		t.Fatalf("Shoot CRD: kube-apiserver %d %v", a.code, a.body)
	}
	garden(t, h)
	if a := toKube("POST", "/api/v1/namespaces", `{"metadata":{"name":"garden-dev"}}`); a.code != 201 {
		t.Fatalf("namespace garden-dev: kube-apiserver %d %v", a.code, a.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		hub, kube = both("POST", shoots, shoot("uncond", "garden-dev", "1.35.4"))
		if kube.code != 404 || time.Now().After(deadline) {
			break // 404 until the CRD is established
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hub.code != 201 || kube.code != 201 {
		t.Fatalf("create a Shoot: hub %d %v, kube-apiserver %d %v", hub.code, hub.body, kube.code, kube.body)
	}
	for _, p := range []string{cms + "/cm", shoots + "/uncond", shoots + "/uncond/status"} {
		hub, kube = both("GET", strings.TrimSuffix(p, "/status"), "")
		unversioned := func(a answer) string {
			delete(meta(a), "resourceVersion")
			meta(a)["labels"] = map[string]any{"updated": "unconditionally"}
			b, _ := json.Marshal(a.body)
			return string(b)
		}
		hubPut := send(h.HTTP, h.URL, h.Token, "PUT", p, unversioned(hub))
		kubePut := toKube("PUT", p, unversioned(kube))
		details := func(a answer) any {
			if d, ok := a.body["details"].(map[string]any); ok {
				return d["kind"]
			}
			return nil
		}
		if hubPut.code != kubePut.code || hubPut.body["message"] != kubePut.body["message"] || details(hubPut) != details(kubePut) {
			t.Errorf("PUT %s without resourceVersion:\n hub            %d %q %v\n kube-apiserver %d %q %v", p,
				hubPut.code, hubPut.body["message"], details(hubPut), kubePut.code, kubePut.body["message"], details(kubePut))
		}
		if want := map[bool]int{true: 200, false: 422}[p == cms+"/cm"]; hubPut.code != want {
			t.Errorf("PUT %s without resourceVersion: %d, want %d", p, hubPut.code, want)
		}
	}

	for _, name := range []string{"dup-warned", "dup-ignored", "yaml-dup"} {
		hub, kube := both("GET", cms+"/"+name, "")
		for _, f := range []string{"labels", "finalizers"} {
			if fmt.Sprint(meta(hub)[f]) != fmt.Sprint(meta(kube)[f]) {
				t.Errorf("%s: metadata.%s: hub %v, kube-apiserver %v", name, f, meta(hub)[f], meta(kube)[f])
			}
		}
		if fmt.Sprint(hub.body["data"]) != fmt.Sprint(kube.body["data"]) {
			t.Errorf("%s: data: hub %v, kube-apiserver %v", name, hub.body["data"], kube.body["data"])
		}
	}
	for _, r := range [][]string{
		{dupBody("dup-strict")},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-strict\ndata:\n  a: \"1\"\n  a: \"2\"\n", "Content-Type", "application/yaml"},
	} {
		hub, kube := both("POST", cms+"?fieldValidation=Strict", r[0], r[1:]...)
		if hub.code != kube.code || hub.body["reason"] != kube.body["reason"] {
			t.Errorf("repeated members, Strict: hub %d %v %q, kube-apiserver %d %v %q", hub.code, hub.body["reason"], hub.body["message"],
				kube.code, kube.body["reason"], kube.body["message"])
		}
	}

	// The hub names the parameter that does not decode, where kube-apiserver gives the decoder's error alone.
	hub, kube = both("GET", cms+"?limit=many", "")
	if hub.code != kube.code || hub.body["message"] != "limit: "+kube.body["message"].(string) {
		t.Errorf("limit=many: hub %d %q, kube-apiserver %d %q", hub.code, hub.body["message"], kube.code, kube.body["message"])
	}
}

// shootCRD serves core.gardener.cloud/v1beta1 Shoots in kube-apiserver, any content, with a status subresource.
const shootCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	"metadata":{"name":"shoots.core.gardener.cloud"},
	"spec":{"group":"core.gardener.cloud","scope":"Namespaced",
		"names":{"plural":"shoots","singular":"shoot","kind":"Shoot","listKind":"ShootList"},
		"versions":[{"name":"v1beta1","served":true,"storage":true,"subresources":{"status":{}},
			"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// dupBody is a ConfigMap named name whose objects repeat members: a label key, the finalizers (the second null), an
// unknown field, and data (whose two objects merge).
func dupBody(name string) string {
	return `{"metadata":{"name":"` + name + `","labels":{"x":"1","x":"2"},"finalizers":["test/dup"],"finalizers":null},
		"data":{"a":"1"},"spam":1,"data":{"b":"2"},"spam":2}`
}
