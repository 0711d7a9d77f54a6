package tunnel

import (
	"context"
	"net"
	"testing"
	"time"
)

// pipe closes a tunnel in which nothing moved for the idle timeout, and only then: traffic in either direction keeps
// it open.
func TestPipeIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	tu, err := New(Config{Dialer: noDialer{}, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	client, hubSide := net.Pipe()
	up, target := net.Pipe()
	defer client.Close()
	defer target.Close()
	done := make(chan struct{})
	go func() { tu.pipe(context.Background(), hubSide, up, kindShootAPI); close(done) }()

	// Traffic every idle/4, from the client and back from the target, for three idle timeouts: still open.
	b := make([]byte, 1)
	start := time.Now()
	for time.Since(start) < 3*idle {
		if _, err := client.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		if _, err := target.Read(b); err != nil {
			t.Fatalf("the tunnel closed while busy: %v", err)
		}
		if _, err := target.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Read(b); err != nil {
			t.Fatalf("the tunnel closed while busy: %v", err)
		}
		time.Sleep(idle / 4)
	}
	// Then nothing: it closes, both ends see it.
	select {
	case <-done:
	case <-time.After(10 * idle):
		t.Fatal("the idle tunnel is still open")
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(b); err == nil {
		t.Fatal("the client's connection is open after the idle timeout")
	}
}
