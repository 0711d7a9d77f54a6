package tunnel

import (
	"context"
	"net"
	"testing"
	"time"
)

// pipe closes a tunnel in which nothing moved for the idle timeout, and only then: traffic in either direction keeps
// it open. Both ways of copying: between TCP connections (splice, a data connection) and otherwise (a Tunnel call).
func TestPipeIdleTimeout(t *testing.T) {
	for name, pair := range map[string]func(t *testing.T) (net.Conn, net.Conn){
		"pipes": func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() },
		"tcp":   tcpPair,
	} {
		t.Run(name, func(t *testing.T) {
			const idle = 500 * time.Millisecond
			tu, err := New(Config{Dialer: noDialer{}, IdleTimeout: idle})
			if err != nil {
				t.Fatal(err)
			}
			client, hubSide := pair(t)
			up, target := pair(t)
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
		})
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	a, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
