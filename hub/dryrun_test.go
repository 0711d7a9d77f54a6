package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// quietHub is a hub without controller loops and scheduler: in it, only the test writes.
func quietHub(t *testing.T) *hubtest.Hub {
	t.Helper()
	// A list naming no controller but "-name" and no "*" enables none.
	return hubtest.Start(t, func(c *hub.Config) { c.Controllers = []string{"-shoot-statuslabel"}; c.DisableScheduler = true })
}

// etcdState is every key of the hub's etcd with its value and modification revision, and the store's revision.
type etcdState struct {
	rev  int64
	keys map[string]string
}

func readEtcd(t *testing.T, h *hubtest.Hub) etcdState {
	t.Helper()
	resp, err := h.Store().Client().Get(context.Background(), "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	s := etcdState{rev: resp.Header.Revision, keys: map[string]string{}}
	for _, kv := range resp.Kvs {
		s.keys[string(kv.Key)] = fmt.Sprintf("%d:%x", kv.ModRevision, kv.Value)
	}
	return s
}

// unchanged fails unless etcd holds exactly what before recorded, at the same revision: nothing was written.
func unchanged(t *testing.T, h *hubtest.Hub, before etcdState, what string) {
	t.Helper()
	after := readEtcd(t, h)
	if after.rev != before.rev {
		t.Errorf("%s: etcd revision moved from %d to %d", what, before.rev, after.rev)
	}
	if len(after.keys) != len(before.keys) {
		t.Errorf("%s: %d keys before, %d after", what, len(before.keys), len(after.keys))
	}
	for k, v := range before.keys {
		if after.keys[k] != v {
			t.Errorf("%s: key %s changed", what, k)
		}
	}
}

// restWatch opens a REST watch on path from rv and returns its events' types and object names, one per line.
func restWatch(t *testing.T, h *hubtest.Hub, path, rv string) <-chan string {
	t.Helper()
	lines := rawWatch(t, h, path, rv)
	events := make(chan string, 100)
	go func() {
		defer close(events)
		for line := range lines {
			var ev struct {
				Type   string
				Object struct{ Metadata struct{ Name string } }
			}
			if json.Unmarshal([]byte(line), &ev) == nil {
				events <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}()
	return events
}

// rawWatch opens a REST watch on path from rv and returns its events as sent, one per line.
func rawWatch(t *testing.T, h *hubtest.Hub, path, rv string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", h.URL+path+"?watch=true&resourceVersion="+rv, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			events <- sc.Text()
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return events
}

// listVersion returns the resourceVersion of a list of path.
func listVersion(t *testing.T, h *hubtest.Hub, path string) string {
	t.Helper()
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(mustDo(t, h, 200, "GET", path, nil), &l); err != nil {
		t.Fatal(err)
	}
	return l.Metadata.ResourceVersion
}

// nextEvent returns the next event of a watch, failing after 10 s.
func nextEvent(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
		return ""
	}
}

type objectBody struct {
	Metadata struct {
		Name              string
		UID               string
		ResourceVersion   string
		CreationTimestamp string
		DeletionTimestamp string
		Generation        int64
		Finalizers        []string
	}
	Data map[string]string
	Spec struct{ SeedName string }
}

func decodeObject(t *testing.T, b []byte) objectBody {
	t.Helper()
	var o objectBody
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return o
}

// TestDryRunREST: ?dryRun=All on every write of the REST face — create, update, the three patch types, delete
// (with and without finalizers, options in the query or in kubectl's body), the status and binding subresources —
// runs admission and validation and answers what the write would, and leaves etcd as it was (same revision, same
// keys and values) with no watch event.
func TestDryRunREST(t *testing.T) {
	h := quietHub(t)
	garden(t, h)
	const cms = "/api/v1/namespaces/garden-dev/configmaps"
	const seeds = "/apis/core.gardener.cloud/v1beta1/seeds"
	seed := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"provider":{"type":"local","region":"local"},"backup":{"provider":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"b","namespace":"garden"}},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{}}}`, name)
	}
	mustDo(t, h, 201, "POST", seeds, seed("s1"))
	mustDo(t, h, 201, "POST", seeds, seed("s2"))
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"cm"},"data":{"a":"1"}}`)
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"held","finalizers":["test/hold"]},"data":{"a":"1"}}`)
	// Secrets are encrypted at rest: their dry runs read and decide on the decrypted state.
	const secrets = "/api/v1/namespaces/garden-dev/secrets"
	mustDo(t, h, 201, "POST", secrets, `{"metadata":{"name":"sec"},"stringData":{"k":"v1"}}`)
	sh := strings.Replace(shoot("sh", "garden-dev", "1.35.4"), `"region":"local"`, `"region":"local","seedName":"s1"`, 1)
	shRV := decodeObject(t, mustDo(t, h, 201, "POST", shoots, sh)).Metadata.ResourceVersion
	cmEvents := restWatch(t, h, cms, listVersion(t, h, cms))
	shootEvents := restWatch(t, h, shoots, listVersion(t, h, shoots))
	before := readEtcd(t, h)
	cur := decodeObject(t, mustDo(t, h, 200, "GET", cms+"/cm", nil))

	do := func(want int, method, path, body string, header ...string) objectBody {
		t.Helper()
		code, out := h.Do(t, method, path, body, header...)
		if code != want {
			t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, code, out)
		}
		if code >= 300 {
			return objectBody{}
		}
		return decodeObject(t, out)
	}

	// Create: defaulted and server-filled as a create would be, without a resourceVersion.
	o := do(201, "POST", cms+"?dryRun=All", `{"metadata":{"name":"new"},"data":{"a":"1"}}`)
	if o.Metadata.Name != "new" || o.Metadata.UID == "" || o.Metadata.CreationTimestamp == "" || o.Metadata.ResourceVersion != "" || o.Data["a"] != "1" {
		t.Errorf("dry-run create answered %+v", o)
	}
	o = do(201, "POST", cms+"?dryRun=All", `{"metadata":{"generateName":"gen-"}}`)
	if !strings.HasPrefix(o.Metadata.Name, "gen-") || len(o.Metadata.Name) != len("gen-")+5 {
		t.Errorf("dry-run create with generateName named it %q", o.Metadata.Name)
	}
	do(409, "POST", cms+"?dryRun=All", `{"metadata":{"name":"cm"}}`)
	do(422, "POST", cms+"?dryRun=All", `{"metadata":{"name":"Not_A_Name"}}`)
	// Admission runs: a shoot's references are checked.
	do(422, "POST", shoots+"?dryRun=All", strings.Replace(shoot("bad", "garden-dev", "1.35.4"), `"region":"local"`, `"region":"mars"`, 1))
	do(201, "POST", shoots+"?dryRun=All", shoot("dry", "garden-dev", "1.35"))
	// No token is issued by a dry run: the answer shows none, and the store holds none.
	if code, out := h.Do(t, "POST", "/apis/auth.trellis.dev/v1alpha1/namespaces/trellis-system/accesstokens?dryRun=All", `{"metadata":{"name":"tok"},"spec":{"user":"u@example.com"}}`); code != 201 || strings.Contains(string(out), `"token"`) || !strings.Contains(string(out), `"tokenHash"`) {
		t.Errorf("dry-run access token: %s", out)
	}

	// Update and the patch types: the answer is the written state, at the current resourceVersion.
	o = do(200, "PUT", cms+"/cm?dryRun=All", `{"metadata":{"name":"cm","resourceVersion":"`+cur.Metadata.ResourceVersion+`"},"data":{"a":"2"}}`)
	if o.Data["a"] != "2" || o.Metadata.UID != cur.Metadata.UID || o.Metadata.ResourceVersion != cur.Metadata.ResourceVersion {
		t.Errorf("dry-run update answered %+v (current %+v)", o, cur.Metadata)
	}
	do(409, "PUT", cms+"/cm?dryRun=All", `{"metadata":{"name":"cm","resourceVersion":"1"},"data":{"a":"2"}}`)
	if o := do(200, "PATCH", secrets+"/sec?dryRun=All", `{"stringData":{"k":"v2"}}`, "Content-Type", "application/merge-patch+json"); o.Data["k"] != "djI=" {
		t.Errorf("dry-run secret patch answered %+v", o)
	}
	do(200, "DELETE", secrets+"/sec?dryRun=All", "")
	for ct, patch := range map[string]string{
		"application/merge-patch+json":           `{"data":{"a":"3"}}`,
		"application/strategic-merge-patch+json": `{"data":{"a":"3"}}`,
		"application/json-patch+json":            `[{"op":"replace","path":"/data/a","value":"3"}]`,
	} {
		o = do(200, "PATCH", cms+"/cm?dryRun=All", patch, "Content-Type", ct)
		if o.Data["a"] != "3" {
			t.Errorf("dry-run %s answered %+v", ct, o)
		}
	}
	// Spec changes move the generation in the answer, as they would.
	o = do(200, "PATCH", shoots+"/sh?dryRun=All", `{"spec":{"kubernetes":{"version":"1.35.4"},"hibernation":{"enabled":true}}}`, "Content-Type", "application/merge-patch+json")
	if o.Metadata.Generation != 2 {
		t.Errorf("dry-run spec patch: generation %d, want 2", o.Metadata.Generation)
	}

	// Subresources.
	do(200, "PUT", shoots+"/sh/status?dryRun=All", `{"metadata":{"name":"sh","namespace":"garden-dev","resourceVersion":"`+shRV+`"},"status":{"seedName":"s1"}}`)
	do(200, "PATCH", shoots+"/sh/status?dryRun=All", `{"status":{"seedName":"s1"}}`, "Content-Type", "application/merge-patch+json")
	o = do(200, "PUT", shoots+"/sh/binding?dryRun=All", `{"metadata":{"name":"sh","namespace":"garden-dev","resourceVersion":"`+shRV+`"},"spec":{"seedName":"s2"}}`)
	if o.Spec.SeedName != "s2" {
		t.Errorf("dry-run binding answered seedName %q", o.Spec.SeedName)
	}
	do(200, "PATCH", shoots+"/sh/binding?dryRun=All", `{"spec":{"seedName":"s2"}}`, "Content-Type", "application/merge-patch+json")
	do(422, "PATCH", shoots+"/sh/binding?dryRun=All", `{"spec":{"seedName":"missing"}}`, "Content-Type", "application/merge-patch+json")
	do(200, "PUT", "/api/v1/namespaces/orphan/status?dryRun=All", `{"metadata":{"name":"orphan"},"status":{"phase":"Terminating"}}`)

	// Delete: the object as it is, or marked for deletion while finalizers hold it.
	o = do(200, "DELETE", cms+"/cm?dryRun=All", "")
	if o.Metadata.Name != "cm" || o.Metadata.DeletionTimestamp != "" {
		t.Errorf("dry-run delete answered %+v", o.Metadata)
	}
	do(200, "DELETE", cms+"/cm", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background","dryRun":["All"]}`)
	o = do(200, "DELETE", cms+"/held?dryRun=All", "")
	if o.Metadata.DeletionTimestamp == "" || len(o.Metadata.Finalizers) != 1 {
		t.Errorf("dry-run delete with a finalizer answered %+v", o.Metadata)
	}
	do(409, "DELETE", cms+"/cm", `{"dryRun":["All"],"preconditions":{"resourceVersion":"1"}}`)
	// Gardener's deletion confirmation is admission too.
	do(403, "DELETE", shoots+"/sh?dryRun=All", "")
	do(404, "DELETE", cms+"/missing?dryRun=All", "")

	// Invalid values are refused as kube-apiserver refuses them, before anything is decided.
	for _, r := range []struct{ method, path, body, kind string }{
		{"POST", cms, `{"metadata":{"name":"x"}}`, "CreateOptions"},
		{"PUT", cms + "/cm", `{"metadata":{"name":"cm"}}`, "UpdateOptions"},
		{"PATCH", cms + "/cm", `{"data":{"a":"9"}}`, "PatchOptions"},
		{"DELETE", cms + "/cm", "", "DeleteOptions"},
	} {
		code, out := h.Do(t, r.method, r.path+"?dryRun=all", r.body, "Content-Type", map[bool]string{true: "application/merge-patch+json", false: "application/json"}[r.method == "PATCH"])
		st := decodeStatus(t, out)
		want := r.kind + `.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["all"]: supported values: "All"`
		if code != 422 || st.Reason != "Invalid" || st.Message != want || !st.hasCause("dryRun") {
			t.Errorf("%s with dryRun=all: %d %+v, want 422 %q", r.method, code, st, want)
		}
	}
	unchanged(t, h, before, "dry runs")

	// The first events after the dry runs are those of a real write.
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"marker"}}`)
	mustDo(t, h, 200, "PATCH", shoots+"/sh", `{"metadata":{"labels":{"marker":"1"}}}`)
	if ev := nextEvent(t, cmEvents); ev != "ADDED marker" {
		t.Errorf("first config map event after the dry runs: %q", ev)
	}
	if ev := nextEvent(t, shootEvents); ev != "MODIFIED sh" {
		t.Errorf("first shoot event after the dry runs: %q", ev)
	}
	if o := decodeObject(t, mustDo(t, h, 200, "GET", secrets+"/sec", nil)); o.Data["k"] != "djE=" {
		t.Errorf("secret after the dry runs: %+v", o)
	}
	if o := decodeObject(t, mustDo(t, h, 200, "GET", cms+"/cm", nil)); o.Data["a"] != "1" {
		t.Errorf("config map after the dry runs: %+v", o)
	}
	if o := decodeObject(t, mustDo(t, h, 200, "GET", shoots+"/sh", nil)); o.Spec.SeedName != "s1" || o.Metadata.Generation != 1 {
		t.Errorf("shoot after the dry runs: %+v", o)
	}
}

// TestDryRunGRPC: the gRPC services take dryRun as metadata (gateway.MetadataDryRun) on every write and leave etcd
// as it was; an invalid value is InvalidArgument with kube-apiserver's message.
func TestDryRunGRPC(t *testing.T) {
	h := quietHub(t)
	garden(t, h)
	mustDo(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", `{"metadata":{"name":"s1"},"spec":{"provider":{"type":"local","region":"local"},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{}}}`)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces/garden-dev/configmaps", `{"metadata":{"name":"cm","finalizers":["test/hold"]},"data":{"a":"1"}}`)
	mustDo(t, h, 201, "POST", shoots, shoot("sh", "garden-dev", "1.35.4"))
	conn := h.GRPC(t)
	cms, sh := kcorev1.NewConfigMapServiceClient(conn), corev1beta1.NewShootServiceClient(conn)
	dry := metadata.AppendToOutgoingContext(context.Background(), gateway.MetadataDryRun, "All")
	before := readEtcd(t, h)

	out, err := cms.Create(dry, &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Name: "new", Namespace: "garden-dev"}, Data: map[string]string{"a": "1"}})
	if err != nil || out.GetMetadata().GetUid() == "" || out.GetMetadata().GetResourceVersion() != "" {
		t.Errorf("dry-run create: %v %v", out.GetMetadata(), err)
	}
	cur, err := cms.Get(context.Background(), &metav1.GetRequest{Namespace: "garden-dev", Name: "cm"})
	if err != nil {
		t.Fatal(err)
	}
	upd := &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Name: "cm", Namespace: "garden-dev", ResourceVersion: cur.GetMetadata().GetResourceVersion(), Finalizers: []string{"test/hold"}}, Data: map[string]string{"a": "2"}}
	if out, err = cms.Update(dry, upd); err != nil || out.GetData()["a"] != "2" || out.GetMetadata().GetResourceVersion() != cur.GetMetadata().GetResourceVersion() {
		t.Errorf("dry-run update: %v %v", out, err)
	}
	for _, pt := range []string{"application/merge-patch+json", "application/json-patch+json"} {
		patch := `{"data":{"a":"3"}}`
		if pt == "application/json-patch+json" {
			patch = `[{"op":"replace","path":"/data/a","value":"3"}]`
		}
		if out, err = cms.Patch(dry, &metav1.PatchRequest{Namespace: "garden-dev", Name: "cm", PatchType: pt, Patch: &metav1.RawExtension{Raw: []byte(patch)}}); err != nil || out.GetData()["a"] != "3" {
			t.Errorf("dry-run %s: %v %v", pt, out, err)
		}
	}
	if out, err = cms.Delete(dry, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "cm"}); err != nil || out.GetMetadata().GetDeletionTimestamp() == nil {
		t.Errorf("dry-run delete with a finalizer: %v %v", out.GetMetadata(), err)
	}
	s, err := sh.Get(context.Background(), &metav1.GetRequest{Namespace: "garden-dev", Name: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	s.Status = &corev1beta1.ShootStatus{SeedName: proto.String("s1")}
	if _, err := sh.UpdateStatus(dry, s); err != nil {
		t.Errorf("dry-run status update: %v", err)
	}
	s.Spec.SeedName = proto.String("s1")
	if out, err := sh.UpdateBinding(dry, s); err != nil || out.GetSpec().GetSeedName() != "s1" {
		t.Errorf("dry-run binding: %v %v", out.GetSpec().GetSeedName(), err)
	}
	if _, err := sh.Patch(dry, &metav1.PatchRequest{Namespace: "garden-dev", Name: "sh", Subresource: "status", Patch: &metav1.RawExtension{Raw: []byte(`{"status":{"seedName":"s1"}}`)}}); err != nil {
		t.Errorf("dry-run status patch: %v", err)
	}
	unchanged(t, h, before, "gRPC dry runs")

	bad := metadata.AppendToOutgoingContext(context.Background(), gateway.MetadataDryRun, "Yes")
	_, err = cms.Delete(bad, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "cm"})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Yes"]`) {
		t.Errorf("delete with dryRun Yes: %v", err)
	}
	unchanged(t, h, before, "refused dry run")
}
