package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	"github.com/trellis-dev/trellis/agent/hubdial"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
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
	opts := hubdial.Options(tlsCfg)
	if mTLS {
		// The session's connection: data connections go to the replica it reached (dataConnection).
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := hubdial.Dial(ctx, addr)
			if err == nil {
				a.sessionHub.Store(c.RemoteAddr().String())
			}
			return c, err
		}))
	}
	// The TCP connect fails fast, the TLS handshake may take long in a hub's reconnect storm (package hubdial).
	conn, err := grpc.NewClient(hubdial.Target(a.cfg.HubClientConnection.Address), append(opts,
		// The agent's calls carry the trace of the work they belong to (a shoot's flow) to the hub.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithUserAgent("trellis-agent/"+a.version),
		// Tunnels move bulk bytes: buffers that are not zeroed on every use (docs/tunnels.md).
		experimental.WithBufferPool(tunnelwire.BufferPool),
	)...)
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
