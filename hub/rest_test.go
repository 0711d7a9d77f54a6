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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

const (
	shoots   = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots"
	projects = "/apis/core.gardener.cloud/v1beta1/projects"
)

type statusBody struct {
	Kind    string `json:"kind"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Code    int    `json:"code"`
	Details struct {
		Causes []struct {
			Field  string `json:"field"`
			Reason string `json:"reason"`
		} `json:"causes"`
	} `json:"details"`
}

func decodeStatus(t *testing.T, body []byte) statusBody {
	t.Helper()
	var s statusBody
	if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("not a Status body (%v): %s", err, body)
	}
	return s
}

func (s statusBody) hasCause(field string) bool {
	for _, c := range s.Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

func mustDo(t *testing.T, h *hubtest.Hub, want int, method, path string, body any) []byte {
	t.Helper()
	var hdr []string
	if method == "PATCH" {
		hdr = []string{"Content-Type", "application/merge-patch+json"}
	}
	code, out := h.Do(t, method, path, body, hdr...)
	if code != want {
		t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, code, out)
	}
	return out
}

// garden sets up what a Shoot needs: namespace, project, cloud profile, credentials binding, and the registration of
// its extension types (provider-local's, calico networking and the gardenlinux image).
func garden(t *testing.T, h *hubtest.Hub) {
	t.Helper()
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"garden-dev"}}`)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"orphan"}}`)
	mustDo(t, h, 201, "POST", projects, `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`)
	mustDo(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"local"},"spec":{"type":"local",
		"kubernetes":{"versions":[{"version":"1.35.4"},{"version":"1.34.7"}]},
		"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],
		"machineTypes":[{"name":"m5.large","cpu":"2","gpu":"0","memory":"8Gi"}],
		"regions":[{"name":"local","zones":[{"name":"a"},{"name":"b"},{"name":"c"}]}]}}`)
	mustDo(t, h, 201, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings",
		`{"metadata":{"name":"local"},"provider":{"type":"local"},"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"local","namespace":"garden-dev"}}`)
}

