package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/faultproxy"
)

// backend is an echo server that records, per connection, what it received and when the connection ended.
type backend struct {
	ln       net.Listener
	accepted chan *backendConn
	wg       sync.WaitGroup
}

type backendConn struct {
	conn   net.Conn
	mu     sync.Mutex
	got    bytes.Buffer
	closed chan struct{}
}

func (c *backendConn) received() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got.String()
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	return startBackendOn(t, "127.0.0.1:0")
}

func startBackendOn(t *testing.T, addr string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, accepted: make(chan *backendConn, 16)}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bc := &backendConn{conn: c, closed: make(chan struct{})}
			b.accepted <- bc
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer close(bc.closed)
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						bc.mu.Lock()
						bc.got.Write(buf[:n])
						bc.mu.Unlock()
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); b.wg.Wait() })
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

// next returns the backend's next accepted connection.
func (b *backend) next(t *testing.T) *backendConn {
	t.Helper()
	select {
	case c := <-b.accepted:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("the backend accepted no connection")
		return nil
	}
}

func listen(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and expects it echoed.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read echo of %q: %v", msg, err)
	}
	if string(buf) != msg {
		t.Fatalf("echo: got %q, want %q", buf, msg)
	}
}

// silent expects nothing to arrive on c for d: no byte, no close.
func silent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("expected silence, got %d bytes %q and %v", n, buf[:n], err)
	}
}

// ends expects c to be closed by the other side within 5 s.
func ends(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the connection was not closed")
		}
		return
	}
}

func closedWithin(t *testing.T, bc *backendConn, d time.Duration, what string) {
	t.Helper()
	select {
	case <-bc.closed:
	case <-time.After(d):
		t.Fatalf("%s: the backend's side was not closed within %s", what, d)
	}
}

