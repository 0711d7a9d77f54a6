package ocitest

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/registry"
)

// The credentials the registry accepts.
const (
	User     = "robot"
	Password = "s3cret"
)

// Registry is a running registry.
type Registry struct {
	// Host is its host:port (127.0.0.1:port).
	Host string
	// CABundle is the PEM of its serving certificate, which verifies it.
	CABundle []byte

	srv       *httptest.Server
	manifests atomic.Int64
}

// Start starts a registry that runs until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, password, ok := req.BasicAuth(); !ok || user != User || password != Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test registry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		if strings.Contains(req.URL.Path, "/manifests/") {
			r.manifests.Add(1)
		}
		inner.ServeHTTP(w, req)
	}))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes tests fail on purpose
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.Host = r.srv.Listener.Addr().String()
	r.CABundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	return r
}

// Close stops the registry before the test ends.
func (r *Registry) Close() { r.srv.Close() }

// Manifests is how many manifest requests the registry has answered.
func (r *Registry) Manifests() int64 { return r.manifests.Load() }

// Push pushes a chart archive to repository:tag (repository without the host) with Helm's registry client and
// returns the manifest digest.
func (r *Registry) Push(t testing.TB, archive []byte, repository, tag string) string {
	t.Helper()
	c, err := registry.NewClient(
		registry.ClientOptHTTPClient(r.srv.Client()),
		registry.ClientOptBasicAuth(User, Password),
		registry.ClientOptWriter(io.Discard),
	)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Push(archive, r.Host+"/"+repository+":"+tag, registry.PushOptStrictMode(false))
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res.Manifest.Digest
}

// DockerConfigJSON is the .dockerconfigjson of a pull secret with user and password for host.
func DockerConfigJSON(host, user, password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, auth)
}