func shoot(name, ns, version string) string {
	return fmt.Sprintf(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":%q,"namespace":%q},
		"spec":{"cloudProfile":{"name":"local"},"credentialsBindingName":"local","region":"local","kubernetes":{"version":%q},
		"provider":{"type":"local","workers":[{"name":"w1","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]},
		"networking":{"type":"calico","nodes":"10.0.0.0/16"}}}`, name, ns, version)
}

func TestShootAdmission(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)

	code, body := h.Do(t, "POST", shoots, shoot("bad-version", "garden-dev", "1.30.0"))
	if code != 422 {
		t.Fatalf("version not in profile: want 422, got %d %s", code, body)
	}
	if st := decodeStatus(t, body); st.Reason != "Invalid" || !st.hasCause("spec.kubernetes.version") {
		t.Errorf("want Invalid with cause spec.kubernetes.version, got %+v", st)
	}

	code, body = h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/orphan/shoots", shoot("s", "orphan", "1.35.4"))
	if code != 422 || !decodeStatus(t, body).hasCause("metadata.namespace") {
		t.Errorf("namespace without project: want 422 naming metadata.namespace, got %d %s", code, body)
	}

	badMachine := strings.Replace(shoot("bad-machine", "garden-dev", "1.35.4"), `"m5.large"`, `"m9.huge"`, 1)
	code, body = h.Do(t, "POST", shoots, badMachine)
	if code != 422 || !decodeStatus(t, body).hasCause("spec.provider.workers[0].machine.type") {
		t.Errorf("unknown machine type: want 422 naming the worker's machine type, got %d %s", code, body)
	}

	noBinding := strings.Replace(shoot("no-binding", "garden-dev", "1.35.4"), `"credentialsBindingName":"local"`, `"credentialsBindingName":"missing"`, 1)
	code, body = h.Do(t, "POST", shoots, noBinding)
	if code != 422 || !decodeStatus(t, body).hasCause("spec.credentialsBindingName") {
		t.Errorf("missing credentials binding: want 422 naming spec.credentialsBindingName, got %d %s", code, body)
	}

	// A partial version is completed from the profile, as Gardener's admission does.
	out := mustDo(t, h, 201, "POST", shoots, shoot("partial", "garden-dev", "1.34"))
	var s map[string]any
	_ = json.Unmarshal(out, &s)
	if v := s["spec"].(map[string]any)["kubernetes"].(map[string]any)["version"]; v != "1.34.7" {
		t.Errorf("partial version 1.34 defaulted to %v, want 1.34.7", v)
	}

	unknown := strings.Replace(shoot("unknown-field", "garden-dev", "1.35.4"), `"region":"local"`, `"region":"local","regoin":"x"`, 1)
	code, body = h.Do(t, "POST", shoots, unknown)
	if code != 400 || !strings.Contains(string(body), "spec.regoin") {
		t.Errorf("unknown field: want 400 naming spec.regoin, got %d %s", code, body)
	}
	mustDo(t, h, 201, "POST", shoots+"?fieldValidation=Ignore", strings.Replace(unknown, "unknown-field", "ignored-field", 1))

	// Deletion needs Gardener's confirmation annotation.
	code, body = h.Do(t, "DELETE", shoots+"/partial", nil)
	if code != 403 {
		t.Errorf("delete without confirmation: want 403, got %d %s", code, body)
	}
	mustDo(t, h, 200, "PATCH", shoots+"/partial", `{"metadata":{"annotations":{"confirmation.gardener.cloud/deletion":"true"}}}`)
	mustDo(t, h, 200, "DELETE", shoots+"/partial", nil)
	mustDo(t, h, 404, "GET", shoots+"/partial", nil)
}

func TestOptimisticConcurrencyGenerationAndStatus(t *testing.T) {
	// The shoot-statuslabel controller, the maintenance (a new shoot whose maintenance window is open is maintained at
	// once) and the scheduler (reporting it found no seed in the status) would update the shoot between the test's
	// reads and writes.
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-statuslabel", "shoot-maintenance"), func(c *hub.Config) { c.DisableScheduler = true })
	garden(t, h)
	var created struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Generation      int64  `json:"generation"`
			UID             string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(mustDo(t, h, 201, "POST", shoots, shoot("occ", "garden-dev", "1.34.7")), &created); err != nil {
		t.Fatal(err)
	}
	if created.Metadata.Generation != 1 || created.Metadata.UID == "" || created.Metadata.ResourceVersion == "" {
		t.Fatalf("server-owned metadata not set: %+v", created.Metadata)
	}
	stale := created.Metadata.ResourceVersion
	upd := func(rv, version string) string {
		s := shoot("occ", "garden-dev", version)
		return strings.Replace(s, `"namespace":"garden-dev"}`, `"namespace":"garden-dev","resourceVersion":"`+rv+`"}`, 1)
	}
	out := mustDo(t, h, 200, "PUT", shoots+"/occ", upd(stale, "1.35.4"))
	var updated map[string]any
	_ = json.Unmarshal(out, &updated)
	md := updated["metadata"].(map[string]any)
	if md["generation"] != float64(2) {
		t.Errorf("spec change: generation %v, want 2", md["generation"])
	}
	code, body := h.Do(t, "PUT", shoots+"/occ", upd(stale, "1.35.4"))
	if code != 409 || decodeStatus(t, body).Reason != "Conflict" {
		t.Fatalf("stale resourceVersion: want 409 Conflict, got %d %s", code, body)
	}
	// The status subresource changes status only, and not the generation.
	st := `{"metadata":{"name":"occ","namespace":"garden-dev","resourceVersion":"` + md["resourceVersion"].(string) + `"},"spec":{"region":"ignored"},"status":{"technicalID":"shoot--dev--occ","lastOperation":{"type":"Create","state":"Processing","progress":10}}}`
	out = mustDo(t, h, 200, "PUT", shoots+"/occ/status", st)
	var afterStatus map[string]any
	_ = json.Unmarshal(out, &afterStatus)
	if g := afterStatus["metadata"].(map[string]any)["generation"]; g != float64(2) {
		t.Errorf("status update moved generation to %v", g)
	}
	if r := afterStatus["spec"].(map[string]any)["region"]; r != "local" {
		t.Errorf("status update changed spec.region to %v", r)
	}
	if p := afterStatus["status"].(map[string]any)["lastOperation"].(map[string]any)["progress"]; p != float64(10) {
		t.Errorf("status not written: progress %v", p)
	}
	// A spec update keeps the status.
	out = mustDo(t, h, 200, "PATCH", shoots+"/occ", `{"metadata":{"labels":{"a":"b"}}}`)
	var afterPatch map[string]any
	_ = json.Unmarshal(out, &afterPatch)
	if afterPatch["status"] == nil {
		t.Error("a metadata patch dropped the status")
	}
	if g := afterPatch["metadata"].(map[string]any)["generation"]; g != float64(2) {
		t.Errorf("metadata-only patch moved generation to %v", g)
	}
	// A resourceVersion in a patch is a precondition; a stale one conflicts, a removed one applies to the current.
	code, body = h.Do(t, "PATCH", shoots+"/occ", `{"metadata":{"resourceVersion":"`+stale+`","labels":{"a":"c"}}}`, "Content-Type", "application/merge-patch+json")
	if code != 409 {
		t.Errorf("patch with a stale resourceVersion: want 409, got %d %s", code, body)
	}
	mustDo(t, h, 200, "PATCH", shoots+"/occ", `{"metadata":{"resourceVersion":null,"labels":{"a":"d"}}}`)
}

func TestFinalizersHoldDeletion(t *testing.T) {
	h := hubtest.Start(t)
	h.RegisterExtensions(t, "provider-local", hubtest.LocalExtensions()...)
	const seeds = "/apis/core.gardener.cloud/v1beta1/seeds"
	mustDo(t, h, 201, "POST", seeds, `{"metadata":{"name":"s1","finalizers":["gardener"]},"spec":{"provider":{"type":"local","region":"local"},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{}}}`)
	out := mustDo(t, h, 200, "DELETE", seeds+"/s1", nil)
	if !strings.Contains(string(out), "deletionTimestamp") {
		t.Fatalf("delete with finalizer did not set deletionTimestamp: %s", out)
	}
	mustDo(t, h, 200, "GET", seeds+"/s1", nil)
	mustDo(t, h, 200, "PATCH", seeds+"/s1", `{"metadata":{"finalizers":null}}`)
	mustDo(t, h, 404, "GET", seeds+"/s1", nil)
}

func TestWatchResumeExpiredThenRelist(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.WatchWindow = 5 })
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"w"}}`)
	const cms = "/api/v1/namespaces/w/configmaps"
	var first struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"c0"}}`), &first)
	for i := 1; i <= 20; i++ {
		mustDo(t, h, 201, "POST", cms, fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i))
	}
	code, body := h.Do(t, "GET", cms+"?watch=true&resourceVersion="+first.Metadata.ResourceVersion, nil)
	if code != 410 || decodeStatus(t, body).Reason != "Expired" {
		t.Fatalf("watch from a version no longer kept: want 410 Expired, got %d %s", code, body)
	}
	// Over gRPC the same is OUT_OF_RANGE carrying the Expired Status.
	gw, err := kcorev1.NewConfigMapServiceClient(h.GRPC(t)).Watch(context.Background(), &metav1.WatchRequest{Namespace: "w", ResourceVersion: first.Metadata.ResourceVersion})
	if err == nil {
		_, err = gw.Recv()
	}
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("gRPC watch from a version no longer kept: want OutOfRange, got %v", err)
	}
	// The client relists and watches from the list's version.
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []any `json:"items"`
	}
	_ = json.Unmarshal(mustDo(t, h, 200, "GET", cms, nil), &list)
	if len(list.Items) != 21 {
		t.Fatalf("relist: %d items, want 21", len(list.Items))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+cms+"?watch=1&resourceVersion="+list.Metadata.ResourceVersion, nil)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"after"}}`)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatalf("no watch event: %v", sc.Err())
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("watch event %q: %v", sc.Text(), err)
	}
	if ev.Type != "ADDED" || ev.Object.Metadata.Name != "after" || ev.Object.Kind != "ConfigMap" {
		t.Errorf("want ADDED ConfigMap after, got %s", sc.Text())
	}
}

