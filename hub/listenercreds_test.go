package hub

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

// selfSigned is a serving configuration with a new self-signed certificate named cn.
func selfSigned(t *testing.T, cn string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2"}}
}

// The gRPC-only listener's credentials serve the configuration current gives at each handshake, with gRPC's defaults
// (ALPN h2), and make gRPC's credentials once per configuration, not per connection.
func TestListenerCredsFollowTheConfiguration(t *testing.T) {
	var cur atomic.Pointer[tls.Config]
	first, second := selfSigned(t, "first"), selfSigned(t, "second")
	cur.Store(first)
	l := newListenerCreds(cur.Load)
	handshake := func() (served string, info credentials.TLSInfo) {
		t.Helper()
		server, client := net.Pipe()
		defer func() { _ = server.Close(); _ = client.Close() }()
		type result struct {
			info credentials.AuthInfo
			err  error
		}
		done := make(chan result, 1)
		go func() { _, info, err := l.ServerHandshake(server); done <- result{info, err} }()
		c := tls.Client(client, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // the test checks which certificate is served
		if err := c.Handshake(); err != nil {
			t.Fatalf("client handshake: %v", err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("server handshake: %v", r.err)
		}
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, r.info.(credentials.TLSInfo)
	}
	served, info := handshake()
	if served != "first" || info.State.NegotiatedProtocol != "h2" {
		t.Fatalf("served %q with ALPN %q, want first and h2", served, info.State.NegotiatedProtocol)
	}
	made := l.last.Load()
	if served, _ := handshake(); served != "first" || l.last.Load() != made {
		t.Fatalf("second connection: served %q, credentials made again: %v; want first, the same credentials", served, l.last.Load() != made)
	}
	cur.Store(second)
	if served, _ := handshake(); served != "second" {
		t.Fatalf("after the change: served %q, want second", served)
	}
}
