package hubdial

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// connectProxy is a real HTTP CONNECT proxy on loopback: with status 200 it dials the target of each CONNECT and
// pipes bytes both ways, else it answers 407 and records the requests it got.
func connectProxy(t *testing.T, status int) (addr string, got chan *http.Request) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	got = make(chan *http.Request, 4)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				got <- req
				if status != http.StatusOK {
					_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
					return
				}
				target, err := net.Dial("tcp", req.Host)
				if err != nil {
					_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
					return
				}
				defer func() { _ = target.Close() }()
				_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() { _, _ = io.Copy(target, c) }()
				_, _ = io.Copy(c, target)
			}()
		}
	}()
	return lis.Addr().String(), got
}

// echoServer answers every line it reads with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { defer func() { _ = c.Close() }(); _, _ = io.Copy(c, c) }()
		}
	}()
	return lis.Addr().String()
}

func TestDialThroughProxy(t *testing.T) {
	hub := echoServer(t)
	proxyAddr, got := connectProxy(t, http.StatusOK)
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr, User: url.UserPassword("agent", "s3cret")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialVia(ctx, hub, func(*url.URL) (*url.URL, error) { return proxyURL, nil }, "")
	if err != nil {
		t.Fatalf("dial through the proxy: %v", err)
	}
	defer func() { _ = conn.Close() }()
	req := <-got
	if req.Method != http.MethodConnect || req.Host != hub {
		t.Errorf("proxy got %s %s, want CONNECT %s", req.Method, req.Host, hub)
	}
	if auth := req.Header.Get("Proxy-Authorization"); auth != "Basic YWdlbnQ6czNjcmV0" {
		t.Errorf("Proxy-Authorization = %q, want the proxy URL's credentials", auth)
	}
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("echo through the tunnel: %q, %v", line, err)
	}
}

func TestDialProxyRefuses(t *testing.T) {
	proxyAddr, _ := connectProxy(t, http.StatusProxyAuthRequired)
	_, err := dialVia(context.Background(), "hub.example:8444", func(*url.URL) (*url.URL, error) {
		return &url.URL{Scheme: "http", Host: proxyAddr}, nil
	}, "")
	if err == nil || !strings.Contains(err.Error(), "407") {
		t.Fatalf("err = %v, want the proxy's 407", err)
	}
}

func TestDialDirectWithoutProxy(t *testing.T) {
	hub := echoServer(t)
	var asked *url.URL
	conn, err := dialVia(context.Background(), hub, func(u *url.URL) (*url.URL, error) { asked = u; return nil, nil }, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if asked == nil || asked.Scheme != "https" || asked.Host != hub {
		t.Errorf("proxy asked for %v, want https://%s (HTTPS_PROXY applies)", asked, hub)
	}
}

// TestDialFirstSkipsADeadReplica: of a hub's addresses, a replica that is down (nothing listens) costs a refused
// connect, and the connection goes to one that is up, in whatever order the addresses are tried; when none is up the
// error names every attempt.
func TestDialFirstSkipsADeadReplica(t *testing.T) {
	live := echoServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	for range 20 {
		conn, err := DialFirst(context.Background(), []string{dead, live})
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.RemoteAddr().String(); got != live {
			t.Fatalf("connected to %s, want %s", got, live)
		}
		_ = conn.Close()
	}
	if _, err := DialFirst(context.Background(), []string{dead, dead}); err == nil || strings.Count(err.Error(), "refused") != 2 {
		t.Fatalf("err = %v, want two refused connects", err)
	}
}

// TestDialFirstSpreads: the addresses are tried in a random order, so a fleet's connections spread over the replicas.
func TestDialFirstSpreads(t *testing.T) {
	a, b := echoServer(t), echoServer(t)
	seen := map[string]int{}
	for range 40 {
		conn, err := DialFirst(context.Background(), []string{a, b})
		if err != nil {
			t.Fatal(err)
		}
		seen[conn.RemoteAddr().String()]++
		_ = conn.Close()
	}
	if seen[a] == 0 || seen[b] == 0 {
		t.Fatalf("connections per address %v: want both used", seen)
	}
}

// TestDialPreferred: the preferred address (the replica of the agent's session) is tried first, and when it is down
// the others are; an address that is not among the hub's is no preference.
func TestDialPreferred(t *testing.T) {
	a, b := echoServer(t), echoServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	seen := map[string]int{}
	for _, c := range []struct {
		addrs     []string
		preferred string
	}{{[]string{a, b}, b}, {[]string{dead, a}, dead}, {[]string{a, b}, "10.0.0.1:8444"}} {
		for range 20 {
			conn, err := dialPreferred(context.Background(), c.addrs, c.preferred)
			if err != nil {
				t.Fatal(err)
			}
			got := conn.RemoteAddr().String()
			_ = conn.Close()
			if c.preferred == b && got != b || c.preferred == dead && got != a {
				t.Fatalf("preferring %s of %v: connected to %s", c.preferred, c.addrs, got)
			}
			if c.preferred == "10.0.0.1:8444" {
				seen[got]++
			}
		}
	}
	if seen[a] == 0 || seen[b] == 0 {
		t.Errorf("without a preference among the addresses, connections per address %v: want both used", seen)
	}
	if _, err := dialPreferred(context.Background(), []string{dead}, dead); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err = %v, want the preferred address's refused connect", err)
	}
}
