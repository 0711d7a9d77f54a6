package agent

import (
	"crypto/tls"
	"fmt"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Keepalive parameters of the hub connection: a ping after 30 s without traffic, the connection is dead when the ping
// is not answered within 10 s. Application heartbeats are what load balancers see; keepalive finds dead peers.
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	maxMessage       = 16 << 20
)

// dial returns a client connection to the hub. With mTLS it presents the Holder's current certificate at each
// handshake; for bootstrap (mTLS false) it presents none. The hub is verified with the configured CA bundle and the
// CA of creds, when there are any.
func (a *Agent) dial(creds *identity.Credentials, mTLS bool) (*grpc.ClientConn, error) {
	configured, err := a.cfg.HubClientConnection.CAPEM()
	if err != nil {
		return nil, err
	}
	var held []byte
	if creds != nil {
		held = creds.CAPEM
	}
	pool, err := identity.Pool(configured, held)
	if err != nil {
		return nil, fmt.Errorf("hub CA bundle: %w", err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if mTLS {
		tlsCfg.GetClientCertificate = a.creds.GetClientCertificate
		tlsCfg.ClientSessionCache = a.sessionCache(a.creds.Get())
	}
	conn, err := grpc.NewClient(a.cfg.HubClientConnection.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		// The agent's calls carry the trace of the work they belong to (a shoot's flow) to the hub.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithUserAgent("trellis-agent/"+a.version),
		// Assignment batches are at most 1 MiB, but one object may be larger; the hub accepts 16 MiB messages.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
		// A blackholed hub must not hold a reconnect for gRPC's default 20 s connect timeout.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second, Backoff: backoff.DefaultConfig}),
		// Tunnels move bulk bytes: buffers that are not zeroed on every use (docs/tunnels.md).
		experimental.WithBufferPool(tunnelwire.BufferPool),
	)
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	return conn, nil
}

// sessionCache returns the TLS session cache for creds: reconnects with the same certificate resume their TLS session
// (cheap for the hub, which accepts its tickets across restarts); a new certificate starts a new cache, as a resumed
// session would carry the old identity.
func (a *Agent) sessionCache(creds *identity.Credentials) tls.ClientSessionCache {
	a.tlsMu.Lock()
	defer a.tlsMu.Unlock()
	if a.tlsFor != creds || a.tlsSessions == nil {
		a.tlsFor, a.tlsSessions = creds, tls.NewLRUClientSessionCache(4)
	}
	return a.tlsSessions
}