func TestAuthenticationRequired(t *testing.T) {
	h := hubtest.Start(t)
	for _, token := range []string{"", "wrong"} {
		code, body := h.DoToken(t, token, "GET", "/api/v1/namespaces", nil)
		if code != 401 || decodeStatus(t, body).Reason != "Unauthorized" {
			t.Errorf("token %q: want 401 Unauthorized, got %d %s", token, code, body)
		}
	}
	if code, _ := h.DoToken(t, "", "GET", "/metrics", nil); code != 401 {
		t.Errorf("metrics without token: %d", code)
	}
	if code, _ := h.DoToken(t, "", "GET", "/readyz", nil); code != 200 {
		t.Errorf("readyz: %d", code)
	}
	if code, body := h.Do(t, "GET", "/metrics", nil); code != 200 || !strings.Contains(string(body), "trellis_http_requests_total") {
		t.Errorf("metrics: %d", code)
	}
	// gRPC without a token is refused too.
	conn := h.GRPC(t)
	_, err := corev1beta1.NewSeedServiceClient(conn).List(context.Background(), &metav1.ListRequest{})
	if err != nil {
		t.Fatalf("gRPC with token: %v", err)
	}
}

func TestGRPCSDK(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)
	ctx := context.Background()
	c := corev1beta1.NewShootServiceClient(h.GRPC(t))
	region, ver := "local", "1.35.4"
	s := &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Name: "sdk", Namespace: "garden-dev"},
		Spec: &corev1beta1.ShootSpec{
			CloudProfile: &corev1beta1.CloudProfileReference{Name: "local"}, Region: region,
			Kubernetes: &corev1beta1.Kubernetes{Version: ver}, Provider: &corev1beta1.Provider{Type: "local"},
		},
	}
	out, err := c.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if out.GetMetadata().GetGeneration() != 1 || out.GetKind() != "Shoot" {
		t.Errorf("created: %v", out.GetMetadata())
	}
	_, err = c.Create(ctx, s)
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("second create: want AlreadyExists, got %v", err)
	}
	_, err = c.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("get missing: want NotFound, got %v", err)
	}
	list, err := c.List(ctx, &metav1.ListRequest{Namespace: "garden-dev", FieldSelector: "metadata.name=sdk"})
	if err != nil || len(list.GetItems()) != 1 {
		t.Fatalf("list: %v %d", err, len(list.GetItems()))
	}
	// Watch over gRPC: the current state first, then changes, resumable from the list's resourceVersion.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stream, err := c.Watch(wctx, &metav1.WatchRequest{Namespace: "garden-dev", ResourceVersion: list.GetMetadata().GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "sdk", Patch: &metav1.RawExtension{Raw: []byte(`{"metadata":{"labels":{"w":"1"}}}`)}}); err != nil {
		t.Fatal(err)
	}
	// The controllers may modify the shoot too (its shoot.gardener.cloud/status label): the patch is the first
	// event carrying w=1, and no event before it is anything but MODIFIED.
	for {
		ev, err := stream.Recv()
		if err != nil || ev.GetType() != "MODIFIED" {
			t.Fatalf("gRPC watch event: %v %v", ev, err)
		}
		if ev.GetObject().GetMetadata().GetLabels()["w"] == "1" {
			break
		}
	}
}

