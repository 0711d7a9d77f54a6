package hub

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

// blockingCreds stands in for TLS: each handshake blocks until release is closed.
type blockingCreds struct {
	credentials.TransportCredentials
	release chan struct{}
	running atomic.Int32
}

func (c *blockingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c.running.Add(1)
	<-c.release
	return conn, nil, nil
}

func (c *blockingCreds) Clone() credentials.TransportCredentials { return c }

// The bound: one handshake at a time, one queued, the next closed at once before any handshake work; the queued one
// runs when the first is done.
func TestBoundedHandshakesQueueThenRefuse(t *testing.T) {
	inner := &blockingCreds{release: make(chan struct{})}
	var refused atomic.Int32
	b := newBoundedHandshakes(inner, func() { refused.Add(1) })
	b.slots = &slots{free: 1, maxQueued: 1, timeout: time.Minute}
	done := make(chan error, 3)
	handshake := func() net.Conn {
		server, client := net.Pipe()
		go func() { _, _, err := b.ServerHandshake(server); done <- err }()
		return client
	}
	handshake()
	waitFor(t, "the first handshake", func() bool { return inner.running.Load() == 1 })
	handshake()
	waitFor(t, "the second connection queued", func() bool { return queued(b.slots) == 1 })
	third := handshake()
	if err := <-done; !errors.Is(err, errHandshakeRefused) {
		t.Fatalf("third connection: %v, want it refused", err)
	}
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("the refused connection is still open")
	}
	if refused.Load() != 1 || inner.running.Load() != 1 {
		t.Fatalf("refused %d, handshakes started %d; want 1 and 1", refused.Load(), inner.running.Load())
	}
	close(inner.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("queued handshake: %v", err)
		}
	}
	if inner.running.Load() != 2 {
		t.Fatalf("handshakes %d, want 2", inner.running.Load())
	}
}

// A connection that waited too long for a slot is closed.
func TestBoundedHandshakesQueueTimeout(t *testing.T) {
	inner := &blockingCreds{release: make(chan struct{})}
	defer close(inner.release)
	b := newBoundedHandshakes(inner, nil)
	b.slots = &slots{free: 1, maxQueued: 10, timeout: 50 * time.Millisecond}
	s1, _ := net.Pipe()
	go func() { _, _, _ = b.ServerHandshake(s1) }()
	waitFor(t, "the first handshake", func() bool { return inner.running.Load() == 1 })
	s2, _ := net.Pipe()
	if _, _, err := b.ServerHandshake(s2); !errors.Is(err, errHandshakeRefused) {
		t.Fatalf("queued past the timeout: %v, want refused", err)
	}
}

// Waiting connections are served newest first; one that timed out is skipped.
func TestHandshakeSlotsServeTheNewestFirst(t *testing.T) {
	s := &slots{free: 1, maxQueued: 10, timeout: time.Minute}
	if !s.acquire() {
		t.Fatal("the free slot")
	}
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			if s.acquire() {
				order <- i
			}
		}()
		waitFor(t, "the connection queued", func() bool { return queued(s) == i+1 })
	}
	for want := 2; want >= 0; want-- {
		s.release()
		if got := <-order; got != want {
			t.Fatalf("served waiter %d, want %d (the newest)", got, want)
		}
	}
	s.release()
	s.timeout = 10 * time.Millisecond
	if !s.acquire() {
		t.Fatal("the freed slot")
	}
	if s.acquire() {
		t.Fatal("a second slot while one is held")
	}
	s.release()
	if !s.acquire() {
		t.Fatal("the slot after the timed-out waiter, which must not take it")
	}
}

func queued(s *slots) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
