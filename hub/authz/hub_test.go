package authz_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

const shootsPath = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots"

// clientCert issues a client certificate with the hub's CA, as the bootstrap exchange would.
func clientCert(t *testing.T, h *hubtest.Hub, o []string, cn string) tls.Certificate {
	return h.ClientCert(t, cn, o...)
}

func tlsConfig(h *hubtest.Hub, cert *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	cfg := &tls.Config{RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

func grpcConn(t *testing.T, h *hubtest.Hub, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(h.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig(h, cert))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func httpClient(h *hubtest.Hub, cert *tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(h, cert), ForceAttemptHTTP2: true}, Timeout: 30 * time.Second}
}

// do sends a REST request with c and token ("" for none).
func do(t *testing.T, h *hubtest.Hub, c *http.Client, token, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch {
	case method == http.MethodPatch:
		req.Header.Set("Content-Type", "application/merge-patch+json")
	case body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func mustAdmin(t *testing.T, h *hubtest.Hub, want int, method, path, body string) []byte {
	t.Helper()
	code, out := do(t, h, h.HTTP, h.Token, method, path, body)
	if code != want {
		t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, code, out)
	}
	return out
}

func shootJSON(name, seed string) string {
	return fmt.Sprintf(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":%q,"namespace":"garden-dev"},
		"spec":{"cloudProfile":{"name":"local"},"credentialsBindingName":"local","region":"local","kubernetes":{"version":"1.35.4"},"seedName":%q,
		"provider":{"type":"local","workers":[{"name":"w1","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]},
		"networking":{"type":"calico","nodes":"10.0.0.0/16"}}}`, name, seed)
}

// seedJSON is a Seed with backup (what a control-plane migration needs).
func seedJSON(name string) string {
	return fmt.Sprintf(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":%q},"spec":{
		"provider":{"type":"local","region":"local"},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{},
		"backup":{"provider":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"backup","namespace":"garden"}}}}`, name)
}

// garden sets up seeds a and b and a project with shoots s-a on seed a and s-b on seed b.
func garden(t *testing.T, h *hubtest.Hub) {
	t.Helper()
	mustAdmin(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", seedJSON("a"))
	mustAdmin(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", seedJSON("b"))
	mustAdmin(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"garden-dev"}}`)
	mustAdmin(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`)
	mustAdmin(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"local"},"spec":{"type":"local",
		"kubernetes":{"versions":[{"version":"1.35.4"}]},
		"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],
		"machineTypes":[{"name":"m5.large","cpu":"2","gpu":"0","memory":"8Gi"}],
		"regions":[{"name":"local"}]}}`)
	mustAdmin(t, h, 201, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings",
		`{"metadata":{"name":"local"},"provider":{"type":"local"},"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"local","namespace":"garden-dev"}}`)
	mustAdmin(t, h, 201, "POST", shootsPath, shootJSON("s-a", "a"))
	mustAdmin(t, h, 201, "POST", shootsPath, shootJSON("s-b", "b"))
}

func names(list *corev1beta1.ShootList) []string {
	var out []string
	for _, s := range list.GetItems() {
		out = append(out, s.GetMetadata().GetName())
	}
	return out
}

func wantCode(t *testing.T, what string, err error, code codes.Code, contains ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: want %s, got %v", what, code, err)
		return
	}
	for _, c := range contains {
		if !strings.Contains(status.Convert(err).Message(), c) {
			t.Errorf("%s: want a message containing %q, got %q", what, c, status.Convert(err).Message())
		}
	}
}

// TestSeedAgentAccess runs seed a's agent against a real hub: it sees and writes its shoots only, over gRPC and REST.
func TestSeedAgentAccess(t *testing.T) {
	// Their writes would show in the watch: the status label, and the maintenance of a shoot whose window is open.
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-statuslabel", "shoot-maintenance"))
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	garden(t, h)
	certA := clientCert(t, h, []string{auth.SeedsGroup}, "gardener.cloud:system:seed:a")
	shoots := corev1beta1.NewShootServiceClient(grpcConn(t, h, &certA))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The watch starts first, so it sees the initial state and then the changes below.
	watch, err := shoots.Watch(ctx, &metav1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}

	forbidden := `User "gardener.cloud:system:seed:a" cannot get resource "shoots" in API group "core.gardener.cloud" in the namespace "garden-dev": object does not belong to seed "a"`
	_, err = shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-b"})
	wantCode(t, "get other seed's shoot", err, codes.PermissionDenied, `shoots.core.gardener.cloud "s-b" is forbidden: `+forbidden)
	_, err = shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "nope"})
	wantCode(t, "get a shoot that does not exist", err, codes.PermissionDenied, "is forbidden")
	own, err := shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatalf("get own shoot: %v", err)
	}

	// Writes to seed b's shoot.
	adminShoots := corev1beta1.NewShootServiceClient(h.GRPC(t))
	theirs, err := adminShoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-b"})
	if err != nil {
		t.Fatal(err)
	}
	theirs.Metadata.Labels = map[string]string{"touched": "true"}
	_, err = shoots.Update(ctx, theirs)
	wantCode(t, "update other seed's shoot", err, codes.PermissionDenied, `cannot update resource "shoots"`, `object does not belong to seed "a"`)
	theirs.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--dev--s-b"}
	_, err = shoots.UpdateStatus(ctx, theirs)
	wantCode(t, "update status of other seed's shoot", err, codes.PermissionDenied, `cannot update resource "shoots/status"`)
	_, err = shoots.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "s-b", Subresource: "status", PatchType: "application/merge-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`{"status":{"technicalID":"x"}}`)}})
	wantCode(t, "patch status of other seed's shoot", err, codes.PermissionDenied, `cannot patch resource "shoots/status"`)
	_, err = shoots.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "s-b"})
	wantCode(t, "delete other seed's shoot", err, codes.PermissionDenied)

	// Writes to its own shoot: status yes, delete and create no.
	own.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--dev--s-a"}
	updateShootStatus(ctx, t, shoots, own)
	if _, err := shoots.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "s-a", Subresource: "status", PatchType: "application/merge-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`{"status":{"hibernated":false,"observedGeneration":1}}`)}}); err != nil {
		t.Errorf("patch status of own shoot: %v", err)
	}
	_, err = shoots.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "s-a"})
	wantCode(t, "delete own shoot", err, codes.PermissionDenied, "seed agents may not delete")

	// Lists show seed a's shoots only.
	for _, ns := range []string{"", "garden-dev"} {
		list, err := shoots.List(ctx, &metav1.ListRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(list); !slices.Equal(got, []string{"s-a"}) {
			t.Errorf("list in %q: want [s-a], got %v", ns, got)
		}
	}

	// Changes to seed b's shoots never reach the watch; a new shoot of seed a does.
	mustAdmin(t, h, 201, "POST", shootsPath, shootJSON("s-d", "b"))
	mustAdmin(t, h, 200, "PATCH", shootsPath+"/s-b", `{"metadata":{"labels":{"x":"y"}}}`)
	mustAdmin(t, h, 201, "POST", shootsPath, shootJSON("s-c", "a"))
	var seen []string
	for len(seen) < 4 {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch after %v: %v", seen, err)
		}
		seen = append(seen, ev.GetType()+" "+ev.GetObject().GetMetadata().GetName())
	}
	// s-a: ADDED, then its two status writes; then s-c.
	if want := []string{"ADDED s-a", "MODIFIED s-a", "MODIFIED s-a", "ADDED s-c"}; !slices.Equal(seen, want) {
		t.Errorf("watch: want %v, got %v", want, seen)
	}

	// REST, with the same certificate.
	c := httpClient(h, &certA)
	code, body := do(t, h, c, "", "GET", shootsPath+"/s-b", "")
	var st struct {
		Reason, Message string
		Code            int
	}
	if err := json.Unmarshal(body, &st); err != nil || code != 403 || st.Reason != "Forbidden" || st.Code != 403 ||
		st.Message != `shoots.core.gardener.cloud "s-b" is forbidden: `+forbidden {
		t.Errorf("REST get other seed's shoot: want 403 Forbidden, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "PATCH", shootsPath+"/s-b/status", `{"status":{"technicalID":"x"}}`); code != 403 {
		t.Errorf("REST patch status of other seed's shoot: want 403, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "GET", shootsPath+"/s-a", ""); code != 200 {
		t.Errorf("REST get own shoot: want 200, got %d %s", code, body)
	}
	code, body = do(t, h, c, "", "GET", "/apis/core.gardener.cloud/v1beta1/shoots", "")
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal(body, &list); err != nil || code != 200 {
		t.Fatalf("REST list: %d %s", code, body)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.Metadata.Name)
	}
	if !slices.Equal(got, []string{"s-a", "s-c"}) {
		t.Errorf("REST list: want [s-a s-c], got %v", got)
	}
	code, body = do(t, h, c, "", "GET", shootsPath+"?watch=true&timeoutSeconds=1", "")
	if code != 200 {
		t.Fatalf("REST watch: %d %s", code, body)
	}
	got = nil
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type   string
			Object struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("watch line %s: %v", sc.Bytes(), err)
		}
		got = append(got, ev.Type+" "+ev.Object.Metadata.Name)
	}
	if want := []string{"ADDED s-a", "ADDED s-c"}; !slices.Equal(got, want) {
		t.Errorf("REST watch: want %v, got %v", want, got)
	}
	if code, body := do(t, h, c, "", "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/quotas", ""); code != 403 {
		t.Errorf("REST list quotas: want 403, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "GET", "/apis", ""); code != 200 {
		t.Errorf("discovery: want 200, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "GET", "/metrics", ""); code != 403 {
		t.Errorf("metrics: want 403, got %d %s", code, body)
	}

	// Its own Lease: created, read and updated; another seed's: no.
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"namespace":"gardener-system-seed-lease"},"spec":{"holderIdentity":%q}}`
	leases := "/apis/coordination.k8s.io/v1/namespaces/gardener-system-seed-lease/leases"
	if code, body := do(t, h, c, "", "GET", leases+"/a", ""); code != 404 {
		t.Errorf("get own lease before it exists: want 404, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "POST", leases, fmt.Sprintf(lease, "a", "a")); code != 201 {
		t.Errorf("create own lease: want 201, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "PATCH", leases+"/a", `{"spec":{"leaseDurationSeconds":2}}`); code != 200 {
		t.Errorf("patch own lease: want 200, got %d %s", code, body)
	}
	if code, body := do(t, h, c, "", "POST", leases, fmt.Sprintf(lease, "b", "b")); code != 403 {
		t.Errorf("create other seed's lease: want 403, got %d %s", code, body)
	}
}

func TestBootstrapTokenAccess(t *testing.T) {
	h := hubtest.Start(t)
	// The hub creates kube-system; tolerate a hub that does not (yet).
	if code, body := do(t, h, h.HTTP, h.Token, "POST", "/api/v1/namespaces", `{"metadata":{"name":"kube-system"}}`); code != 201 && code != 409 {
		t.Fatalf("create kube-system: %d %s", code, body)
	}
	mustAdmin(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"garden-dev"}}`)
	createToken := func(expiration time.Time) auth.BootstrapToken {
		tok, err := auth.NewSeedBootstrapToken("a", expiration)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
			"metadata":   map[string]string{"name": auth.BootstrapTokenSecretName(tok.ID), "namespace": "kube-system"},
			"stringData": secretData(tok),
		})
		if err != nil {
			t.Fatal(err)
		}
		mustAdmin(t, h, 201, "POST", "/api/v1/namespaces/kube-system/secrets", string(body))
		return tok
	}
	tok := createToken(time.Now().Add(time.Hour))
	expired := createToken(time.Now().Add(-time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	shoots := corev1beta1.NewShootServiceClient(grpcConn(t, h, nil))
	_, err := shoots.List(hubtest.WithToken(ctx, tok.Token()), &metav1.ListRequest{Namespace: "garden-dev"})
	wantCode(t, "gRPC list with a bootstrap token", err, codes.PermissionDenied,
		fmt.Sprintf(`User "system:bootstrap:%s" cannot /trellis.core.v1beta1.ShootService/List`, tok.ID), "bootstrap exchange")
	_, err = shoots.List(hubtest.WithToken(ctx, expired.Token()), &metav1.ListRequest{Namespace: "garden-dev"})
	wantCode(t, "gRPC list with an expired bootstrap token", err, codes.Unauthenticated, fmt.Sprintf("bootstrap token %s expired at", expired.ID))

	for _, path := range []string{shootsPath, "/api/v1/namespaces/kube-system/secrets", "/apis", "/metrics"} {
		code, body := do(t, h, h.HTTP, tok.Token(), "GET", path, "")
		if code != 403 || !strings.Contains(string(body), "system:bootstrap:"+tok.ID) {
			t.Errorf("REST GET %s with a bootstrap token: want 403 naming the user, got %d %s", path, code, body)
		}
	}
	if code, body := do(t, h, h.HTTP, expired.Token(), "GET", shootsPath, ""); code != 401 || !strings.Contains(string(body), "expired at") {
		t.Errorf("REST with an expired bootstrap token: want 401 saying it expired, got %d %s", code, body)
	}
	if code, body := do(t, h, h.HTTP, tok.ID+".0000000000000000", "GET", shootsPath, ""); code != 401 {
		t.Errorf("REST with a wrong bootstrap token secret: want 401, got %d %s", code, body)
	}

	// A client certificate that is not a seed's authenticates nobody; a token next to it still does.
	bad := clientCert(t, h, []string{"system:masters"}, "gardener.cloud:system:seed:a")
	_, err = corev1beta1.NewShootServiceClient(grpcConn(t, h, &bad)).List(ctx, &metav1.ListRequest{Namespace: "garden-dev"})
	wantCode(t, "gRPC with a non-seed certificate", err, codes.Unauthenticated, "is not a seed client certificate")
	if code, body := do(t, h, httpClient(h, &bad), "", "GET", shootsPath, ""); code != 401 {
		t.Errorf("REST with a non-seed certificate: want 401, got %d %s", code, body)
	}
	if code, body := do(t, h, httpClient(h, &bad), h.Token, "GET", shootsPath, ""); code != 200 {
		t.Errorf("REST with a non-seed certificate and the admin token: want 200, got %d %s", code, body)
	}
}

func secretData(tok auth.BootstrapToken) map[string]string {
	out := map[string]string{}
	for k, v := range tok.SecretObject().GetData() {
		out[k] = string(v)
	}
	return out
}
