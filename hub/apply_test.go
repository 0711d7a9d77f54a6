package hub_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// managedEntry is what the tests read of a metadata.managedFields entry.
type managedEntry struct {
	Manager, Operation, APIVersion, FieldsType, Subresource string
	FieldsV1                                                map[string]any
}

func managedFieldsOf(t *testing.T, body []byte) []managedEntry {
	t.Helper()
	var obj struct {
		Metadata struct{ ManagedFields []managedEntry }
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return obj.Metadata.ManagedFields
}

// owners returns "manager/operation" of every entry whose fieldsV1 contains the path of keys.
func owners(entries []managedEntry, path ...string) []string {
	var out []string
	for _, e := range entries {
		m := e.FieldsV1
		found := true
		for _, p := range path {
			next, ok := m[p].(map[string]any)
			if !ok {
				found = false
				break
			}
			m = next
		}
		if found {
			out = append(out, e.Manager+"/"+e.Operation)
		}
	}
	return out
}

// TestServerSideApply: PATCH with application/apply-patch+yaml is server-side apply as kube-apiserver serves it:
// it creates what does not exist (201), records the manager's fields in metadata.managedFields, refuses to take a
// field another manager owns (409 with a FieldManagerConflict cause per field) unless forced, merges a shoot's
// workers by name between managers, needs a fieldManager; updates and other patches record Update entries named by
// the fieldManager or the user agent; an empty managedFields list resets them.
func TestServerSideApply(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)
	const cms = "/api/v1/namespaces/garden-dev/configmaps"
	apply := func(path, manager, body string, query ...string) (int, []byte) {
		t.Helper()
		q := "?fieldManager=" + manager
		for _, x := range query {
			q += "&" + x
		}
		return h.Do(t, "PATCH", path+q, body, "Content-Type", "application/apply-patch+yaml")
	}
	code, out := apply(cms+"/c", "alice", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n  b: \"2\"\n")
	if code != 201 {
		t.Fatalf("apply of a new config map: want 201, got %d %s", code, out)
	}
	mf := managedFieldsOf(t, out)
	if len(mf) != 1 || mf[0].Manager != "alice" || mf[0].Operation != "Apply" || mf[0].APIVersion != "v1" || mf[0].FieldsType != "FieldsV1" ||
		len(owners(mf, "f:data", "f:a")) != 1 {
		t.Fatalf("managedFields after the apply: %+v", mf)
	}

	// Another manager setting alice's field: 409 naming the field and its manager.
	code, out = apply(cms+"/c", "bob", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"3\"\n")
	st := decodeStatus(t, out)
	if code != 409 || st.Reason != "Conflict" || st.Message != `Apply failed with 1 conflict: conflict with "alice": .data.a` ||
		len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != ".data.a" || st.Details.Causes[0].Reason != "FieldManagerConflict" {
		t.Fatalf("conflicting apply: want 409 with a FieldManagerConflict cause, got %d %s", code, out)
	}
	// The same value is shared ownership, not a conflict.
	if code, out = apply(cms+"/c", "bob", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  b: \"2\"\n"); code != 200 {
		t.Fatalf("apply of the same value: %d %s", code, out)
	}
	if o := owners(managedFieldsOf(t, out), "f:data", "f:b"); len(o) != 2 {
		t.Errorf("shared field: want two owners, got %v", o)
	}
	// Forced: bob takes the field.
	code, out = apply(cms+"/c", "bob", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"3\"\n  b: \"2\"\n", "force=true")
	if code != 200 || !strings.Contains(string(out), `"a":"3"`) {
		t.Fatalf("forced apply: %d %s", code, out)
	}
	if o := owners(managedFieldsOf(t, out), "f:data", "f:a"); len(o) != 1 || o[0] != "bob/Apply" {
		t.Errorf("after the forced apply .data.a belongs to %v, want bob", o)
	}
	// alice's next apply without b drops b? No: bob still owns it. Without a it would conflict no more.
	code, out = apply(cms+"/c", "alice", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  z: \"9\"\n")
	if code != 200 || !strings.Contains(string(out), `"b":"2"`) || !strings.Contains(string(out), `"z":"9"`) {
		t.Errorf("apply dropping fields another manager owns keeps them: %d %s", code, out)
	}

	// A merge patch and an update record Update entries: the fieldManager's, or the user agent's first part.
	code, out = h.Do(t, "PATCH", cms+"/c?fieldManager=patcher", `{"data":{"p":"1"}}`, "Content-Type", "application/merge-patch+json")
	if code != 200 || len(owners(managedFieldsOf(t, out), "f:data", "f:p")) != 1 || owners(managedFieldsOf(t, out), "f:data", "f:p")[0] != "patcher/Update" {
		t.Errorf("merge patch: want an Update entry of patcher, got %d %s", code, out)
	}
	var cur map[string]any
	if err := json.Unmarshal(out, &cur); err != nil {
		t.Fatal(err)
	}
	cur["data"].(map[string]any)["u"] = "1"
	code, out = h.Do(t, "PUT", cms+"/c", cur, "User-Agent", "my-controller/v1.2 (linux)")
	if o := owners(managedFieldsOf(t, out), "f:data", "f:u"); code != 200 || len(o) != 1 || o[0] != "my-controller/Update" {
		t.Errorf("update: want an Update entry of the user agent's name, got %d %v", code, o)
	}
	// An empty list resets them.
	code, out = h.Do(t, "PATCH", cms+"/c", `{"metadata":{"managedFields":[]}}`, "Content-Type", "application/merge-patch+json")
	if mf := managedFieldsOf(t, out); code != 200 || len(mf) != 0 {
		t.Errorf("reset: want no managedFields, got %d %+v", code, mf)
	}

	// Apply needs a fieldManager; cbor is not served; a wrong version is refused.
	if code, out = h.Do(t, "PATCH", cms+"/c", "apiVersion: v1\nkind: ConfigMap\n", "Content-Type", "application/apply-patch+yaml"); code != 422 || !strings.Contains(string(out), "fieldManager") {
		t.Errorf("apply without fieldManager: want 422, got %d %s", code, out)
	}
	if code, out = h.Do(t, "PATCH", cms+"/c?fieldManager=x", "x", "Content-Type", "application/apply-patch+cbor"); code != 415 || !strings.Contains(string(out), "application/apply-patch+yaml") {
		t.Errorf("apply in CBOR: want 415 naming the served types, got %d %s", code, out)
	}
	if code, out = apply(cms+"/c", "alice", "apiVersion: v2\nkind: ConfigMap\nmetadata:\n  name: c\n"); code != 400 {
		t.Errorf("apply of another version: want 400, got %d %s", code, out)
	}

	// A shoot's workers merge by name between two managers.
	mustDo(t, h, 201, "POST", shoots, shoot("s", "garden-dev", "1.35.4"))
	const w2 = `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"s"},"spec":{"provider":{"type":"local","workers":[{"name":"w2","minimum":1,"maximum":3,"machine":{"type":"m5.large"}}]}}}`
	code, out = apply(shoots+"/s", "autoscaler", w2)
	if code != 200 || !strings.Contains(string(out), `"name":"w1"`) || !strings.Contains(string(out), `"name":"w2"`) {
		t.Fatalf("apply of a second worker: want both workers, got %d %s", code, out)
	}
	if o := owners(managedFieldsOf(t, out), "f:spec", "f:provider", "f:workers", `k:{"name":"w2"}`); len(o) != 1 || o[0] != "autoscaler/Apply" {
		t.Errorf("worker w2 owned by %v, want autoscaler", o)
	}
}

