package tunnel_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/ctl"
	"github.com/trellis-dev/trellis/ctl/kinds"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestShootKubeconfigThroughTunnel: trellisctl shoot kubeconfig writes a kubeconfig that the real kubectl uses to
// reach the shoot's kube-apiserver (a stand-in serving the shoot's tunnel name with a certificate of the shoot's
// cluster CA, trusting only the shoot's client CA) through the hub's tunnel listener and the seed's agent; the
// stand-in sees the hub user and the kubeconfig's group, admin or viewer.
func TestShootKubeconfigThroughTunnel(t *testing.T) {
	e := start(t)
	e.devShoot(t, "api1")
	cluster, client := hubtest.NewCA(t, "ca-cluster", true), hubtest.NewCA(t, "ca-client", true)
	e.hub.PublishShootCAs(t, "garden-dev", "api1", cluster, &client)

	clients := x509.NewCertPool()
	clients.AddCert(client.Cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		_ = json.NewEncoder(w).Encode(map[string]any{"user": c.Subject.CommonName, "groups": c.Subject.Organization, "path": r.URL.Path})
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cluster.ServingCert(t, tunnel.ShootServerName("api1", "dev", tunnel.DefaultDomain))},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e.shootAPIServer(t, "dev", "api1", srv.Listener.Addr().String())

	// Gardener's documented way, kubectl create --raw against the hub, gives the same kubeconfig.
	hubKubeconfig := filepath.Join(e.dir, "hub.kubeconfig")
	if err := os.WriteFile(hubKubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: %s, certificate-authority: %s}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: hub, context: {cluster: hub, user: admin}}]
current-context: hub
`, e.hub.URL, filepath.Join(e.hub.DataDir, "pki", "ca.crt"), e.hub.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(e.dir, "request.json")
	if err := os.WriteFile(body, []byte(`{"apiVersion":"authentication.gardener.cloud/v1alpha1","kind":"AdminKubeconfigRequest","spec":{"expirationSeconds":600}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var answer struct{ Status struct{ Kubeconfig []byte } }
	if err := json.Unmarshal([]byte(e.ok(t, hubKubeconfig, "create", "--raw", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/api1/adminkubeconfig", "-f", body)), &answer); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(e.dir, "raw.kubeconfig")
	if err := os.WriteFile(raw, answer.Status.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.ok(t, raw, "get", "--raw", "/whoami"); !strings.Contains(out, `"system:masters"`) {
		t.Errorf("with the kubeconfig of kubectl create --raw: %s", out)
	}

	for _, c := range []struct {
		flags []string
		group string
	}{{nil, "system:masters"}, {[]string{"--viewer"}, "gardener.cloud:system:viewers"}} {
		path := e.shootKubeconfig(t, "api1", "dev", c.flags...)
		out := e.ok(t, path, "get", "--raw", "/whoami")
		var who struct {
			User, Path string
			Groups     []string
		}
		if err := json.Unmarshal([]byte(out), &who); err != nil {
			t.Fatalf("kubectl get --raw: %v\n%s", err, out)
		}
		if who.User != "trellis:admin" || strings.Join(who.Groups, ",") != c.group || who.Path != "/whoami" {
			t.Errorf("the shoot's API saw %+v, want trellis:admin in %s", who, c.group)
		}
	}
}

// shootKubeconfig has trellisctl write a shoot's kubeconfig (trellisctl shoot kubeconfig) for the admin.
func (e *env) shootKubeconfig(t *testing.T, shoot, project string, flags ...string) string {
	t.Helper()
	env := map[string]string{"TRELLIS_HUB": e.hub.URL, "TRELLIS_CA": filepath.Join(e.hub.DataDir, "pki", "ca.crt"), "TRELLIS_TOKEN": e.hub.Token,
		"HOME": e.dir, "TRELLISCONFIG": filepath.Join(e.dir, "trellisconfig")}
	path := filepath.Join(e.dir, shoot+strings.Join(flags, "")+".kubeconfig")
	var out, errOut strings.Builder
	args := append([]string{"shoot", "kubeconfig", shoot, "-p", project, "--file", path}, flags...)
	if code := ctl.Main(context.Background(), args, ctl.Options{Kinds: kinds.All, Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }}); code != 0 {
		t.Fatalf("trellisctl shoot kubeconfig: %d %s", code, errOut.String())
	}
	return path
}