func TestForwardsBothWays(t *testing.T) {
	b := startBackend(t)
	p := listen(t, b.addr())
	c := dial(t, p)
	roundTrip(t, c, "hello")
	roundTrip(t, c, string(bytes.Repeat([]byte("x"), 200_000)))
	side := b.next(t)
	if got := side.received(); len(got) != 200_005 {
		t.Fatalf("backend received %d bytes, want 200005", len(got))
	}
	if p.Conns() != 1 || p.Accepted() != 1 {
		t.Fatalf("Conns %d Accepted %d, want 1 and 1", p.Conns(), p.Accepted())
	}
	// A client that closes ends the backend's side too, and the link is forgotten.
	c.Close()
	closedWithin(t, side, 5*time.Second, "client close")
	deadline := time.Now().Add(5 * time.Second)
	for p.Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the link was not forgotten after the client closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCutAllClosesBothSides(t *testing.T) {
	b := startBackend(t)
	p := listen(t, b.addr())
	var clients []net.Conn
	var sides []*backendConn
	for range 3 {
		c := dial(t, p)
		roundTrip(t, c, "hi")
		clients = append(clients, c)
		sides = append(sides, b.next(t))
	}
	if n := p.CutAll(); n != 3 {
		t.Fatalf("CutAll cut %d connections, want 3", n)
	}
	for i, c := range clients {
		ends(t, c)
		closedWithin(t, sides[i], 5*time.Second, "cut")
	}
	// The proxy keeps accepting.
	c := dial(t, p)
	roundTrip(t, c, "again")
	if n := p.CutAll(); n != 1 {
		t.Fatalf("second CutAll cut %d connections, want 1", n)
	}
	ends(t, c)
}

func TestBlackholeDropsBytesAndHeals(t *testing.T) {
	b := startBackend(t)
	p := listen(t, b.addr())
	a := dial(t, p)
	roundTrip(t, a, "before")
	aSide := b.next(t)
	closing := dial(t, p)
	roundTrip(t, closing, "x")
	closingSide := b.next(t)

	p.Blackhole(true)
	if !p.Blackholed() {
		t.Fatal("Blackholed() is false after Blackhole(true)")
	}
	// Bytes towards the backend vanish; the connection stays open.
	if _, err := a.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	silent(t, a, 300*time.Millisecond)
	if got := aSide.received(); got != "before" {
		t.Fatalf("backend received %q during the black hole", got)
	}
	// New connections are accepted but blackholed too.
	n := dial(t, p)
	if _, err := n.Write([]byte("new-lost")); err != nil {
		t.Fatal(err)
	}
	nSide := b.next(t)
	silent(t, n, 300*time.Millisecond)
	if got := nSide.received(); got != "" {
		t.Fatalf("backend received %q on a connection opened during the black hole", got)
	}
	// A client that closes is not told to the backend.
	closing.Close()
	select {
	case <-closingSide.closed:
		t.Fatal("a close crossed the black hole")
	case <-time.After(300 * time.Millisecond):
	}
	if p.Dropped() != int64(len("lost")+len("new-lost")) {
		t.Fatalf("Dropped %d, want %d", p.Dropped(), len("lost")+len("new-lost"))
	}

	p.Blackhole(false)
	// What was dropped stays lost; new bytes flow on the same connections.
	roundTrip(t, a, "after")
	if got := aSide.received(); got != "beforeafter" {
		t.Fatalf("backend received %q, want %q", got, "beforeafter")
	}
	roundTrip(t, n, "now")
	if got := nSide.received(); got != "now" {
		t.Fatalf("backend received %q on the new connection, want %q", got, "now")
	}
	closedWithin(t, closingSide, 5*time.Second, "close during the black hole, after healing")
	// Turning it off twice, or on and off again, is harmless.
	p.Blackhole(false)
	p.Blackhole(true)
	p.Blackhole(false)
	roundTrip(t, a, "fine")
}

func TestBlackholeSwallowsTheBackendsBytesToo(t *testing.T) {
	b := startBackend(t)
	p := listen(t, b.addr())
	c := dial(t, p)
	roundTrip(t, c, "a")
	side := b.next(t)
	p.Blackhole(true)
	if _, err := side.conn.Write([]byte("pushed")); err != nil {
		t.Fatal(err)
	}
	silent(t, c, 300*time.Millisecond)
	p.Blackhole(false)
	if _, err := side.conn.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("after healing the client read %q, %v; want %q", buf, err, "ok")
	}
	silent(t, c, 100*time.Millisecond)
}

func TestSetTargetRoutesNewConnections(t *testing.T) {
	b1, b2 := startBackend(t), startBackend(t)
	p := listen(t, b1.addr())
	old := dial(t, p)
	roundTrip(t, old, "one")
	oldSide := b1.next(t)
	p.SetTarget(b2.addr())
	if p.Target() != b2.addr() {
		t.Fatalf("Target %s, want %s", p.Target(), b2.addr())
	}
	c := dial(t, p)
	roundTrip(t, c, "two")
	if got := b2.next(t).received(); got != "two" {
		t.Fatalf("second backend received %q", got)
	}
	roundTrip(t, old, "still")
	if got := oldSide.received(); got != "onestill" {
		t.Fatalf("first backend received %q on the old connection", got)
	}
}

func TestTargetDownClosesTheClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := listen(t, addr)
	c := dial(t, p)
	ends(t, c)
	// The backend comes back on the same address, as a restarted server: new connections reach it.
	startBackendOn(t, addr)
	c = dial(t, p)
	roundTrip(t, c, "back")
}

func TestCloseEndsEverything(t *testing.T) {
	b := startBackend(t)
	p, err := faultproxy.Listen(b.addr())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	roundTrip(t, c, "x")
	side := b.next(t)
	p.Blackhole(true) // Close must not wait for a heal
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	ends(t, c)
	closedWithin(t, side, 5*time.Second, "Close")
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Fatal("the proxy still accepts after Close")
	}
}