func TestDiscoveryAndYAML(t *testing.T) {
	h := hubtest.Start(t)
	var groups struct {
		Groups []struct {
			Name             string `json:"name"`
			PreferredVersion struct {
				Version string `json:"version"`
			} `json:"preferredVersion"`
		} `json:"groups"`
	}
	_ = json.Unmarshal(mustDo(t, h, 200, "GET", "/apis", nil), &groups)
	preferred := map[string]string{}
	for _, g := range groups.Groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	if preferred["core.gardener.cloud"] != "v1beta1" || preferred["seedmanagement.gardener.cloud"] != "v1alpha1" {
		t.Errorf("groups: %v", preferred)
	}
	var res struct {
		Resources []struct {
			Name       string `json:"name"`
			Kind       string `json:"kind"`
			Namespaced bool   `json:"namespaced"`
		} `json:"resources"`
	}
	_ = json.Unmarshal(mustDo(t, h, 200, "GET", "/apis/core.gardener.cloud/v1beta1", nil), &res)
	found := false
	for _, r := range res.Resources {
		if r.Name == "shoots" && r.Kind == "Shoot" && r.Namespaced {
			found = true
		}
	}
	if !found {
		t.Errorf("shoots missing from discovery: %+v", res.Resources)
	}
	mustDo(t, h, 404, "GET", "/apis/nope.gardener.cloud/v1", nil)

	// YAML in and out.
	y := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: yaml-ns\n  labels:\n    a: b\n"
	if code, body := h.Do(t, "POST", "/api/v1/namespaces", y, "Content-Type", "application/yaml"); code != 201 {
		t.Fatalf("create from YAML: %d %s", code, body)
	}
	code, body := h.Do(t, "GET", "/api/v1/namespaces/yaml-ns", nil, "Accept", "application/yaml")
	if code != 200 || !strings.Contains(string(body), "name: yaml-ns") || !strings.Contains(string(body), "  labels:\n    a: b") {
		t.Errorf("get as YAML: %d %s", code, body)
	}
}

