package agentlink

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Data connections: a passthrough tunnel's bytes are the client's TLS end to end, so they need not be encrypted a
// second time by the agent link. For such a tunnel DialTunnel hands the agent a single-use token with OpenTunnel, over
// its authenticated session; the agent connects to the port it reaches the hub at, presents the token in the data
// preface, and the hub answers DataAccepted and hands the TCP connection to DialTunnel, whose caller splices the
// client's connection to it (docs/tunnels.md). An agent that cannot, or whose preface is refused, calls Tunnel as
// without a token.

const (
	// dataTokenTTL is how long a data token is good for after OpenTunnel was sent.
	dataTokenTTL = 5 * time.Second
	// sniffTimeout bounds the wait for a connection's first byte on the agent port (TLS or a data preface).
	sniffTimeout = 10 * time.Second
	// dataPrefaceTimeout bounds the rest of a data preface and the hub's answer.
	dataPrefaceTimeout = 5 * time.Second
)

// Listener returns lis with the data connections of tunnels taken out: its Accept returns the other connections (TLS:
// their first byte is a handshake record's, 0x16), untouched; connections that begin with the data preface are served
// by the agent link. Serve the hub's ports that agents reach on it.
func (s *Server) Listener(lis net.Listener) net.Listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &dataListener{Listener: lis, s: s, conns: make(chan net.Conn), errs: make(chan error), ctx: ctx, cancel: cancel}
}

// dataListener sorts a listener's connections by their first byte. One goroutine accepts (started by the first
// Accept), one per connection reads its first byte (and serves a data preface); Close ends and waits for them.
type dataListener struct {
	net.Listener
	s      *Server
	start  sync.Once
	conns  chan net.Conn
	errs   chan error
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *dataListener) Accept() (net.Conn, error) {
	l.start.Do(func() { l.wg.Go(l.accept) })
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// accept accepts connections until the listener is closed and sorts each in a goroutine of its own, so that a slow
// first byte holds up no other connection.
func (l *dataListener) accept() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err: // the server decides (it retries temporary errors)
			case <-l.ctx.Done():
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.wg.Go(func() { l.sort(c) })
	}
}

func (l *dataListener) sort(c net.Conn) {
	stop := context.AfterFunc(l.ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	first, c, err := tunnelwire.PeekByte(c)
	if err == nil && first == tunnelwire.DataPrefaceMagic[0] {
		l.s.serveData(l.ctx, c, true)
		stop()
		return
	}
	if !stop() || err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case l.conns <- c:
	case <-l.ctx.Done():
		_ = c.Close()
	}
}

// Close closes the listener and waits for its goroutines; connections it sorted but did not hand out are closed.
func (l *dataListener) Close() error {
	l.cancel()
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// serveData serves a data connection: it reads the preface and, if the token is good, answers DataAccepted and hands
// the connection to the DialTunnel waiting for it; otherwise it closes the connection. A connection for a tunnel of
// another replica (the agent reached this one: a load balancer, or a name of several addresses) is sent on to that
// replica's SNI listener, when mayForward (it came from an agent, not from another replica), and relayed until it
// ends or ctx does. Every outcome is counted.
func (s *Server) serveData(ctx context.Context, c net.Conn, mayForward bool) {
	result, up := s.acceptData(ctx, c, mayForward)
	s.metrics.dataConns.WithLabelValues(result).Inc()
	switch {
	case up != nil:
		relay(ctx, c, up)
	case result != "accepted":
		_ = c.Close()
		s.cfg.Log.Info("tunnel data connection refused", "remote", c.RemoteAddr().String(), "reason", result)
	}
}

// ServeForwardedData serves a data connection that another replica forwarded to this one's SNI listener (package
// tunnel's Peers): as one from an agent, but never forwarded again.
func (s *Server) ServeForwardedData(ctx context.Context, c net.Conn) { s.serveData(ctx, c, false) }

// acceptData reads c's data preface and claims its tunnel (result "accepted"), or forwards it (result "forwarded",
// and the connection to the tunnel's replica), or says why not.
func (s *Server) acceptData(ctx context.Context, c net.Conn, mayForward bool) (string, net.Conn) {
	_ = c.SetDeadline(time.Now().Add(dataPrefaceTimeout))
	id, token, err := tunnelwire.ReadDataPreface(c)
	if err != nil {
		return "bad-preface", nil
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "bad-preface", nil // only TCP connections are spliced; a listener of others gets none
	}
	p, result := s.claimData(id, token)
	if p == nil {
		if result == "unknown" && mayForward && id[:replicaTagLen] != s.tag {
			if up := s.forwardData(ctx, id, token); up != nil {
				_ = c.SetDeadline(time.Time{})
				return "forwarded", up
			}
		}
		return result, nil
	}
	_, err = c.Write([]byte(tunnelwire.DataAccepted))
	_ = c.SetDeadline(time.Time{})
	s.tunnelMu.Lock()
	defer s.tunnelMu.Unlock()
	if s.pending[id] != p {
		return "gone", nil // DialTunnel gave up meanwhile
	}
	delete(s.pending, id)
	if err != nil {
		p.accepted <- acceptResult{err: err}
		return "gone", nil
	}
	p.accepted <- acceptResult{conn: tc} // buffered; DialTunnel takes it or closes it
	return "accepted", nil
}

// forwardData connects to the SNI listener of the replica whose tunnel id is id and sends it the data preface, nil
// when that replica is unknown or unreachable (the agent then falls back to the agent link).
func (s *Server) forwardData(ctx context.Context, id string, token []byte) net.Conn {
	if s.presence == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, dataPrefaceTimeout)
	defer cancel()
	addr, err := s.presence.peerByTag(ctx, id[:replicaTagLen])
	if err != nil || addr == "" {
		return nil
	}
	preface, err := tunnelwire.DataPreface(id, token)
	if err != nil {
		return nil
	}
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		s.cfg.Log.Info("tunnel data connection not forwarded", "replica", addr, "err", err)
		return nil
	}
	if _, err := up.Write(preface); err != nil {
		_ = up.Close()
		return nil
	}
	return up
}