// TestServerSideApplyGRPC: over gRPC, server-side apply is a Patch of type application/apply-patch+yaml with the
// field manager and force as metadata (gateway.MetadataFieldManager, gateway.MetadataForce); a conflict is Aborted
// (409), and a single empty managedFields entry in an update resets them.
func TestServerSideApplyGRPC(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)
	cms := kcorev1.NewConfigMapServiceClient(h.GRPC(t))
	as := func(manager string, force bool) context.Context {
		ctx := metadata.AppendToOutgoingContext(context.Background(), gateway.MetadataFieldManager, manager)
		if force {
			ctx = metadata.AppendToOutgoingContext(ctx, gateway.MetadataForce, "true")
		}
		return ctx
	}
	apply := func(ctx context.Context, value string) (*kcorev1.ConfigMap, error) {
		return cms.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "g", PatchType: api.PatchTypeApply,
			Patch: &metav1.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"g"},"data":{"a":"` + value + `"}}`)}}, grpc.WaitForReady(true))
	}
	out, err := apply(as("one", false), "1")
	if err != nil || len(out.GetMetadata().GetManagedFields()) != 1 || out.GetMetadata().GetManagedFields()[0].GetManager() != "one" {
		t.Fatalf("apply over gRPC: %v %v", out.GetMetadata(), err)
	}
	if _, err = apply(as("two", false), "2"); status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), `conflict with "one"`) {
		t.Errorf("conflicting apply over gRPC: want Aborted naming the manager, got %v", err)
	}
	if out, err = apply(as("two", true), "2"); err != nil || out.GetData()["a"] != "2" {
		t.Errorf("forced apply over gRPC: %v %v", out, err)
	}
	if _, err = apply(context.Background(), "3"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "fieldManager") {
		t.Errorf("apply without a field manager over gRPC: want InvalidArgument, got %v", err)
	}
	out.Metadata.ManagedFields = []*metav1.ManagedFieldsEntry{{}}
	if out, err = cms.Update(context.Background(), out); err != nil || len(out.GetMetadata().GetManagedFields()) != 0 {
		t.Errorf("update with one empty managedFields entry: want them reset, got %v %v", out.GetMetadata().GetManagedFields(), err)
	}
}
