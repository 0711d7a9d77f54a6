package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// auditedHub starts a hub whose audit log, under policy, is written to the returned file.
func auditedHub(t *testing.T, policy string) (*hubtest.Hub, string) {
	t.Helper()
	dir := t.TempDir()
	policyFile, logFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hubtest.Start(t, func(c *hub.Config) {
		c.Audit.PolicyFile, c.Audit.LogPath = policyFile, logFile
	})
	return h, logFile
}

// auditEvents reads the audit log's events (written synchronously: complete when the response was received).
func auditEvents(t *testing.T, file string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// eventsOf returns the events of one request id.
func eventsOf(evs []auditv1.Event, id string) []auditv1.Event {
	var out []auditv1.Event
	for _, ev := range evs {
		if string(ev.AuditID) == id {
			out = append(out, ev)
		}
	}
	return out
}

const requestResponsePolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
`

func TestAuditCreateOverREST(t *testing.T) {
	h, logFile := auditedHub(t, requestResponsePolicy)
	const id = "3f0c6c1e-8f55-4f43-9b8f-0b3a3e6e7d10"
	code, out := h.Do(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"audited"}}`, api.RequestIDHeader, id)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	evs := eventsOf(auditEvents(t, logFile), id)
	if len(evs) != 2 || evs[0].Stage != auditv1.StageRequestReceived || evs[1].Stage != auditv1.StageResponseComplete {
		t.Fatalf("want RequestReceived and ResponseComplete for %s, got %+v", id, evs)
	}
	ev := evs[1]
	if ev.User.Username != auth.AdminUser || !slices.Contains(ev.User.Groups, auth.GroupAdmins) {
		t.Errorf("user: %+v", ev.User)
	}
	if ev.Verb != "create" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "namespaces" || ev.ObjectRef.Name != "audited" {
		t.Errorf("verb %q, objectRef %+v", ev.Verb, ev.ObjectRef)
	}
	if ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusCreated {
		t.Errorf("response status %+v, want 201", ev.ResponseStatus)
	}
	if ev.Level != auditv1.LevelRequestResponse || ev.RequestObject == nil || !strings.Contains(string(ev.RequestObject.Raw), `"audited"`) {
		t.Errorf("level %s, request object %v", ev.Level, ev.RequestObject)
	}
	if ev.RequestURI != "/api/v1/namespaces" || len(ev.SourceIPs) != 1 || ev.SourceIPs[0] != "127.0.0.1" {
		t.Errorf("requestURI %q, sourceIPs %v", ev.RequestURI, ev.SourceIPs)
	}

	// A watch has ResponseStarted when it starts and ResponseComplete when it ends.
	if code, out := h.Do(t, "GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1", nil, api.RequestIDHeader, "watch-1"); code != http.StatusOK {
		t.Fatalf("watch: %d %s", code, out)
	}
	var stages []auditv1.Stage
	for _, ev := range eventsOf(auditEvents(t, logFile), "watch-1") {
		if ev.Verb != "watch" {
			t.Errorf("watch event with verb %q", ev.Verb)
		}
		stages = append(stages, ev.Stage)
	}
	if !slices.Equal(stages, []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete}) {
		t.Errorf("watch stages %v", stages)
	}

	// A refused request is audited too, with its code and the user it was refused to.
	userToken := h.UserToken(t, "mallory")
	code, _ = h.DoToken(t, userToken, "DELETE", "/api/v1/namespaces/audited", nil, api.RequestIDHeader, "refused-1")
	refused := eventsOf(auditEvents(t, logFile), "refused-1")
	if code != http.StatusForbidden || len(refused) != 2 || refused[1].User.Username != "mallory" || refused[1].ResponseStatus.Code != http.StatusForbidden ||
		refused[1].Verb != "delete" || refused[1].ObjectRef == nil || refused[1].ObjectRef.Name != "audited" {
		t.Errorf("refused delete (%d): %+v", code, refused)
	}
}

