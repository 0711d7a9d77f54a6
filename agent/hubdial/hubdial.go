package hubdial

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"golang.org/x/net/http/httpproxy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

const (
	// DialTimeout bounds the TCP connect: a blackholed or absent hub fails fast.
	DialTimeout = 5 * time.Second
	// HandshakeTimeout bounds the TLS handshake and HTTP/2 preface after the TCP connect. It is generous: a hub in a
	// reconnect storm queues handshakes (it bounds how many it works on at once), and an agent that gives up on a
	// handshake that is progressing throws away the work done for it and adds another to the queue.
	HandshakeTimeout = 60 * time.Second
	// KeepaliveTime is the idle time after which the agent pings the hub; KeepaliveTimeout is how long it waits
	// for the answer before it declares the connection dead. Application heartbeats are what load balancers see;
	// keepalive finds dead peers.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
	// MaxMessage is the largest message either side accepts: assignment batches are at most 1 MiB, but one object
	// may be larger; the hub accepts 16 MiB messages.
	MaxMessage = 16 << 20
	// window is the receive window of the session stream: a whole assignment batch fits, and the fixed size turns
	// off gRPC's bandwidth-delay estimation, which would answer the data of every heartbeat ack with a ping.
	window = 1 << 20
)

// Options are the dial options of a connection to the hub with TLS configuration tc.
func Options(tc *tls.Config) []grpc.DialOption {
	return []grpc.DialOption{
		// A write of the transport leaves in one system call, not one per TLS record (tunnels move bulk bytes).
		grpc.WithTransportCredentials(tunnelwire.BatchRecords(credentials.NewTLS(tc))),
		grpc.WithWriteBufferSize(tunnelwire.WriteBufferSize),
		grpc.WithContextDialer(Dial),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		grpc.WithInitialWindowSize(window),
		grpc.WithInitialConnWindowSize(window),
		// The agent's own backoff (agent/backoff) spaces its attempts; the connect timeout is the handshake's.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: HandshakeTimeout, Backoff: backoff.DefaultConfig}),
	}
}

// Target is the gRPC target of the hub at address (host:port). gRPC sees one address, and the agent's dialer picks one
// of the name's addresses itself (DialFirst): with a name of several addresses — one per hub replica — gRPC's
// pick_first would start a connection to the next address whenever one has not become ready within 250 ms (Happy
// Eyeballs), and in a reconnect storm, when TLS handshakes queue at the hub, that multiplies them.
func Target(address string) string { return "passthrough:///" + address }

// Dial opens a TCP connection to the hub at addr within DialTimeout (through the HTTP CONNECT proxy of the
// environment, if any): the gRPC connections' dialer, whose handshake has the rest of the connect deadline
// (HandshakeTimeout), and the dialer of tunnels' data connections.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	return dialVia(ctx, addr, httpproxy.FromEnvironment().ProxyFunc(), "")
}

// DialPreferring is Dial trying preferred (host:port) first when it is one of addr's addresses, then the others in a
// random order: a tunnel's data connection goes to the hub replica that holds the agent's session (the address its
// connection reached), which would otherwise forward it to that replica, one relay more (docs/tunnels.md). Through a
// proxy, or when preferred is not among addr's addresses (a load balancer's), it is Dial.
func DialPreferring(ctx context.Context, addr, preferred string) (net.Conn, error) {
	return dialVia(ctx, addr, httpproxy.FromEnvironment().ProxyFunc(), preferred)
}

// dialVia connects to addr, through the HTTP CONNECT proxy that proxyFor names for it, as gRPC's own dialer does with
// HTTPS_PROXY and NO_PROXY (a custom dialer turns gRPC's off): seeds behind firewalls often reach the hub only through a
// proxy. The TCP connect (to the proxy, or to the hub) is bounded by DialTimeout; the CONNECT exchange by the
// handshake's deadline in ctx.
func dialVia(ctx context.Context, addr string, proxyFor func(*url.URL) (*url.URL, error), preferred string) (net.Conn, error) {
	d := net.Dialer{Timeout: DialTimeout}
	proxy, err := proxyFor(&url.URL{Scheme: "https", Host: addr})
	if err != nil {
		return nil, fmt.Errorf("proxy for %s: %w", addr, err)
	}
	if proxy == nil {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		hosts, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
		addrs := make([]string, len(hosts))
		for i, h := range hosts {
			addrs[i] = net.JoinHostPort(h, port)
		}
		return dialPreferred(ctx, addrs, preferred)
	}
	proxyAddr := proxy.Host
	if proxy.Port() == "" {
		proxyAddr = net.JoinHostPort(proxy.Hostname(), "80")
	}
	conn, err := d.DialContext(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	if err := connect(ctx, conn, addr, proxy); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	return conn, nil
}

// DialFirst opens a TCP connection to the first of addrs (host:port each) that accepts one within DialTimeout, trying
// them one after another in a random order: a fleet spreads over the hub's replicas, and a replica that is down costs a
// refused connect. Only TCP connects are tried in turn; the TLS handshake follows once, with the replica that
// accepted.
func DialFirst(ctx context.Context, addrs []string) (net.Conn, error) {
	return dialPreferred(ctx, addrs, "")
}

// dialPreferred is DialFirst trying preferred first when it is one of addrs.
func dialPreferred(ctx context.Context, addrs []string, preferred string) (net.Conn, error) {
	addrs = append([]string(nil), addrs...)
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	if i := slices.Index(addrs, preferred); i > 0 {
		addrs[0], addrs[i] = addrs[i], addrs[0]
	}
	d := net.Dialer{Timeout: DialTimeout}
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, "tcp", a)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no hub address")
	}
	return nil, errors.Join(errs...)
}

// connect asks the proxy on conn for a tunnel to addr (HTTP CONNECT, with Basic credentials from the proxy URL).
func connect(ctx context.Context, conn net.Conn, addr string, proxy *url.URL) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: addr}, Host: addr, Header: http.Header{}}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CONNECT %s: %s", addr, resp.Status)
	}
	if br.Buffered() > 0 {
		return fmt.Errorf("CONNECT %s: the proxy sent data before the tunnel opened", addr)
	}
	return nil
}
