package agentlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Tunnels: the hub asks an agent, on its session, to open a byte stream to a fixed target in its seed (OpenTunnel);
// the agent connects to the target and calls Tunnel on its own connection to the hub, naming the tunnel. Nothing
// connects into the seed, and each tunnel is an HTTP/2 stream of its own with its own flow control, so a slow tunnel
// holds up neither the session nor other tunnels.

// ErrNotConnected is returned by DialTunnel when the seed's agent has no session in this replica.
var ErrNotConnected = errors.New("the seed's agent is not connected")

// tunnelDialTimeout bounds how long DialTunnel waits for the agent's Tunnel call (the agent's own dial of the target
// is bounded by less).
const tunnelDialTimeout = 10 * time.Second

// pendingTunnel is a DialTunnel waiting for the agent's call.
type pendingTunnel struct {
	seed string
	// accepted receives the call's connection (or the data connection), or the agent's dial error.
	accepted chan acceptResult
	// token is the tunnel's data token (nil: none offered), good until expires; claimed once a data connection
	// presented it (tunnelMu).
	token   []byte
	expires time.Time
	claimed bool
}

type acceptResult struct {
	conn net.Conn // *tunnelConn, or the data connection's *net.TCPConn
	err  error
}

// SetTunnelPeerAddress records addr with this replica, before Run: the address at which the other replicas reach its
// SNI listener, to forward the shoot API connections of seeds whose agents have their sessions here (TunnelPeer).
func (s *Server) SetTunnelPeerAddress(addr string) { s.presence.peer = addr }

// TunnelPeer returns the SNI listener address of the other replica that serves seed's agent, "" when no other
// replica records the agent as present (package tunnel's Peers).
func (s *Server) TunnelPeer(ctx context.Context, seed string) (string, error) {
	return s.presence.tunnelPeer(ctx, seed)
}

// IsPeer reports whether host is the host of a serving replica's SNI listener address (package tunnel's Peers).
func (s *Server) IsPeer(ctx context.Context, host string) bool { return s.presence.isPeer(ctx, host) }

// newTunnelID returns a tunnel id of this replica: its tag, then random hex digits (tunnelwire.TunnelIDLen in all).
func (s *Server) newTunnelID() string {
	b := make([]byte, (tunnelwire.TunnelIDLen-replicaTagLen)/2)
	_, _ = rand.Read(b)
	return s.tag + hex.EncodeToString(b)
}

