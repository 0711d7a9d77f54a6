package tunnel_test

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// TestPassthroughDataConnection: a passthrough tunnel's bytes go over a data connection the agent opens to the hub's
// agent port (the hub counts it accepted), arrive whole both ways, are counted and keep the tunnel in the open gauge;
// with --tunnel-data-connections=false the same goes over the agent link and no data connection is made. When the
// agent goes, the client's connection breaks, it does not hang.
func TestPassthroughDataConnection(t *testing.T) {
	for _, dataConns := range []bool{true, false} {
		name := "data connection"
		if !dataConns {
			name = "agent link"
		}
		t.Run(name, func(t *testing.T) {
			e := start(t, func(c *hub.Config) { c.TunnelNoDataConnections = !dataConns })
			e.devShoot(t, "raw")
			e.shootAPIServer(t, "dev", "raw", echoTarget(t))
			sni := tunnel.ShootServerName("raw", "dev", tunnel.DefaultDomain)

			c := dialShoot(t, e.hub.TunnelAddr(), sni)
			defer c.Close()
			data := echo(t, c, 4<<20)
			accepted := e.metric(t, "trellis_tunnel_data_connections_total", `result="accepted"`)
			if want := map[bool]float64{true: 1, false: 0}[dataConns]; accepted != want {
				t.Errorf("data connections accepted: %v, want %v", accepted, want)
			}
			if open := e.metric(t, "trellis_tunnel_open", `kind="shoot-api"`); open != 1 {
				t.Errorf("open shoot-api tunnels: %v, want 1", open)
			}
			for _, dir := range []string{"to-seed", "from-seed"} {
				if n := e.metric(t, "trellis_tunnel_bytes_total", `kind="shoot-api"`, dir); n < float64(len(data)) {
					t.Errorf("%s bytes counted: %v, want at least %d", dir, n, len(data))
				}
			}

			// The agent goes: the client's connection breaks.
			e.seed.Agent.Stop()
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := c.Read(make([]byte, 1))
			if err == nil || strings.Contains(err.Error(), "timeout") {
				t.Fatalf("the client's read after the agent went: %v, want a broken connection", err)
			}
			t.Logf("the client's connection ended with %v", err)
			agenttest.Eventually(t, "no open shoot-api tunnel", func() bool {
				return e.metric(t, "trellis_tunnel_open", `kind="shoot-api"`) == 0
			})
		})
	}
}

// TestPassthroughFallsBack: when the agent's data connection is refused (here by a TCP proxy between agent and hub
// that passes TLS and closes anything else, as a middlebox might), the tunnel goes over the agent link at once, and
// the session's next tunnels go there without trying.
func TestPassthroughFallsBack(t *testing.T) {
	var refused *atomic.Int64
	e := startWith(t, func(e *env, c *agent.Config) {
		c.Configuration.HubClientConnection.Address, refused = tlsOnlyProxy(t, c.Configuration.HubClientConnection.Address)
	})
	e.devShoot(t, "fallback")
	e.shootAPIServer(t, "dev", "fallback", echoTarget(t))
	// Two tunnels: the first tries a data connection and falls back, the second does not try again (the session
	// pauses data connections after a failure).
	for range 2 {
		c := dialShoot(t, e.hub.TunnelAddr(), tunnel.ShootServerName("fallback", "dev", tunnel.DefaultDomain))
		if _, err := c.Write([]byte("through the agent link")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len("through the agent link"))
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "through the agent link" {
			t.Fatalf("echo: %q, %v", got, err)
		}
		c.Close()
	}
	if n := e.metric(t, "trellis_tunnel_data_connections_total"); n != 0 || refused.Load() != 1 {
		t.Errorf("the hub saw %v data connections, the proxy refused %d; want 0 and 1", n, refused.Load())
	}
}

// tlsOnlyProxy forwards connections that begin with a TLS record to upstream and closes (and counts) the others; it
// returns its address and the count.
func tlsOnlyProxy(t *testing.T, upstream string) (string, *atomic.Int64) {
	t.Helper()
	return sortingProxy(t, func(first byte) string {
		if first == 0x16 {
			return upstream
		}
		return ""
	})
}

// sortingProxy forwards each connection to the address that route gives for its first byte, as a load balancer might
// send an agent's connections to different hub replicas, or closes (and counts) it when route gives none; it returns
// its address and the count.
func sortingProxy(t *testing.T, route func(first byte) string) (string, *atomic.Int64) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	serveConns(t, lis, func(c net.Conn, track func(net.Conn)) {
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil || route(first[0]) == "" {
			refused.Add(1)
			return
		}
		up, err := net.Dial("tcp", route(first[0]))
		if err != nil {
			return
		}
		track(up)
		defer up.Close()
		if _, err := up.Write(first); err != nil {
			return
		}
		var toUp sync.WaitGroup
		toUp.Go(func() { _, _ = io.Copy(up, c); up.Close() })
		_, _ = io.Copy(c, up)
		c.Close()
		toUp.Wait()
	})
	return lis.Addr().String(), &refused
}

// serveConns accepts lis's connections until the test ends and handles each in a goroutine of its own; then it closes
// the listener and every connection, the accepted ones and those handed to track, and waits for the goroutines.
func serveConns(t *testing.T, lis net.Listener, handle func(c net.Conn, track func(net.Conn))) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Go(func() {
				defer c.Close()
				handle(c, track)
			})
		}
	})
}

// dialShoot opens a TLS connection to the shoot's API through the SNI listener at addr (not verifying the target).
func dialShoot(t *testing.T, addr, sni string) *tls.Conn {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the echo target's certificate is httptest's
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.Handshake(); err != nil {
		raw.Close()
		t.Fatalf("handshake through the tunnel: %v", err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// echo sends n random bytes through c to an echoTarget, checks that the same come back and returns them.
func echo(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	go func() { _, _ = c.Write(data) }()
	got := make([]byte, len(data))
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echo through the tunnel: %v (equal %v)", err, bytes.Equal(got, data))
	}
	return data
}

// echoTarget is a TLS server (httptest's certificate) that echoes what each connection sends; it returns its address.
func echoTarget(t *testing.T) string {
	t.Helper()
	lis := tlsListener(t)
	serveConns(t, lis, func(c net.Conn, _ func(net.Conn)) { _, _ = io.Copy(c, c) })
	return lis.Addr().String()
}