// TestAuditSecretsWithoutData: whatever the policy, secrets are logged at Metadata: no request or response body,
// over REST and gRPC alike.
func TestAuditSecretsWithoutData(t *testing.T) {
	h, logFile := auditedHub(t, requestResponsePolicy)
	h.Do(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"vault"}}`)
	h.WaitNamespace(t, "vault")
	const secretValue = "c2VjcmV0LXZhbHVlLW5ldmVyLWxvZ2dlZA==" // base64 of "secret-value-never-logged"
	code, out := h.Do(t, "POST", "/api/v1/namespaces/vault/secrets", `{"metadata":{"name":"s"},"data":{"password":"`+secretValue+`"}}`, api.RequestIDHeader, "secret-create")
	if code != http.StatusCreated {
		t.Fatalf("create secret: %d %s", code, out)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), strings.ToLower(api.RequestIDHeader), "secret-read")
	if _, err := kcorev1.NewSecretServiceClient(h.GRPC(t)).Get(ctx, &metav1.GetRequest{Namespace: "vault", Name: "s"}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secretValue) || strings.Contains(string(raw), "secret-value-never-logged") {
		t.Fatal("the audit log holds the secret's data")
	}
	evs := auditEvents(t, logFile)
	for _, id := range []string{"secret-create", "secret-read"} {
		got := eventsOf(evs, id)
		if len(got) != 2 {
			t.Fatalf("%s: want 2 events, got %+v", id, got)
		}
		ev := got[1]
		if ev.Level != auditv1.LevelMetadata || ev.RequestObject != nil || ev.ResponseObject != nil {
			t.Errorf("%s: level %s, request %v, response %v", id, ev.Level, ev.RequestObject, ev.ResponseObject)
		}
		if ev.ObjectRef == nil || ev.ObjectRef.Resource != "secrets" || ev.ObjectRef.Namespace != "vault" || ev.ObjectRef.Name != "s" {
			t.Errorf("%s: objectRef %+v", id, ev.ObjectRef)
		}
	}
	if read := eventsOf(evs, "secret-read")[1]; read.Verb != "get" || read.ResponseStatus.Code != http.StatusOK || read.User.Username != auth.AdminUser ||
		read.RequestURI != "/trellis.kubernetes.core.v1.SecretService/Get" {
		t.Errorf("gRPC read: verb %q, status %+v, user %q, uri %q", read.Verb, read.ResponseStatus, read.User.Username, read.RequestURI)
	}
}

// TestAuditPolicyLevels: the first matching rule decides, None drops the request, omitStages drops stages, and the
// levels below Request leave the bodies out.
func TestAuditPolicyLevels(t *testing.T) {
	h, logFile := auditedHub(t, `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
  resources: [{group: "", resources: ["namespaces"]}]
- level: Request
  verbs: ["create"]
- level: RequestResponse
`)
	h.Do(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"levels"}}`, api.RequestIDHeader, "ns")
	h.WaitNamespace(t, "levels")
	h.Do(t, "POST", "/api/v1/namespaces/levels/configmaps", `{"metadata":{"name":"c"}}`, api.RequestIDHeader, "cm")
	h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"lv"},"spec":{"namespace":"levels"}}`, api.RequestIDHeader, "project")
	ctx := metadata.AppendToOutgoingContext(context.Background(), strings.ToLower(api.RequestIDHeader), "list")
	if _, err := kcorev1.NewNamespaceServiceClient(h.GRPC(t)).List(ctx, &metav1.ListRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	evs := auditEvents(t, logFile)
	for _, ev := range evs {
		if ev.Stage == auditv1.StageRequestReceived {
			t.Fatalf("omitted stage logged: %+v", ev)
		}
	}
	if got := eventsOf(evs, "cm"); len(got) != 0 {
		t.Errorf("level None logged: %+v", got)
	}
	if got := eventsOf(evs, "ns"); len(got) != 1 || got[0].Level != auditv1.LevelMetadata || got[0].RequestObject != nil {
		t.Errorf("namespaces at Metadata: %+v", got)
	}
	if got := eventsOf(evs, "list"); len(got) != 1 || got[0].Level != auditv1.LevelMetadata || got[0].Verb != "list" || got[0].ResponseObject != nil {
		t.Errorf("namespaces list at Metadata: %+v", got)
	}
	if got := eventsOf(evs, "project"); len(got) != 1 || got[0].Level != auditv1.LevelRequest || got[0].RequestObject == nil ||
		!strings.Contains(string(got[0].RequestObject.Raw), `"lv"`) || got[0].ResponseObject != nil {
		t.Errorf("project create at Request: %+v", got)
	}
}
