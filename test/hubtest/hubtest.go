package hubtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/test/timescale"
)

// Hub is a running hub and clients for it.
type Hub struct {
	*hub.Hub
	URL     string // https://127.0.0.1:<port>
	Token   string
	CA      []byte
	DataDir string
	HTTP    *http.Client
	parts   hub.Parts
}

// Registry is the hub's registry of kinds: its collections read and write the store directly, past the API's
// authorization and admission, with read-your-writes.
func (h *Hub) Registry() *api.Registry { return h.parts.Registry }

// Store is the hub's store, for tests that read etcd as it is.
func (h *Hub) Store() *store.Store { return h.parts.Store }

// AgentLink is the hub's agent link (which seeds have a session).
func (h *Hub) AgentLink() *agentlink.Server { return h.parts.AgentLink }

// PKI is the hub's certificate authority, for tests that issue client certificates (a seed agent's, without its
// bootstrap exchange).
func (h *Hub) PKI() *pki.CA { return h.parts.CA }

// Authority is the replica's CA with its rotation.
func (h *Hub) Authority() *pki.Authority { return h.parts.Authority }

// WithoutControllers disables controller-manager loops by name, for tests of the API that a loop writing the same
// objects (the shoot-statuslabel controller labels every new shoot) would race with.
func WithoutControllers(names ...string) func(*hub.Config) {
	return func(c *hub.Config) {
		c.Controllers = []string{"*"}
		for _, n := range names {
			c.Controllers = append(c.Controllers, "-"+n)
		}
	}
}

// Start runs a hub until the test ends. mutate may adjust the configuration.
func Start(t testing.TB, mutate ...func(*hub.Config)) *Hub {
	t.Helper()
	dir := t.TempDir()
	cfg := hub.Config{
		Listen:     "127.0.0.1:0",
		GRPCListen: "127.0.0.1:0",
		DataDir:    dir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if testing.Verbose() && os.Getenv("TRELLIS_TEST_LOGS") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, m := range mutate {
		m(&cfg)
	}
	parts := make(chan hub.Parts, 1)
	onReady := cfg.OnReady
	cfg.OnReady = func(p hub.Parts) {
		parts <- p
		if onReady != nil {
			onReady(p)
		}
	}
	h, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if stopped {
			return
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hub stopped with error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("hub did not stop within 30s")
		}
	})
	select {
	case <-h.Ready():
	case err := <-done:
		stopped = true
		t.Fatalf("hub failed to start: %v", err)
	case <-time.After(timescale.Scale(60 * time.Second)):
		t.Fatal("hub not ready within 60s")
	}
	c := connect(t, h, cfg.DataDir)
	c.parts = <-parts
	return c
}

func connect(t testing.TB, h *hub.Hub, dir string) *Hub {
	ca, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}
	return &Hub{Hub: h, URL: "https://" + h.Addr(), Token: strings.TrimSpace(string(token)), CA: ca, DataDir: dir, HTTP: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// Do sends a REST request with the admin token; body may be nil, []byte, string or a value to encode as JSON.
func (h *Hub) Do(t testing.TB, method, path string, body any, header ...string) (int, []byte) {
	t.Helper()
	return h.DoToken(t, h.Token, method, path, body, header...)
}

// DoToken is Do with another token ("" for none).
func (h *Hub) DoToken(t testing.TB, token, method, path string, body any, header ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.HTTP.Do(req)
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

// GRPC returns a gRPC connection to the hub over TLS; calls carry the admin token.
func (h *Hub) GRPC(t testing.TB) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.CA)
	conn, err := grpc.NewClient(h.Addr(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})),
		grpc.WithPerRPCCredentials(tokenCreds(h.Token)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type tokenCreds string

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}
func (tokenCreds) RequireTransportSecurity() bool { return true }

// WithToken returns ctx carrying a bearer token for a gRPC call.
func WithToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// UserToken has the admin issue a user token (an AccessToken in trellis-system named after user) for user in groups,
// and returns the token.
func (h *Hub) UserToken(t testing.TB, user string, groups ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]string{"name": user}, "spec": map[string]any{"user": user, "groups": groups}})
	code, out := h.Do(t, "POST", "/apis/auth.trellis.dev/v1alpha1/namespaces/trellis-system/accesstokens", body)
	var resp struct {
		Status struct{ Token string }
	}
	if err := json.Unmarshal(out, &resp); code != 201 || err != nil || resp.Status.Token == "" {
		t.Fatalf("user token for %s: %d %s", user, code, out)
	}
	return resp.Status.Token
}

// WaitNamespace waits up to 10 s for namespace name to exist (a new project's, which the project controller makes).
func (h *Hub) WaitNamespace(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(timescale.Scale(10 * time.Second))
	for {
		if code, _ := h.Do(t, "GET", "/api/v1/namespaces/"+name, nil); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s does not exist after 10s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ClientCert issues a client certificate with subject cn and organizations orgs from the hub's CA, as the bootstrap
// exchange would for a seed.
func (h *Hub) ClientCert(t testing.TB, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{Organization: orgs, CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := h.PKI().SignClientCert(req, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
