package hubdial

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
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
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(dialTCP),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)),
		grpc.WithInitialWindowSize(window),
		grpc.WithInitialConnWindowSize(window),
		// The agent's own backoff (agent/backoff) spaces its attempts; the connect timeout is the handshake's.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: HandshakeTimeout, Backoff: backoff.DefaultConfig}),
	}
}

// dialTCP opens the TCP connection within DialTimeout; the handshake that follows has the rest of the connect
// deadline (HandshakeTimeout).
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: DialTimeout}
	return d.DialContext(ctx, "tcp", addr)
}