// TestGarbageCollection: over REST, as kubectl and curl send deletes, with the controller manager's garbage
// collector running. A dry run of an orphaning delete marks the object with the orphan finalizer; the
// preconditions of a DeleteOptions body hold; a plain delete takes the dependents along.
func TestGarbageCollection(t *testing.T) {
	h := hubtest.Start(t)
	const cms = "/api/v1/namespaces/gc/configmaps"
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"gc"}}`)
	var owner struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	if err := json.Unmarshal(mustDo(t, h, 201, "POST", cms, `{"metadata":{"name":"owner"}}`), &owner); err != nil {
		t.Fatal(err)
	}
	mustDo(t, h, 201, "POST", cms, fmt.Sprintf(`{"metadata":{"name":"dependent","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":%q}]}}`, owner.Metadata.UID))

	// A dry run of an orphaning delete answers the object marked with the orphan finalizer and changes nothing.
	if out := mustDo(t, h, 200, "DELETE", cms+"/owner?dryRun=All", `{"propagationPolicy":"Orphan"}`); !strings.Contains(string(out), `"finalizers":["orphan"]`) {
		t.Errorf("dry run of an orphaning delete: %s", out)
	}
	// 422, as kube-apiserver answers invalid DeleteOptions.
	if out := mustDo(t, h, 422, "DELETE", cms+"/owner?propagationPolicy=Sideways", nil); !strings.Contains(string(out), `Unsupported value: \"Sideways\"`) {
		t.Errorf("an unknown propagationPolicy: %s", out)
	}
	mustDo(t, h, 409, "DELETE", cms+"/owner", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-the-owners"}}`)
	mustDo(t, h, 200, "GET", cms+"/owner", nil)

	mustDo(t, h, 200, "DELETE", cms+"/owner", fmt.Sprintf(`{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background","preconditions":{"uid":%q}}`, owner.Metadata.UID))
	deleted := time.Now()
	deadline := deleted.Add(30 * time.Second)
	for {
		code, out := h.Do(t, "GET", cms+"/dependent", nil)
		if code == 404 {
			t.Logf("the dependent was gone %s after its owner's delete returned", time.Since(deleted).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dependent of a deleted owner is still there: %d %s", code, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGRPCWriteWithoutJSONFormIsInvalid: a gRPC request can carry what no JSON request can, a RawExtension whose bytes
// are not JSON or a Timestamp outside years 1 to 9999. Such a write is refused as invalid at the field, and what is
// stored stays as it was (no REST client could read the object otherwise).
func TestGRPCWriteWithoutJSONFormIsInvalid(t *testing.T) {
	h := quietHub(t) // nothing else writes the shoot
	garden(t, h)
	ctx := context.Background()
	c := corev1beta1.NewShootServiceClient(h.GRPC(t))
	notJSON := &metav1.RawExtension{Raw: []byte(`{"a":1} junk`)}
	s := &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Name: "raw", Namespace: "garden-dev"},
		Spec: &corev1beta1.ShootSpec{
			CloudProfile: &corev1beta1.CloudProfileReference{Name: "local"}, Region: "local",
			Kubernetes: &corev1beta1.Kubernetes{Version: "1.35.4"},
			Provider:   &corev1beta1.Provider{Type: "local", InfrastructureConfig: notJSON},
		},
	}
	wantInvalid := func(what string, err error, field string) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), field+": Invalid value: ") {
			t.Errorf("%s: want InvalidArgument at %s, got %v", what, field, err)
		}
	}
	_, err := c.Create(ctx, s)
	wantInvalid("create", err, "spec.provider.infrastructureConfig")
	if code, body := h.Do(t, "GET", shoots+"/raw", nil); code != http.StatusNotFound {
		t.Fatalf("after the refused create: %d %s", code, body)
	}

	s.Spec.Provider.InfrastructureConfig = &metav1.RawExtension{Raw: []byte(`{"kind":"InfrastructureConfig"}`)}
	if _, err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	current := func() *corev1beta1.Shoot {
		t.Helper()
		cur, err := c.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "raw"})
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	cur := current()
	cur.Spec.Provider.ControlPlaneConfig = notJSON
	_, err = c.Update(ctx, cur)
	wantInvalid("update", err, "spec.provider.controlPlaneConfig")
	cur = current()
	cur.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{
		Type: "Create", State: "Processing", LastUpdateTime: &timestamppb.Timestamp{Seconds: 1 << 40},
	}}
	_, err = c.UpdateStatus(ctx, cur)
	wantInvalid("status update", err, "status.lastOperation.lastUpdateTime")

	code, body := h.Do(t, "GET", shoots+"/raw", nil)
	if code != http.StatusOK {
		t.Fatalf("get: %d %s", code, body)
	}
	var got struct {
		Spec struct {
			Provider struct{ ControlPlaneConfig json.RawMessage } `json:"provider"`
		} `json:"spec"`
		Status struct {
			LastOperation json.RawMessage `json:"lastOperation"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Provider.ControlPlaneConfig != nil || got.Status.LastOperation != nil {
		t.Errorf("the refused writes changed the shoot: %s", body)
	}
}

// TestUnconditionalUpdates: an update without metadata.resourceVersion applies to the current object for the kinds
// whose Kubernetes or Gardener strategy allows it (a CloudProfile, a ConfigMap) and is refused for the others (a
// Shoot), as in kube-apiserver and gardener-apiserver.
func TestUnconditionalUpdates(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)
	mustDo(t, h, 201, "POST", shoots, shoot("uncond", "garden-dev", "1.35.4"))
	mustDo(t, h, 201, "POST", "/api/v1/namespaces/garden-dev/configmaps", `{"metadata":{"name":"uncond"},"data":{"a":"1"}}`)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/apis/core.gardener.cloud/v1beta1/cloudprofiles/local", http.StatusOK},
		{"/api/v1/namespaces/garden-dev/configmaps/uncond", http.StatusOK},
		{shoots + "/uncond", http.StatusUnprocessableEntity},
	} {
		code, body := h.Do(t, "GET", c.path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", c.path, code, body)
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatal(err)
		}
		md := obj["metadata"].(map[string]any)
		rv := md["resourceVersion"]
		delete(md, "resourceVersion")
		md["labels"] = map[string]any{"updated": "unconditionally"}
		code, body = h.Do(t, "PUT", c.path, obj)
		if code != c.want {
			t.Errorf("PUT %s without resourceVersion: %d %s, want %d", c.path, code, body, c.want)
			continue
		}
		if code != http.StatusOK {
			if !strings.Contains(string(body), `shoots.core.gardener.cloud \"uncond\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`) {
				t.Errorf("PUT %s without resourceVersion: %s", c.path, body)
			}
			continue
		}
		var out struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		if out.Metadata.Labels["updated"] != "unconditionally" || out.Metadata.ResourceVersion == "" || out.Metadata.ResourceVersion == rv {
			t.Errorf("PUT %s without resourceVersion answered %s", c.path, body)
		}
	}
}

