package kubeconfig_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/kubeconfig"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/tunnel"
	authenticationv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/authentication/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

const (
	shootsPath = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/"
	adminPath  = shootsPath + "local/adminkubeconfig"
	viewerPath = shootsPath + "local/viewerkubeconfig"
)

// env is a hub with project dev (owner olivia, admin adam, viewer vic; nora is no member) and shoot local, scheduled
// to seed-1, whose kube-apiserver a TLS server stands in for: it serves the name the tunnel gives the shoot with a
// certificate of the shoot's cluster CA, requires client certificates of the shoot's client CAs and answers who
// asked. Its clock may be moved (skew) to see expired certificates refused.
type env struct {
	h                          *hubtest.Hub
	olivia, adam, vic, nora    string
	clusterCA, clientCA, oldCA hubtest.CA
	apiserver                  *httptest.Server
	skew                       time.Duration
	shoots                     *store.Collection
	dir                        string
	log                        syncBuffer
}

// syncBuffer is a buffer the hub's log goroutines write to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(t *testing.T) *env {
	t.Helper()
	e := &env{clusterCA: hubtest.NewCA(t, "ca-cluster", false), clientCA: hubtest.NewCA(t, "ca-client", true), oldCA: hubtest.NewCA(t, "ca-client-old", false)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(e.dir, "policy.yaml"), []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.h = hubtest.Start(t, func(c *hub.Config) {
		c.Controllers, c.DisableScheduler = []string{"project", "shoot-addresses"}, true
		c.TunnelAdvertiseAddress = lis.Addr().String()
		c.ShootKubeconfigMaxExpiration = 2 * time.Hour
		// Everything audited with its bodies, and the hub's log kept: neither may show a private key.
		c.Audit.PolicyFile, c.Audit.LogPath = filepath.Join(e.dir, "policy.yaml"), filepath.Join(e.dir, "audit.log")
		c.Logger = slog.New(slog.NewTextHandler(&e.log, nil))
	})
	clients := x509.NewCertPool()
	clients.AddCert(e.clientCA.Cert)
	clients.AddCert(e.oldCA.Cert)
	e.apiserver = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		_ = json.NewEncoder(w).Encode(map[string]any{"user": c.Subject.CommonName, "groups": c.Subject.Organization})
	}))
	e.apiserver.Listener.Close()
	e.apiserver.Listener = lis
	e.apiserver.TLS = &tls.Config{
		Certificates: []tls.Certificate{e.clusterCA.ServingCert(t, tunnel.ShootServerName("local", "dev", tunnel.DefaultDomain))},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: clients,
		Time: func() time.Time { return time.Now().Add(e.skew) },
	}
	e.apiserver.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.apiserver.StartTLS()
	t.Cleanup(e.apiserver.Close)

	e.olivia, e.adam, e.vic, e.nora = e.h.UserToken(t, "olivia"), e.h.UserToken(t, "adam"), e.h.UserToken(t, "vic"), e.h.UserToken(t, "nora")
	must(t, e.h, e.olivia, 201, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev","members":[
		{"kind":"User","name":"adam","role":"admin"},{"kind":"User","name":"vic","role":"viewer"}]}}`)
	e.h.WaitNamespace(t, "garden-dev")
	e.shoots = collection(t, e.h, "core.gardener.cloud", "shoots")
	ctx := context.Background()
	for _, s := range []*corev1beta1.Shoot{
		{Metadata: &metav1.ObjectMeta{Name: "local", Namespace: "garden-dev"}, Spec: &corev1beta1.ShootSpec{SeedName: proto.String("seed-1")}},
		{Metadata: &metav1.ObjectMeta{Name: "unscheduled", Namespace: "garden-dev"}, Spec: &corev1beta1.ShootSpec{}},
		{Metadata: &metav1.ObjectMeta{Name: "fresh", Namespace: "garden-dev"}, Spec: &corev1beta1.ShootSpec{SeedName: proto.String("seed-1")}},
	} {
		if _, err := e.shoots.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// What the seed's agent publishes: for local the client CA (the old one trusted too) and the cluster CA, for
	// fresh the cluster CA only.
	e.h.PublishShootCAs(t, "garden-dev", "local", e.clusterCA, &e.clientCA, e.oldCA)
	e.h.PublishShootCAs(t, "garden-dev", "fresh", e.clusterCA, nil)
	return e
}

func collection(t *testing.T, h *hubtest.Hub, group, resource string) *store.Collection {
	t.Helper()
	c, ok := h.Registry().Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		t.Fatalf("no collection %s", resource)
	}
	return c
}

func must(t *testing.T, h *hubtest.Hub, token string, want int, method, path, body string, contains ...string) []byte {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	code, out := h.DoToken(t, token, method, path, b)
	if code != want {
		t.Fatalf("%s %s: want %d, got %d %s", method, path, want, code, out)
	}
	for _, c := range contains {
		if !strings.Contains(string(out), c) {
			t.Errorf("%s %s: want a body containing %q, got %s", method, path, c, out)
		}
	}
	return out
}

// answer is a kubeconfig request's answer over REST.
type answer struct {
	APIVersion, Kind string
	Metadata         struct{ Name, Namespace string }
	Status           struct {
		Kubeconfig          []byte
		ExpirationTimestamp time.Time
	}
}

// issued is a parsed kubeconfig and its client certificate.
type issued struct {
	rest *rest.Config
	cert *x509.Certificate
	exp  time.Time
}

func parse(t *testing.T, e *env, raw []byte) issued {
	t.Helper()
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	if a.APIVersion != kubeconfig.APIVersion || a.Metadata.Name != "local" || a.Metadata.Namespace != "garden-dev" {
		t.Errorf("answer's type and metadata: %+v", a)
	}
	cfg, err := clientcmd.Load(a.Status.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, a.Status.Kubeconfig)
	}
	const name = "garden-dev--local-external"
	cl, ctx := cfg.Clusters[name], cfg.Contexts[name]
	if cfg.CurrentContext != name || cl == nil || ctx == nil || ctx.Cluster != name || len(cfg.Clusters) != 1 {
		t.Fatalf("kubeconfig: want one cluster and context %s, got\n%s", name, a.Status.Kubeconfig)
	}
	if cl.Server != "https://"+e.apiserver.Listener.Addr().String() || cl.TLSServerName != "api.local.dev."+tunnel.DefaultDomain ||
		string(cl.CertificateAuthorityData) != string(e.clusterCA.CertPEM) {
		t.Errorf("cluster: server %q, tls-server-name %q, CA %q", cl.Server, cl.TLSServerName, cl.CertificateAuthorityData)
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil {
		t.Fatal("no user")
	}
	block, _ := pem.Decode(user.ClientCertificateData)
	if block == nil {
		t.Fatal("no client certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(e.clientCA.Cert); err != nil {
		t.Errorf("client certificate not signed by the shoot's client CA: %v", err)
	}
	if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("client key is a %T, want ECDSA", cert.PublicKey)
	}
	if !cert.NotAfter.Equal(a.Status.ExpirationTimestamp) {
		t.Errorf("status.expirationTimestamp %s, certificate's NotAfter %s", a.Status.ExpirationTimestamp, cert.NotAfter)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(a.Status.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return issued{rest: rc, cert: cert, exp: a.Status.ExpirationTimestamp}
}

// whoami asks the stand-in kube-apiserver with the kubeconfig's credentials; "" and the error when it refuses.
func whoami(t *testing.T, k issued) (string, error) {
	t.Helper()
	c, err := rest.HTTPClientFor(k.rest)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 10 * time.Second
	defer c.CloseIdleConnections()
	resp, err := c.Get(k.rest.Host + "/version")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var who struct {
		User   string
		Groups []string
	}
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		t.Fatal(err)
	}
	return who.User + "/" + strings.Join(who.Groups, ","), nil
}

func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -5*time.Second && d < 5*time.Second
}

// TestKubeconfigs: project owners and admins get admin kubeconfigs, viewers viewer ones, non-members neither; the
// kubeconfigs reach the shoot's kube-apiserver at the tunnel's address with the right identity until they expire.
func TestKubeconfigs(t *testing.T) {
	e := start(t)

	t.Run("issued", func(t *testing.T) {
		before := time.Now()
		k := parse(t, e, must(t, e.h, e.adam, 201, "POST", adminPath, `{"apiVersion":"authentication.gardener.cloud/v1alpha1","kind":"AdminKubeconfigRequest","spec":{"expirationSeconds":900}}`))
		if k.cert.Subject.CommonName != "adam" || strings.Join(k.cert.Subject.Organization, ",") != kubeconfig.GroupAdmins {
			t.Errorf("admin certificate subject %s", k.cert.Subject)
		}
		if !near(k.cert.NotAfter, before.Add(900*time.Second)) || !k.cert.NotBefore.Before(before) {
			t.Errorf("certificate valid %s..%s, want until about %s", k.cert.NotBefore, k.cert.NotAfter, before.Add(900*time.Second))
		}
		if who, err := whoami(t, k); err != nil || who != "adam/system:masters" {
			t.Errorf("the shoot's API with the admin kubeconfig: %q, %v", who, err)
		}
		v := parse(t, e, must(t, e.h, e.vic, 201, "POST", viewerPath, `{}`))
		if who, err := whoami(t, v); err != nil || who != "vic/"+kubeconfig.GroupViewers {
			t.Errorf("the shoot's API with the viewer kubeconfig: %q, %v", who, err)
		}
		// Default 1 hour; longer than the hub's maximum (2 h here) is shortened to it.
		if !near(v.exp, before.Add(time.Hour)) {
			t.Errorf("default expiration %s, want about %s", v.exp, before.Add(time.Hour))
		}
		long := parse(t, e, must(t, e.h, e.olivia, 201, "POST", adminPath, `{"spec":{"expirationSeconds":86400}}`, `"spec":{"expirationSeconds":7200}`))
		if !near(long.exp, before.Add(2*time.Hour)) {
			t.Errorf("capped expiration %s, want about %s", long.exp, before.Add(2*time.Hour))
		}
	})

	t.Run("expired", func(t *testing.T) {
		k := parse(t, e, must(t, e.h, e.adam, 201, "POST", adminPath, `{"spec":{"expirationSeconds":600}}`))
		e.skew = 11 * time.Minute // the server's clock is past the certificate's NotAfter
		_, err := whoami(t, k)
		e.skew = 0
		if err == nil {
			t.Fatal("an expired client certificate was accepted")
		}
		fresh := parse(t, e, must(t, e.h, e.adam, 201, "POST", adminPath, `{"spec":{"expirationSeconds":600}}`))
		if _, err := whoami(t, fresh); err != nil {
			t.Fatalf("a fresh kubeconfig was refused: %v", err)
		}
	})

	t.Run("authorization", func(t *testing.T) {
		for _, c := range []struct {
			who          string
			token        string
			admin, viewe int
		}{
			{"owner", e.olivia, 201, 201}, {"admin", e.adam, 201, 201}, {"viewer", e.vic, 403, 201}, {"non-member", e.nora, 403, 403},
			{"cluster admin", e.h.Token, 201, 201},
		} {
			code, out := e.h.DoToken(t, c.token, "POST", adminPath, `{}`)
			if code != c.admin {
				t.Errorf("%s: adminkubeconfig %d %s, want %d", c.who, code, out, c.admin)
			}
			code, out = e.h.DoToken(t, c.token, "POST", viewerPath, `{}`)
			if code != c.viewe {
				t.Errorf("%s: viewerkubeconfig %d %s, want %d", c.who, code, out, c.viewe)
			}
		}
		must(t, e.h, e.vic, 403, "POST", adminPath, `{}`, `cannot create resource \"shoots/adminkubeconfig\"`)
		// The client CA is internal: no project member reads it, not even the owner.
		for _, tok := range []string{e.olivia, e.adam} {
			must(t, e.h, tok, 403, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/internalsecrets/local.ca-client", "")
			must(t, e.h, tok, 403, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/internalsecrets", "")
			must(t, e.h, tok, 403, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/internalsecrets?watch=true", "")
		}
	})

	t.Run("discovery", func(t *testing.T) {
		out := must(t, e.h, e.nora, 200, "GET", "/apis/core.gardener.cloud/v1beta1", "")
		for _, want := range []string{
			`{"name":"shoots/adminkubeconfig","singularName":"","namespaced":true,"group":"authentication.gardener.cloud","version":"v1alpha1","kind":"AdminKubeconfigRequest","verbs":["create"]}`,
			`{"name":"shoots/viewerkubeconfig","singularName":"","namespaced":true,"group":"authentication.gardener.cloud","version":"v1alpha1","kind":"ViewerKubeconfigRequest","verbs":["create"]}`,
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("discovery lacks %s:\n%s", want, out)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		must(t, e.h, e.adam, 404, "POST", shootsPath+"nope/adminkubeconfig", `{}`, `shoots.core.gardener.cloud \"nope\" not found`)
		must(t, e.h, e.adam, 409, "POST", shootsPath+"unscheduled/adminkubeconfig", `{}`, "not scheduled to a seed yet")
		must(t, e.h, e.adam, 503, "POST", shootsPath+"fresh/adminkubeconfig", `{}`, "the shoot's client CA is not published yet")
		must(t, e.h, e.adam, 422, "POST", adminPath, `{"spec":{"expirationSeconds":599}}`, "spec.expirationSeconds", "less than 10 minutes")
		must(t, e.h, e.adam, 422, "POST", adminPath, `{"spec":{"expirationSeconds":4294967296}}`, "spec.expirationSeconds")
		must(t, e.h, e.adam, 400, "POST", adminPath, `{"kind":"ViewerKubeconfigRequest"}`, "is not authentication.gardener.cloud/v1alpha1/AdminKubeconfigRequest")
	})

	t.Run("advertised", func(t *testing.T) {
		// The hub advertises the tunnel as the external address of scheduled shoots, next to what else they have.
		want := "https://api.local.dev." + tunnel.DefaultDomain + ":" + strings.Split(e.apiserver.Listener.Addr().String(), ":")[1]
		waitAddresses := func(want ...string) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, out := e.h.Do(t, "GET", shootsPath+"local", nil)
				var s struct {
					Status struct{ AdvertisedAddresses []struct{ Name, URL string } }
				}
				if err := json.Unmarshal(out, &s); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, a := range s.Status.AdvertisedAddresses {
					got = append(got, a.Name+"="+a.URL)
				}
				if strings.Join(got, " ") == strings.Join(want, " ") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("advertised addresses: want %q, got %s", want, out)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		waitAddresses("external=" + want)
		// An agent's status write without it (and with an address of its own) gets it back, first.
		for i := 0; ; i++ {
			o, err := e.shoots.Get(context.Background(), "garden-dev", "local")
			if err != nil {
				t.Fatal(err)
			}
			s := proto.Clone(o).(*corev1beta1.Shoot)
			s.Status.AdvertisedAddresses = []*corev1beta1.ShootAdvertisedAddress{{Name: "internal", Url: "https://10.0.0.1"}}
			if _, err = e.shoots.UpdateStatus(context.Background(), s); err == nil {
				break
			} else if i == 10 {
				t.Fatal(err)
			}
		}
		waitAddresses("external="+want, "internal=https://10.0.0.1")
		if _, out := e.h.Do(t, "GET", shootsPath+"unscheduled", nil); strings.Contains(string(out), "advertisedAddresses") {
			t.Errorf("an unscheduled shoot has advertised addresses: %s", out)
		}
	})

	t.Run("no keys in logs", func(t *testing.T) {
		must(t, e.h, e.adam, 201, "POST", adminPath, `{}`)
		audit, err := os.ReadFile(filepath.Join(e.dir, "audit.log"))
		if err != nil {
			t.Fatal(err)
		}
		var seen bool
		for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
			var ev struct {
				Level     string
				ObjectRef struct{ Resource, Subresource, Name string }
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ObjectRef.Subresource == kubeconfig.SubresourceAdmin && ev.ObjectRef.Name == "local" {
				seen = true
				if ev.Level != "Metadata" {
					t.Errorf("an adminkubeconfig request audited at %s", ev.Level)
				}
			}
		}
		if !seen {
			t.Error("no audit event of the adminkubeconfig request")
		}
		for what, text := range map[string]string{"audit log": string(audit), "hub log": e.log.String()} {
			if strings.Contains(text, "PRIVATE KEY") || strings.Contains(text, "client-key-data") {
				t.Errorf("the %s shows a private key", what)
			}
		}
		if !strings.Contains(e.log.String(), `msg="issued a shoot kubeconfig" component=kubeconfig user=adam shoot=garden-dev/local kind=AdminKubeconfigRequest group=system:masters seed=seed-1`) {
			t.Errorf("the hub's log lacks the issued kubeconfig:\n%s", e.log.String())
		}
	})

	t.Run("grpc", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(e.h.CA)
		conn, err := grpc.NewClient(e.h.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c := authenticationv1alpha1.NewShootKubeconfigServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := &authenticationv1alpha1.ViewerKubeconfigRequest{Metadata: &metav1.ObjectMeta{Name: "local", Namespace: "garden-dev"},
			Spec: &authenticationv1alpha1.KubeconfigRequestSpec{ExpirationSeconds: proto.Int64(1200)}}
		resp, err := c.CreateViewerKubeconfig(hubtest.WithToken(ctx, e.vic), req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(map[string]any{"apiVersion": resp.GetApiVersion(), "metadata": map[string]string{"name": "local", "namespace": "garden-dev"},
			"status": map[string]any{"kubeconfig": resp.GetStatus().GetKubeconfig(), "expirationTimestamp": resp.GetStatus().GetExpirationTimestamp().AsTime()}})
		k := parse(t, e, raw)
		if who, err := whoami(t, k); err != nil || who != "vic/"+kubeconfig.GroupViewers {
			t.Errorf("the shoot's API with the gRPC viewer kubeconfig: %q, %v", who, err)
		}
		_, err = c.CreateAdminKubeconfig(hubtest.WithToken(ctx, e.vic), &authenticationv1alpha1.AdminKubeconfigRequest{Metadata: req.GetMetadata()})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("a viewer's admin kubeconfig over gRPC: want PermissionDenied, got %v", err)
		}
		_, err = c.CreateViewerKubeconfig(hubtest.WithToken(ctx, e.nora), req)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("a non-member's viewer kubeconfig over gRPC: want PermissionDenied, got %v", err)
		}
	})
}