// DialTunnel asks the agent of seed to connect to target and returns the tunnel as a connection. It fails at once
// with ErrNotConnected when the seed has no session here, and with the agent's reason when it could not reach the
// target. Closing the connection ends the tunnel; when the agent's connection breaks, reads and writes fail.
func (s *Server) DialTunnel(ctx context.Context, seed string, target *agentv1.TunnelTarget) (net.Conn, error) {
	s.mu.Lock()
	ss := s.sessions[seed]
	s.mu.Unlock()
	if ss == nil {
		return nil, fmt.Errorf("seed %q: %w", seed, ErrNotConnected)
	}
	id := s.newTunnelID()
	p := &pendingTunnel{seed: seed, accepted: make(chan acceptResult, 1)}
	open := &agentv1.OpenTunnel{TunnelId: id, Target: target}
	if !s.cfg.NoDataConnections && target.GetKind() == agentv1.TunnelTarget_KIND_SHOOT_API_SERVER {
		// The bytes are the client's TLS already: a data connection may carry them (data.go).
		p.token = make([]byte, tunnelwire.DataTokenLen)
		_, _ = rand.Read(p.token)
		p.expires = time.Now().Add(dataTokenTTL)
		open.DataToken = p.token
	}
	s.tunnelMu.Lock()
	if s.pending == nil {
		s.pending = map[string]*pendingTunnel{}
	}
	s.pending[id] = p
	s.tunnelMu.Unlock()
	defer func() {
		// The Tunnel handler hands over under tunnelMu: once the entry is gone, a connection handed over but not
		// taken (this dial gave up first) is closed here, not leaked.
		s.tunnelMu.Lock()
		delete(s.pending, id)
		select {
		case r := <-p.accepted:
			if r.conn != nil {
				r.conn.Close()
			}
		default:
		}
		s.tunnelMu.Unlock()
	}()
	ss.sendControl(&agentv1.HubMessage{Message: &agentv1.HubMessage_OpenTunnel{OpenTunnel: open}})
	t := time.NewTimer(tunnelDialTimeout)
	defer t.Stop()
	select {
	case r := <-p.accepted:
		if tc, ok := r.conn.(*net.TCPConn); ok {
			return newDataConn(ss.ctx, tc), nil
		}
		return r.conn, r.err
	case <-ss.ctx.Done():
		return nil, fmt.Errorf("seed %q: the agent's session ended while opening a tunnel: %w", seed, ErrNotConnected)
	case <-t.C:
		return nil, fmt.Errorf("seed %q: the agent did not open the tunnel within %s", seed, tunnelDialTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Tunnel serves an agent's Tunnel call: it hands the stream to the DialTunnel waiting for it and returns when the
// connection is closed or the stream breaks.
func (s *Server) Tunnel(stream agentv1.AgentService_TunnelServer) error {
	ctx := stream.Context()
	id, err := s.cfg.Identify(ctx)
	if err != nil {
		return err
	}
	if id.Seed == "" {
		return status.Errorf(codes.PermissionDenied, "user %q is not a seed agent; only agents open tunnels", id.User)
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	c := newTunnelConn(ctx, stream, id.Seed)
	c.frame, c.buf = first.GetData(), first.GetData()
	res := acceptResult{conn: c}
	if msg := first.GetError(); msg != "" {
		res = acceptResult{err: fmt.Errorf("seed %q: the agent could not reach the target: %s", id.Seed, msg)}
	}
	s.tunnelMu.Lock()
	p := s.pending[first.GetTunnelId()]
	found := p != nil && p.seed == id.Seed && !p.claimed
	if found {
		delete(s.pending, first.GetTunnelId()) // one call per tunnel
		p.accepted <- res                      // buffered; DialTunnel takes it or closes it
	}
	s.tunnelMu.Unlock()
	if !found {
		// Another seed's tunnel id is as unknown as a made-up one: nobody can attach to a tunnel the hub did not
		// ask its own agent for.
		return status.Errorf(codes.NotFound, "tunnel_id %q: no tunnel of seed %q is being opened", first.GetTunnelId(), id.Seed)
	}
	if res.err != nil {
		return nil
	}
	select {
	case <-c.closed:
	case <-ctx.Done():
		c.Close()
		return ctx.Err()
	}
	// A Send must not run once the handler has returned. Wait for one in progress, but not for ever: a Send held up
	// by flow control ends when the call does.
	locked := make(chan struct{})
	go func() { c.wmu.Lock(); close(locked); c.wmu.Unlock() }() //nolint:staticcheck // the lock only orders Sends before return
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// tunnelConn is the hub's end of a tunnel as a net.Conn. Reads and writes may run concurrently; deadlines are not
// supported (SetDeadline succeeds without effect): its users bound idleness themselves.
type tunnelConn struct {
	ctx    context.Context
	stream agentv1.AgentService_TunnelServer
	seed   string

	rmu sync.Mutex
	buf []byte
	// frame is the received frame whose bytes buf holds, given back (tunnelwire.Release) once buf is written.
	frame []byte

	wmu       sync.Mutex
	closeOnce sync.Once
	closed    chan struct{}
}

func newTunnelConn(ctx context.Context, stream agentv1.AgentService_TunnelServer, seed string) *tunnelConn {
	return &tunnelConn{ctx: ctx, stream: stream, seed: seed, closed: make(chan struct{})}
}

func (c *tunnelConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.buf) == 0 {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
		}
		f, err := c.stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF // the agent half-closed: the target closed its side
		}
		if err != nil {
			return 0, fmt.Errorf("tunnel to seed %q broke: %w", c.seed, err)
		}
		c.frame, c.buf = f.GetData(), f.GetData()
	}
	n := copy(b, c.buf)
	if c.buf = c.buf[n:]; len(c.buf) == 0 {
		tunnelwire.Release(c.frame)
		c.frame = nil
	}
	return n, nil
}

// WriteTo writes what arrives to w, frame by frame, until the agent half-closes (nil) or the tunnel breaks: a copy
// without a buffer of its own, so that an idle tunnel holds none.
func (c *tunnelConn) WriteTo(w io.Writer) (int64, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var n int64
	for {
		if len(c.buf) > 0 {
			m, err := w.Write(c.buf)
			n += int64(m)
			c.buf = c.buf[m:]
			if err != nil {
				return n, err
			}
		}
		tunnelwire.Release(c.frame) // written: the frame's buffer goes back to its pool
		c.frame = nil
		f, err := c.stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("tunnel to seed %q broke: %w", c.seed, err)
		}
		c.frame, c.buf = f.GetData(), f.GetData()
	}
}

func (c *tunnelConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for len(b) > 0 {
		select {
		case <-c.closed:
			return n, net.ErrClosed
		default:
		}
		chunk := b[:min(len(b), tunnelwire.FrameSize)]
		if err := c.stream.Send(&agentv1.TunnelFrame{Data: chunk}); err != nil {
			return n, fmt.Errorf("tunnel to seed %q broke: %w", c.seed, err)
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

// Close ends the tunnel: the Tunnel call returns, and the agent closes its connection to the target.
func (c *tunnelConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *tunnelConn) LocalAddr() net.Addr                { return tunnelAddr("hub") }
func (c *tunnelConn) RemoteAddr() net.Addr               { return tunnelAddr("seed/" + c.seed) }
func (c *tunnelConn) SetDeadline(t time.Time) error      { return nil }
func (c *tunnelConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *tunnelConn) SetWriteDeadline(t time.Time) error { return nil }

// tunnelAddr names a tunnel's end.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "trellis-tunnel" }
func (a tunnelAddr) String() string  { return string(a) }