// TestTooLargeWithManagedFieldsIsWrittenWithout: a ConfigMap whose managedFields (one entry per data key) make it
// larger than etcd takes is created, replaced and patched without them, as kube-apiserver retries such writes; the
// client's data is all stored.
func TestTooLargeWithManagedFieldsIsWrittenWithout(t *testing.T) {
	h := hubtest.Start(t)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"big"}}`)
	// 15,000 keys of 60 bytes: about 1 MB of data, and about as much again in managedFields' fieldsV1; etcd takes
	// 1.5 MiB per request.
	data := map[string]string{}
	for i := range 15000 {
		data[fmt.Sprintf("k%059d", i)] = ""
	}
	path := "/api/v1/namespaces/big/configmaps"
	check := func(what string, body []byte, keys int) map[string]any {
		t.Helper()
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if mf := obj["metadata"].(map[string]any)["managedFields"]; mf != nil {
			t.Fatalf("%s: managedFields kept: %.200v", what, mf)
		}
		if got := len(obj["data"].(map[string]any)); got != keys {
			t.Fatalf("%s: %d keys stored, want %d", what, got, keys)
		}
		return obj
	}
	check("create", mustDo(t, h, 201, "POST", path, map[string]any{"metadata": map[string]any{"name": "cm"}, "data": data}), 15000)
	got := check("get", mustDo(t, h, 200, "GET", path+"/cm", nil), 15000)
	got["data"].(map[string]any)["added"] = "by update"
	check("update", mustDo(t, h, 200, "PUT", path+"/cm", got), 15001)
	check("patch", mustDo(t, h, 200, "PATCH", path+"/cm", `{"data":{"patched":"yes"}}`), 15002)
	// A small object keeps its managedFields.
	small := mustDo(t, h, 201, "POST", path, `{"metadata":{"name":"small"},"data":{"a":"1"}}`)
	if !strings.Contains(string(small), `"managedFields"`) {
		t.Fatalf("a small ConfigMap lost its managedFields: %s", small)
	}
}

// TestTooLargeObjectIsRefusedAs413: an object larger than etcd takes even without managedFields is refused with 413
// and etcd's reason, not a bare internal error, and nothing is stored.
func TestTooLargeObjectIsRefusedAs413(t *testing.T) {
	h := hubtest.Start(t)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"big"}}`)
	path := "/apis/core.gardener.cloud/v1beta1/namespaces/big/shootstates"
	body := map[string]any{"metadata": map[string]any{"name": "s"}, "spec": map[string]any{
		"gardener": []any{map[string]any{"name": "blob", "type": "secret", "data": map[string]any{"raw": strings.Repeat("x", 2<<20)}}}}}
	code, out := h.Do(t, "POST", path, body)
	st := decodeStatus(t, out)
	if code != http.StatusRequestEntityTooLarge || st.Reason != "RequestEntityTooLarge" || !strings.Contains(st.Message, "request is too large") {
		t.Fatalf("POST of a 2 MiB ShootState: %d %s, want 413 RequestEntityTooLarge naming etcd's reason", code, out)
	}
	mustDo(t, h, 404, "GET", path+"/s", nil)
}
