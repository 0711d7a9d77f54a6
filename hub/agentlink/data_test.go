package agentlink

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/trellis-dev/trellis/proto/tunnelwire"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestDataConnections: the agent port's listener hands TLS connections on untouched and serves data prefaces: a good
// token is answered and its connection handed to the waiting tunnel, once; unknown tunnels, wrong, reused and
// expired tokens and malformed prefaces are refused (the connection closed) and counted.
func TestDataConnections(t *testing.T) {
	s := &Server{cfg: Config{Log: slog.New(slog.DiscardHandler)}}
	s.metrics = newMetrics(nil, s)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := s.Listener(inner)
	defer lis.Close()

	// TLS passes through: a TLS server on the listener completes handshakes.
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS() // for its certificate
	srv.Close()
	tlsLis := tls.NewListener(lis, srv.TLS)
	served := make(chan error, 1)
	go func() {
		c, err := tlsLis.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			if err == nil {
				_, err = c.Write([]byte("tls"))
			}
			c.Close()
		}
		served <- err
	}()
	tc, err := tls.Dial("tcp", inner.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the pass-through is tested
	if err != nil {
		t.Fatalf("TLS through the listener: %v", err)
	}
	got, _ := io.ReadAll(tc)
	tc.Close()
	if err := <-served; err != nil || string(got) != "tls" {
		t.Fatalf("TLS through the listener: %q, %v", got, err)
	}

	pending := func(id string, expires time.Time) *pendingTunnel {
		p := &pendingTunnel{seed: "s", accepted: make(chan acceptResult, 1), token: bytes.Repeat([]byte{id[0]}, tunnelwire.DataTokenLen), expires: expires}
		s.tunnelMu.Lock()
		if s.pending == nil {
			s.pending = map[string]*pendingTunnel{}
		}
		s.pending[id] = p
		s.tunnelMu.Unlock()
		return p
	}
	// present sends a preface and returns the connection and what the hub answered before closing it ("" for none).
	present := func(preface []byte) (net.Conn, string) {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(preface); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(timescale.Scale(20 * time.Second)))
		answer := make([]byte, len(tunnelwire.DataAccepted))
		n, _ := io.ReadFull(c, answer)
		return c, string(answer[:n])
	}
	preface := func(id string, token []byte) []byte {
		b, err := tunnelwire.DataPreface(id, token)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	count := func(result string) float64 {
		var m dto.Metric
		_ = s.metrics.dataConns.WithLabelValues(result).Write(&m)
		return m.GetCounter().GetValue()
	}
	// counted waits for a result's count to reach want: the hub counts an accepted connection after its answer, so
	// the client can read the answer first.
	counted := func(result string, want float64) float64 {
		deadline := time.Now().Add(timescale.Scale(10 * time.Second))
		for count(result) < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return count(result)
	}

	good := "a0000000000000000000000000000000"
	p := pending(good, time.Now().Add(time.Minute))
	// A wrong token does not take the tunnel.
	c, answer := present(preface(good, bytes.Repeat([]byte{1}, tunnelwire.DataTokenLen)))
	c.Close()
	if answer != "" || count("bad-token") != 1 {
		t.Fatalf("a wrong token: answer %q, counted %v", answer, count("bad-token"))
	}
	// The right one does, and its connection reaches the tunnel with the bytes after the preface.
	c, answer = present(preface(good, p.token))
	defer c.Close()
	if n := counted("accepted", 1); answer != tunnelwire.DataAccepted || n != 1 {
		t.Fatalf("the right token: answer %q, counted %v", answer, n)
	}
	r := <-p.accepted
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, ok := r.conn.(*net.TCPConn); !ok {
		t.Fatalf("handed over a %T, want the TCP connection", r.conn)
	}
	if _, err := c.Write([]byte("bytes")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(r.conn, b); err != nil || string(b) != "bytes" {
		t.Fatalf("after the preface: %q, %v", b, err)
	}
	r.conn.Close()
	// Once used, the token is spent.
	c2, answer := present(preface(good, p.token))
	c2.Close()
	if answer != "" || count("reused") != 1 {
		t.Fatalf("a reused token: answer %q, counted %v", answer, count("reused"))
	}
	// An expired token, an unknown tunnel and a malformed preface are refused.
	old := "b0000000000000000000000000000000"
	po := pending(old, time.Now().Add(-time.Second))
	c3, answer := present(preface(old, po.token))
	c3.Close()
	if answer != "" || count("expired") != 1 {
		t.Fatalf("an expired token: answer %q, counted %v", answer, count("expired"))
	}
	c4, answer := present(preface("c0000000000000000000000000000000", po.token))
	c4.Close()
	if answer != "" || count("unknown") != 1 {
		t.Fatalf("an unknown tunnel: answer %q, counted %v", answer, count("unknown"))
	}
	bad := preface(old, po.token)
	bad[len(bad)-1] = 'x'
	c5, answer := present(bad)
	c5.Close()
	if answer != "" || count("bad-preface") != 1 {
		t.Fatalf("a malformed preface: answer %q, counted %v", answer, count("bad-preface"))
	}
	// The expired tunnel is still waiting: its Tunnel call may still come.
	s.tunnelMu.Lock()
	still := s.pending[old] == po && !po.claimed
	s.tunnelMu.Unlock()
	if !still {
		t.Fatal("a refused data connection took the tunnel")
	}
}
