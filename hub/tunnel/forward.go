package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Peers finds the other hub replicas' SNI listeners and serves data connections (hub/agentlink's Server): a seed's
// agent has its session with one replica, and a client's connection that reaches another is forwarded to that one;
// so is a tunnel's data connection that the agent opened to another replica (that replica sends it on here).
type Peers interface {
	// TunnelPeer returns the SNI listener address of the other replica that serves seed's agent, "" when no other
	// replica does.
	TunnelPeer(ctx context.Context, seed string) (string, error)
	// IsPeer reports whether host (an IP address) is the host of a replica's SNI listener address.
	IsPeer(ctx context.Context, host string) bool
	// ServeForwardedData serves a data connection that another replica forwarded (it begins with the data preface),
	// as the agent port serves one, and owns c.
	ServeForwardedData(ctx context.Context, c net.Conn)
}

// forwardPreface starts a connection that a replica forwards to the replica serving the seed's agent, before the
// client's ClientHello. Its first byte starts neither a ClientHello (a TLS record begins with its content type, 0x16)
// nor a data preface ('T'). It is honoured only from a replica's own host, and it says: do not forward again, and the
// forwarding replica has counted the client's tunnels.
const forwardPreface = "FORWARDED TRELLIS-TUNNEL/1\n"

// forwardTimeout bounds the connect to the other replica.
const forwardTimeout = 5 * time.Second

// connKind is what a connection on the SNI listener begins with.
type connKind int

const (
	clientHello    connKind = iota // a client's, or anything else: the ClientHello parser decides
	forwardedHello                 // forwardPreface, then a client's ClientHello
	forwardedData                  // a data preface (tunnelwire), forwarded by the replica the agent opened it to
)

// sniff reads the forward preface if c begins with one and returns what c begins with and the connection to read the
// rest from. A connection that begins with the preface's first byte but not with the whole preface, or whose preface
// comes from a host that is no replica's, is an error.
func (t *Tunnels) sniff(ctx context.Context, c net.Conn) (connKind, net.Conn, error) {
	first, c, err := tunnelwire.PeekByte(c)
	switch {
	case err != nil:
		return clientHello, c, err
	case first == tunnelwire.DataPrefaceMagic[0]:
		return forwardedData, c, nil
	case first != forwardPreface[0]:
		return clientHello, c, nil
	}
	b := make([]byte, len(forwardPreface))
	if _, err := io.ReadFull(c, b); err != nil {
		return clientHello, c, fmt.Errorf("forward preface: %w", err)
	}
	if string(b) != forwardPreface {
		return clientHello, c, errors.New("neither a TLS ClientHello nor a replica's forward preface")
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	if t.cfg.Peers == nil || !t.cfg.Peers.IsPeer(ctx, host) {
		return clientHello, c, fmt.Errorf("a forward preface from %s, which is no hub replica's host", host)
	}
	return forwardedHello, c, nil
}

// forward connects to the replica that serves seed's agent, if another one does, and sends it the forward preface
// and the client's ClientHello: that replica opens the tunnel, and c's bytes go through it untouched. It returns nil
// when no other replica serves the seed.
func (t *Tunnels) forward(ctx context.Context, seed string, hello []byte) (net.Conn, error) {
	if t.cfg.Peers == nil {
		return nil, nil
	}
	addr, err := t.cfg.Peers.TunnelPeer(ctx, seed)
	if err != nil || addr == "" {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("forward to the replica at %s: %w", addr, err)
	}
	if _, err := up.Write(append([]byte(forwardPreface), hello...)); err != nil {
		_ = up.Close()
		return nil, fmt.Errorf("forward to the replica at %s: %w", addr, err)
	}
	return up, nil
}
