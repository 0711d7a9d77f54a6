package hub_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// selfSigned writes a self-signed serving certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "hub.example.com"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"hub.example.com"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, der
}

// The hub chart's Secrets: a serving certificate of the operator's (--tls-cert-file, --tls-key-file) is served
// instead of one of the hub's CA, and the admin token of --admin-token-file is the admin's on first start.
func TestServingCertAndAdminTokenFromFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, der := selfSigned(t, dir)
	const token = "an-admin-token-of-the-operators-0123456789"
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := hubtest.Start(t, func(c *hub.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.AdminTokenFile = certFile, keyFile, tokenFile
	})
	if h.Token != token {
		t.Errorf("admin token %q, want the file's", h.Token)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, tc := range []struct {
		token string
		want  int
	}{{token, http.StatusOK}, {"wrong-token-wrong-token-wrong-token", http.StatusUnauthorized}} {
		req, err := http.NewRequest(http.MethodGet, h.URL+"/api/v1/namespaces", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("the hub does not serve the given certificate: %v", err)
		}
		_ = resp.Body.Close()
		if resp.TLS == nil || !bytes.Equal(resp.TLS.PeerCertificates[0].Raw, der) {
			t.Error("the hub served another certificate than --tls-cert-file")
		}
		if resp.StatusCode != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token[:5], resp.StatusCode, tc.want)
		}
	}
}

func TestServingCertAndAdminTokenFlagsValidated(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  hub.Config
		want string
	}{
		{hub.Config{DataDir: dir, TLSCertFile: "x.crt"}, "tls-cert-file and tls-key-file: set both or neither"},
	} {
		if _, err := hub.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c := hub.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", GRPCListen: "", AdminTokenFile: short}
	h, err := hub.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Run(ctx); err == nil || !strings.Contains(err.Error(), "admin-token-file "+short+": want one token of at least 32 characters") {
		t.Errorf("Run with a short admin token: %v", err)
	}
}