// relay copies both ways between a forwarded data connection and the connection to its replica until both directions
// ended or ctx does: an end (FIN) is passed on as a half-close, a broken connection (a reset: the agent's end of a
// data connection ends so) breaks the other with a reset too.
func relay(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() { _ = a.Close(); _ = b.Close() })
	defer stop()
	one := func(dst, src net.Conn) {
		_, err := tunnelwire.Splice(dst, src, nil)
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = dst.Close()
			_ = src.Close()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { one(a, b) })
	one(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// claimData checks a data preface's token against the pending tunnel it names, in constant time, and claims the
// tunnel for it: no Tunnel call and no other data connection can take it afterwards. It returns the tunnel, or nil and
// why it refused.
func (s *Server) claimData(id string, token []byte) (*pendingTunnel, string) {
	s.tunnelMu.Lock()
	defer s.tunnelMu.Unlock()
	now := time.Now()
	for used, until := range s.usedTokens {
		if now.After(until) {
			delete(s.usedTokens, used)
		}
	}
	p := s.pending[id]
	switch {
	case p == nil || p.token == nil:
		if _, ok := s.usedTokens[id]; ok {
			return nil, "reused"
		}
		return nil, "unknown"
	case subtle.ConstantTimeCompare(token, p.token) != 1:
		return nil, "bad-token"
	case p.claimed:
		return nil, "reused"
	case now.After(p.expires):
		return nil, "expired"
	}
	p.claimed = true
	if s.usedTokens == nil {
		s.usedTokens = map[string]time.Time{}
	}
	s.usedTokens[id] = p.expires
	return p, ""
}

// dataConn is the hub's end of a tunnel's data connection: the TCP connection, handed to tunnelwire.Splice by TCP.
// When the agent's session ends it breaks, as a Tunnel call does with the session: the connection is closed and the
// function given to OnBreak runs (the agent's end of a data connection may have ended with a FIN, which alone would
// read as the target's half-close).
type dataConn struct {
	*net.TCPConn
	session context.Context
	mu      sync.Mutex
	stop    func() bool // stops the session's AfterFunc
}

func newDataConn(session context.Context, c *net.TCPConn) *dataConn {
	return &dataConn{TCPConn: c, session: session, stop: context.AfterFunc(session, func() { _ = c.Close() })}
}

// TCP is the connection for splicing (tunnelwire.TCPConner).
func (d *dataConn) TCP() *net.TCPConn { return d.TCPConn }

// OnBreak makes f run when the agent's session ends while the connection is open; at once when it has ended (or the
// connection was closed).
func (d *dataConn) OnBreak(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stop() {
		f()
		return
	}
	c := d.TCPConn
	d.stop = context.AfterFunc(d.session, func() { _ = c.Close(); f() })
}

func (d *dataConn) Close() error {
	d.mu.Lock()
	stop := d.stop
	d.mu.Unlock()
	stop()
	return d.TCPConn.Close()
}
