package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestKubectlGetTable: the hub answers kubectl get with Tables of the kinds' printer columns (server-side printing):
// every kind's list (but Events', which are kube-apiserver's) has NAME first and AGE after the columns of priority 0; shoots have Gardener's columns; kubectl
// get shows them, -o wide adds the wide ones; includeObject decides what each row carries.
func TestKubectlGetTable(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	const accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

	// Every kind: a Table with NAME first and AGE.
	type table struct {
		APIVersion, Kind  string
		ColumnDefinitions []struct {
			Name     string
			Priority int32
		}
		Rows []struct {
			Cells  []any
			Object json.RawMessage
		}
	}
	get := func(path string, hdr ...string) table {
		t.Helper()
		code, out := h.Do(t, "GET", path, nil, append([]string{"Accept", accept}, hdr...)...)
		var tb table
		if code != 200 || json.Unmarshal(out, &tb) != nil || tb.Kind != "Table" {
			t.Fatalf("GET %s as Table: %d %s", path, code, out)
		}
		return tb
	}
	names := func(tb table, wide bool) string {
		var n []string
		for _, c := range tb.ColumnDefinitions {
			if wide || c.Priority == 0 {
				n = append(n, c.Name)
			}
		}
		return strings.Join(n, ",")
	}
	for _, k := range api.Kinds {
		p := "/apis/" + k.Group + "/" + k.Version + "/" + k.Resource
		if k.Group == "" {
			p = "/api/" + k.Version + "/" + k.Resource
		}
		tb := get(p)
		if k.Resource == "events" { // kube-apiserver's columns, no Name and Age of their own (hub TestOptionsParityWithKubeAPIServer)
			if n := names(tb, false); n != "LAST SEEN,TYPE,REASON,OBJECT,MESSAGE" || tb.APIVersion != "meta.k8s.io/v1" {
				t.Errorf("events: Table %s with columns %s: want meta.k8s.io/v1 and kube-apiserver's columns", tb.APIVersion, n)
			}
			continue
		}
		if n := names(tb, false); !strings.HasPrefix(n, "Name") || !strings.HasSuffix(n, "Age") || tb.APIVersion != "meta.k8s.io/v1" {
			t.Errorf("%s: Table %s with columns %s: want meta.k8s.io/v1, Name first and Age last", k.Resource, tb.APIVersion, n)
		}
	}
	shoots := get("/apis/core.gardener.cloud/v1beta1/shoots")
	if got, want := names(shoots, true), "Name,CLOUDPROFILE,PROVIDER,REGION,K8S VERSION,HIBERNATION,LAST OPERATION,STATUS,Age,SEED,PURPOSE,GARDENER VERSION,APISERVER,CONTROL,OBSERVABILITY,NODES,SYSTEM,TECHNICAL ID"; got != want {
		t.Errorf("shoot columns: want Gardener's %s, got %s", want, got)
	}
	if tb := get("/apis/core.gardener.cloud/v1beta1/shoots", "Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"); tb.APIVersion != "meta.k8s.io/v1beta1" {
		t.Errorf("v1beta1 Table: got %s", tb.APIVersion)
	}

	// Objects: a CloudProfile, a project (whose namespace the project controller makes), a ConfigMap.
	for _, w := range []struct{ path, body string }{
		{"/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"local"},"spec":{"type":"local","kubernetes":{"versions":[{"version":"1.35.4"}]},
			"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],"machineTypes":[{"name":"m5.large","cpu":"2","gpu":"0","memory":"8Gi"}],
			"regions":[{"name":"eu-1"},{"name":"eu-2"}]}}`},
		{"/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`},
	} {
		if code, out := h.Do(t, "POST", w.path, w.body); code != 201 {
			t.Fatalf("POST %s: %d %s", w.path, code, out)
		}
	}
	h.WaitNamespace(t, "garden-dev")
	if code, out := h.Do(t, "POST", "/api/v1/namespaces/garden-dev/configmaps", `{"metadata":{"name":"c"},"data":{"a":"1","b":"2"}}`); code != 201 {
		t.Fatalf("configmap: %d %s", code, out)
	}

	// includeObject: Metadata by default (PartialObjectMetadata), Object, None; anything else is a 400.
	for inc, want := range map[string]string{"": `"kind":"PartialObjectMetadata"`, "?includeObject=Object": `"kind":"CloudProfile"`, "?includeObject=None": ""} {
		tb := get("/apis/core.gardener.cloud/v1beta1/cloudprofiles/local" + inc)
		if len(tb.Rows) != 1 || tb.Rows[0].Cells[0] != "local" || (want == "") != (len(tb.Rows[0].Object) == 0 || string(tb.Rows[0].Object) == "null") ||
			!strings.Contains(string(tb.Rows[0].Object), want) {
			t.Errorf("includeObject %q: got %+v", inc, tb.Rows)
		}
	}
	if code, out := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/cloudprofiles?includeObject=All", nil, "Accept", accept); code != 400 || !strings.Contains(string(out), "includeObject") {
		t.Errorf("includeObject=All: want 400 naming it, got %d %s", code, out)
	}

	// kubectl get prints the server's columns.
	run := kubectlAs(t, kubectl, h, h.Token)
	kc := func(args ...string) string {
		t.Helper()
		out, code := run(args...)
		if code != 0 {
			t.Fatalf("kubectl %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	fields := func(out string) []string {
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
		return rows
	}
	out := fields(kc("get", "cloudprofiles"))
	if len(out) != 2 || out[0] != "NAME PROVIDER AGE" || !strings.HasPrefix(out[1], "local local ") {
		t.Errorf("kubectl get cloudprofiles: %q", out)
	}
	out = fields(kc("get", "cloudprofiles", "-o", "wide"))
	if len(out) != 2 || out[0] != "NAME PROVIDER AGE REGIONS" || !strings.HasSuffix(out[1], " eu-1,eu-2") {
		t.Errorf("kubectl get cloudprofiles -o wide: %q", out)
	}
	out = fields(kc("get", "configmaps"))
	if len(out) != 2 || out[0] != "NAME DATA AGE" || !strings.HasPrefix(out[1], "c 2 ") {
		t.Errorf("kubectl get configmaps: %q", out)
	}
	// kubectl's pages (--chunk-size, 500 by default): a Table per page, the continue token in its metadata, one
	// header for all of them, every row once.
	for _, n := range []string{"d", "e", "f", "g"} {
		if code, body := h.Do(t, "POST", "/api/v1/namespaces/garden-dev/configmaps", `{"metadata":{"name":"`+n+`"},"data":{"a":"1"}}`); code != 201 {
			t.Fatalf("configmap %s: %d %s", n, code, body)
		}
	}
	out = fields(kc("get", "configmaps", "-n", "garden-dev", "--chunk-size=2"))
	if len(out) != 6 || out[0] != "NAME DATA AGE" || !strings.HasPrefix(out[1], "c 2 ") || !strings.HasPrefix(out[5], "g 1 ") {
		t.Errorf("kubectl get configmaps --chunk-size=2: %q", out)
	}
	out = fields(kc("get", "projects"))
	if len(out) != 2 || out[0] != "NAME NAMESPACE STATUS OWNER CREATOR AGE" || !strings.HasPrefix(out[1], "dev garden-dev ") {
		t.Errorf("kubectl get projects: %q", out)
	}
}

// TestKubectlGetWatchTable: `kubectl get shoots -w` asks for a watch of Tables: the hub answers events whose
// objects are Tables of one row, the first with the column definitions, so kubectl prints Gardener's columns for
// the shoot as it is, then a row for its change.
func TestKubectlGetWatchTable(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	shootGarden(t, h)
	if code, out := h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots", `{"metadata":{"name":"watched"},"spec":{"cloudProfile":{"name":"local"},
		"credentialsBindingName":"local","region":"local","kubernetes":{"version":"1.35.4"},
		"provider":{"type":"local","workers":[{"name":"w1","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]},"networking":{"type":"calico","nodes":"10.0.0.0/16"}}}`); code != 201 {
		t.Fatalf("shoot: %d %s", code, out)
	}
	// The shoot changes once kubectl has printed it as it is (kubectl's start takes seconds on a loaded machine); the
	// watch ends after the change's row, or at its request timeout.
	cmd := kubectlCommandAs(t, kubectl, h, h.Token)("get", "shoots", "-w", "--request-timeout="+timescale.Scale(20*time.Second).String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		rows = append(rows, strings.Join(strings.Fields(sc.Text()), " "))
		if len(rows) == 2 {
			h.Do(t, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/watched", `{"spec":{"hibernation":{"enabled":true}}}`,
				"Content-Type", "application/merge-patch+json")
		}
		if len(rows) == 3 {
			_ = cmd.Process.Kill()
		}
	}
	_ = cmd.Wait()
	if len(rows) < 3 || rows[0] != "NAME CLOUDPROFILE PROVIDER REGION K8S VERSION HIBERNATION LAST OPERATION STATUS AGE" ||
		!strings.HasPrefix(rows[1], "watched local local local 1.35.4 Awake ") || !strings.HasPrefix(rows[2], "watched local local local 1.35.4 Hibernating ") {
		t.Errorf("kubectl get shoots -w: want Gardener's columns, the shoot, then its change; got\n%s\n%s", strings.Join(rows, "\n"), stderr.String())
	}
}

// TestKubectlGetEveryGardenerKind: the real kubectl's `get` of every Gardener kind the hub serves (each version)
// prints the columns of the hub's Table for the kind: NAME, the printer columns of priority 0 and AGE, and with
// -o wide the wide ones after them. One object of each kind is written to the store directly (past admission: only
// the header is compared, which needs a row).
func TestKubectlGetEveryGardenerKind(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	// Only the event loop: no controller acts on the bare objects.
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"event"}, true })
	ctx := context.Background()
	for _, k := range api.Kinds {
		if !strings.HasSuffix(k.Group, "gardener.cloud") {
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(k.Message))
		if err != nil {
			t.Fatalf("%s: %v", k.Message, err)
		}
		obj := mt.New()
		md := &metav1.ObjectMeta{Name: "every-" + strings.ToLower(k.Kind)}
		if k.Namespaced {
			md.Namespace = "garden-dev"
		}
		fields := obj.Descriptor().Fields()
		obj.Set(fields.ByName("api_version"), protoreflect.ValueOfString(k.APIVersion()))
		obj.Set(fields.ByName("kind"), protoreflect.ValueOfString(k.Kind))
		obj.Set(fields.ByName("metadata"), protoreflect.ValueOfMessage(md.ProtoReflect()))
		coll, ok := h.Registry().Collection(schema.GroupResource{Group: k.Group, Resource: k.Resource})
		if !ok {
			t.Fatalf("no collection of %s.%s", k.Resource, k.Group)
		}
		if _, err := coll.Create(ctx, obj.Interface().(store.Object)); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("store %s: %v", k.Kind, err)
		}
	}
	run := kubectlAs(t, kubectl, h, h.Token)
	const accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
	for _, k := range api.Kinds {
		if !strings.HasSuffix(k.Group, "gardener.cloud") {
			continue
		}
		path := "/apis/" + k.Group + "/" + k.Version + "/" + k.Resource
		code, body := h.Do(t, "GET", path, nil, "Accept", accept)
		var tb struct {
			ColumnDefinitions []struct {
				Name     string
				Priority int32
			}
		}
		if code != 200 || json.Unmarshal(body, &tb) != nil {
			t.Fatalf("GET %s as Table: %d %s", path, code, body)
		}
		var want, wantWide []string
		for _, c := range tb.ColumnDefinitions {
			n := strings.ToUpper(c.Name)
			if c.Priority == 0 {
				want = append(want, n)
			}
			wantWide = append(wantWide, n)
		}
		resource := k.Resource + "." + k.Version + "." + k.Group
		for _, wide := range []bool{false, true} {
			args, cols := []string{"get", resource}, want
			if wide {
				args, cols = append(args, "-o", "wide"), wantWide
			}
			out, code := run(args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || len(lines) != 2 {
				t.Errorf("kubectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
				continue
			}
			// Columns are separated by at least two spaces or start where the header's next name starts; compare the
			// header's names, each possibly of several words (K8S VERSION), against the Table's in order.
			if got := strings.Join(strings.Fields(lines[0]), " "); got != strings.Join(cols, " ") {
				t.Errorf("kubectl %s: header %q, want the Table's columns %q", strings.Join(args, " "), got, strings.Join(cols, " "))
			}
			if !strings.HasPrefix(lines[1], "every-"+strings.ToLower(k.Kind)) {
				t.Errorf("kubectl %s: row %q", strings.Join(args, " "), lines[1])
			}
		}
	}
}
