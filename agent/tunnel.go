package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent/hubdial"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Tunnels (docs/tunnels.md): the hub asks on the session (OpenTunnel) for a byte stream to a target in the seed; the
// agent validates the target's kind, resolves the address itself, connects, and opens a Tunnel call to the hub on its
// own connection for it. The hub never names an address: only the seed's kube-apiserver and the Service
// kube-apiserver of a shoot namespace can be reached.

// Fixed names of tunnel targets.
const (
	// ShootAPIServerService is the Service of a shoot's kube-apiserver in its namespace, as Gardener names it.
	ShootAPIServerService = "kube-apiserver"
	// tunnelTargetTimeout bounds the connection to a target.
	tunnelTargetTimeout = 5 * time.Second
)

// shootNamespace is Gardener's technical id of a shoot: shoot--<project>--<name>.
var shootNamespace = regexp.MustCompile(`^shoot--[a-z0-9]([-a-z0-9]*[a-z0-9])?--[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// errNoImpersonation refuses seed API requests the hub did not attribute to a user.
var errNoImpersonation = errors.New("seed API requests through the hub must name the hub user in Impersonate-User")

// openTunnel serves one OpenTunnel: it reaches the target and carries the tunnel until either side ends it. It runs
// in the session's tunnel group and ends with ctx. A passthrough tunnel offered a data token goes over a data
// connection when one can be made (dataConnection), else, as every other tunnel, over a Tunnel call.
func (s *session) openTunnel(ctx context.Context, conn grpc.ClientConnInterface, m *agentv1.OpenTunnel) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := s.log.With("tunnel", m.GetTunnelId(), "target", m.GetTarget().GetKind().String())
	serve, raw, err := s.a.tunnelTarget(ctx, m.GetTarget())
	if err == nil && raw != nil && len(m.GetDataToken()) > 0 && time.Now().UnixNano() >= s.dataPause.Load() {
		dc, derr := s.a.dataConnection(ctx, m.GetTunnelId(), m.GetDataToken())
		if derr == nil {
			pipe(ctx, dc, raw)
			log.Debug("tunnel ended")
			return
		}
		// Whatever refused it (a middlebox that passes only TLS, another replica behind the address) likely refuses
		// the next: the session's tunnels use the agent link for a while instead of each waiting for a failure.
		s.dataPause.Store(time.Now().Add(dataConnectPause).UnixNano())
		log.Info("no data connection; the session's tunnels go over the agent link for a while", "err", derr, "for", dataConnectPause)
	}
	if raw != nil {
		defer raw.Close() // until pipe owns it
	}
	// The frames' codec spares a copy and a zeroed buffer per frame (docs/tunnels.md).
	stream, serr := agentv1.NewAgentServiceClient(conn).Tunnel(ctx, grpc.ForceCodecV2(tunnelwire.Codec))
	if serr != nil {
		log.Warn("tunnel call failed", "err", serr)
		return
	}
	first := &agentv1.TunnelFrame{TunnelId: m.GetTunnelId()}
	if err != nil {
		first.Error = err.Error()
		log.Warn("tunnel target unreachable", "err", err)
	}
	if err := stream.Send(first); err != nil || first.Error != "" {
		_ = stream.CloseSend()
		_, _ = stream.Recv() // the hub ends the call
		return
	}
	tc := &agentTunnelConn{stream: stream, cancel: cancel, done: ctx.Done()}
	if raw != nil {
		pipe(ctx, tc, raw)
	} else {
		serve(ctx, tc)
	}
	log.Debug("tunnel ended")
}

// dataConnectTimeout bounds a data connection: the connect to the hub, the preface and the hub's answer. Beyond it
// the tunnel falls back to a Tunnel call while the hub still waits for one.
const dataConnectTimeout = 3 * time.Second

// dataConnectPause is how long a session's tunnels go over the agent link after a data connection failed.
const dataConnectPause = time.Minute

// dataConnection opens the data connection of tunnel id (docs/tunnels.md): a TCP connection to the address the agent
// reaches the hub at (of its addresses, the one the session's connection reached first), on which it presents the tunnel's single-use token and waits for the hub's acceptance; the
// connection then carries the tunnel's bytes as they are (the client's TLS, end to end).
func (a *Agent) dataConnection(ctx context.Context, id string, token []byte) (halfCloser, error) {
	preface, err := tunnelwire.DataPreface(id, token)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dataConnectTimeout)
	defer cancel()
	hub, _ := a.sessionHub.Load().(string)
	nc, err := hubdial.DialPreferring(ctx, a.cfg.HubClientConnection.Address, hub)
	if err != nil {
		return nil, err
	}
	c, ok := nc.(halfCloser)
	if !ok {
		_ = nc.Close()
		return nil, fmt.Errorf("data connection: a %T cannot half-close", nc)
	}
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	answer := make([]byte, len(tunnelwire.DataAccepted))
	if _, err = c.Write(preface); err == nil {
		_, err = io.ReadFull(c, answer)
	}
	if err == nil && string(answer) != tunnelwire.DataAccepted {
		err = fmt.Errorf("the hub answered %q", answer)
	}
	if err != nil || !stop() {
		_ = c.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("data connection: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// tunnelTarget validates target and returns what serves the tunnel's connection for it, or, for a target that
// carries raw bytes, the connection to it; or why it cannot be reached.
func (a *Agent) tunnelTarget(ctx context.Context, target *agentv1.TunnelTarget) (func(context.Context, *agentTunnelConn), net.Conn, error) {
	switch target.GetKind() {
	case agentv1.TunnelTarget_KIND_SEED_API_SERVER:
		h, err := a.seedAPIProxy()
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, c *agentTunnelConn) { serveHTTP(ctx, c, h) }, nil, nil
	case agentv1.TunnelTarget_KIND_SHOOT_API_SERVER:
		addr, err := a.shootAPIServerAddress(ctx, target.GetShootNamespace())
		if err != nil {
			return nil, nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, tunnelTargetTimeout)
		defer cancel()
		tcp, err := a.dialService(dctx, "tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dial %s/%s (%s): %w", target.GetShootNamespace(), ShootAPIServerService, addr, err)
		}
		return nil, tcp, nil
	}
	return nil, nil, fmt.Errorf("target.kind: %s is not a tunnel target", target.GetKind())
}

// shootAPIServerAddress resolves the Service kube-apiserver of a shoot namespace to its cluster IP and port (the one
// named kube-apiserver, else 443, else the only one).
func (a *Agent) shootAPIServerAddress(ctx context.Context, namespace string) (string, error) {
	if !shootNamespace.MatchString(namespace) {
		return "", fmt.Errorf("target.shoot_namespace: %q is not a shoot namespace (shoot--<project>--<name>)", namespace)
	}
	svc, err := a.seedClient.CoreV1().Services(namespace).Get(ctx, ShootAPIServerService, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", namespace, ShootAPIServerService, err)
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == "None" {
		return "", fmt.Errorf("service %s/%s has no cluster IP", namespace, ShootAPIServerService)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == ShootAPIServerService || (port == 0 && p.Port == 443) {
			port = p.Port
		}
	}
	if port == 0 && len(svc.Spec.Ports) == 1 {
		port = svc.Spec.Ports[0].Port
	}
	if port == 0 {
		return "", fmt.Errorf("service %s/%s: no port named %s or 443", namespace, ShootAPIServerService, ShootAPIServerService)
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(port))), nil
}

// seedAPIProxy is the reverse proxy to the seed's kube-apiserver for seed API tunnels, built once. It forwards with
// the agent's own seed credentials, over HTTP/2 but upgrades for exec, attach and port-forward over HTTP/1.1 (where
// they pass through),
// requires the hub's Impersonate-User and drops any Authorization the request carries.
func (a *Agent) seedAPIProxy() (http.Handler, error) {
	a.proxyOnce.Do(func() {
		if a.seedREST == nil {
			a.proxyErr = errors.New("the agent has no seed REST configuration")
			return
		}
		cfg := rest.CopyConfig(a.seedREST)
		// No client-side limits: the user's requests are the seed's to limit.
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		// Requests go over HTTP/2, all on one connection (a thousand open watches are a thousand streams, not a
		// thousand TLS connections); upgrades over HTTP/1.1, where they pass through untouched.
		rt2, err := rest.TransportFor(cfg)
		if err != nil {
			a.proxyErr = fmt.Errorf("seed transport: %w", err)
			return
		}
		cfg.NextProtos = []string{"http/1.1"}
		rt1, err := rest.TransportFor(cfg)
		if err != nil {
			a.proxyErr = fmt.Errorf("seed transport: %w", err)
			return
		}
		rt := roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("Upgrade") != "" {
				return rt1.RoundTrip(r)
			}
			return rt2.RoundTrip(r)
		})
		host, _, err := rest.DefaultServerUrlFor(cfg)
		if err != nil {
			a.proxyErr = fmt.Errorf("seed server: %w", err)
			return
		}
		target := &url.URL{Scheme: host.Scheme, Host: host.Host, Path: host.Path}
		rp := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Header.Del("Authorization") // the seed credentials are the transport's
			},
			Transport:     rt,
			FlushInterval: -1, // watches and logs -f stream
			ErrorLog:      slog.NewLogLogger(a.log.With("component", "tunnel").Handler(), slog.LevelDebug),
		}
		a.proxy = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Impersonate-User") == "" {
				http.Error(w, errNoImpersonation.Error(), http.StatusForbidden)
				return
			}
			if !streaming(r) {
				w = unflushed{w}
			}
			rp.ServeHTTP(w, r)
		})
	})
	return a.proxy, a.proxyErr
}

// streaming says whether a request's response streams (watches, logs -f, upgrades) and so is flushed through the
// tunnel as it arrives.
func streaming(r *http.Request) bool {
	q := r.URL.Query()
	return q.Get("watch") == "true" || q.Get("watch") == "1" || q.Get("follow") == "true" || r.Header.Get("Upgrade") != ""
}

// unflushed is the response of a request that does not stream: the proxy's flushes (it flushes every write of a
// response of unknown length) do nothing, so that the response leaves in as few tunnel frames as its size allows — a
// small one, headers, body and end, in one instead of two, which the hub then has at once. Server-sent events
// (text/event-stream) are flushed.
type unflushed struct{ http.ResponseWriter }

func (u unflushed) FlushError() error {
	if strings.HasPrefix(u.Header().Get("Content-Type"), "text/event-stream") {
		return http.NewResponseController(u.ResponseWriter).Flush()
	}
	return nil
}

// roundTripper is a function as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serveHTTP serves HTTP/1.1 requests arriving on the tunnel with h until the tunnel ends.
func serveHTTP(ctx context.Context, c *agentTunnelConn, h http.Handler) {
	lis := &oneConnListener{conn: c, closed: make(chan struct{})}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				lis.Close()
			}
		}}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	_ = srv.Serve(lis)
	<-lis.closed
	_ = srv.Close()
}

// oneConnListener accepts one connection, then blocks until it is closed.
type oneConnListener struct {
	mu     sync.Mutex
	conn   net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return tunnelAddr("agent") }

// pipe copies between the tunnel (a Tunnel call's connection, or a data connection) and the target until the hub
// ends the tunnel or either side fails; when the target closes its side the agent half-closes toward the hub. It
// copies toward the hub itself and toward the target in one goroutine. Between a data connection and the target (both
// TCP) the bytes move with splice(2); over a Tunnel call it holds no buffer while the tunnel is idle: the target is
// read into a pooled buffer only once it has bytes, the hub's frames are written to the target as they arrive
// (agentTunnelConn.WriteTo). See tunnelwire.Splice.
func pipe(ctx context.Context, c halfCloser, target net.Conn) {
	defer target.Close()
	defer c.Close()
	stop := context.AfterFunc(ctx, func() {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a data connection ends with a reset, which the hub does not take for a half-close
		}
		_ = c.Close()
		_ = target.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		// The hub never half-closes: the end of its side (EOF when it ended the call) ends the tunnel.
		_, _ = tunnelwire.Splice(target, c, nil)
		_ = target.Close()
		_ = c.Close()
	})
	if _, err := tunnelwire.Splice(c, target, nil); err != nil {
		_ = target.Close()
		_ = c.Close()
	} else {
		_ = c.CloseWrite()
	}
	wg.Wait()
}

// halfCloser is a tunnel's connection toward the hub.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// agentTunnelConn is the agent's end of a tunnel as a net.Conn. Its read deadline is real: net/http's server sets
// one in the past to stop its background read when a handler hijacks the connection (the upgrades of exec, attach
// and port-forward), and waits for that read to return; a no-op deadline would hold the upgrade until the client's
// next bytes. So frames are received by one goroutine (started with the first Read, ended with the call) and Read
// waits for them or for the deadline.
type agentTunnelConn struct {
	stream grpc.BidiStreamingClient[agentv1.TunnelFrame, agentv1.TunnelFrame]
	cancel context.CancelFunc
	done   <-chan struct{}

	recvOnce sync.Once
	frames   chan recvResult // unbuffered: the receiver takes no frame before Read wants one (flow control holds)

	rmu   sync.Mutex
	buf   []byte
	frame []byte // the received frame whose bytes buf holds, given back (tunnelwire.Release) once buf is read
	err   error  // sticky receive error

	dmu     sync.Mutex
	expired chan struct{} // closed when the read deadline passed; nil: no deadline
	changed chan struct{} // closed when the deadline is set again, to wake a waiting Read
	timer   *time.Timer

	wmu sync.Mutex
}

type recvResult struct {
	data []byte
	err  error
}

// receive runs the conn's receiving goroutine: it hands each frame to Read until the stream fails or the call ends.
func (c *agentTunnelConn) receive() {
	for {
		f, err := c.stream.Recv()
		select {
		case c.frames <- recvResult{f.GetData(), err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *agentTunnelConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if err := c.fill(); err != nil {
		return 0, err
	}
	n := copy(b, c.buf)
	c.consume(n)
	return n, nil
}

// fill waits, with rmu held, until buf holds bytes of a frame from the receiving goroutine (which it starts), or
// returns the sticky receive error, the deadline's or net.ErrClosed.
func (c *agentTunnelConn) fill() error {
	c.recvOnce.Do(func() {
		c.frames = make(chan recvResult)
		go c.receive()
	})
	if c.frames == nil { // WriteTo receives the frames
		if c.err == nil {
			return errors.New("tunnel: read while WriteTo receives")
		}
		return c.err
	}
	for len(c.buf) == 0 {
		if c.err != nil {
			return c.err
		}
		expired, changed := c.deadline()
		select {
		case r := <-c.frames:
			switch {
			case errors.Is(r.err, io.EOF):
				c.err = io.EOF
			case r.err != nil:
				c.err = fmt.Errorf("tunnel: %w", r.err)
			}
			c.frame, c.buf = r.data, r.data
		case <-expired:
			return os.ErrDeadlineExceeded
		case <-changed: // a new deadline: wait again with it
		case <-c.done:
			return net.ErrClosed
		}
	}
	return nil
}

// consume drops n read bytes of buf; the frame's buffer goes back to its pool once all are read.
func (c *agentTunnelConn) consume(n int) {
	if c.buf = c.buf[n:]; len(c.buf) == 0 {
		tunnelwire.Release(c.frame)
		c.frame = nil
	}
}

// WriteTo writes the hub's frames to w as they arrive until the hub ends the call (nil) or either side fails, without
// a buffer of its own: on a connection not read before (pipe's) it receives the frames itself; once the receiving
// goroutine runs (an HTTP server read the connection, which then was hijacked for an upgrade), it writes what that
// goroutine hands over, honouring the read deadline as Read does.
func (c *agentTunnelConn) WriteTo(w io.Writer) (int64, error) {
	receiving := true
	c.recvOnce.Do(func() { receiving = false })
	n := int64(0)
	if receiving {
		for {
			c.rmu.Lock()
			if err := c.fill(); err != nil {
				c.rmu.Unlock()
				if errors.Is(err, io.EOF) {
					return n, nil
				}
				return n, err
			}
			m, err := w.Write(c.buf)
			c.consume(m)
			c.rmu.Unlock()
			if n += int64(m); err != nil {
				return n, err
			}
		}
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		f, err := c.stream.Recv()
		if err != nil {
			c.err = io.EOF
			if !errors.Is(err, io.EOF) {
				c.err = fmt.Errorf("tunnel: %w", err)
				return n, c.err
			}
			return n, nil
		}
		m, err := w.Write(f.GetData())
		tunnelwire.Release(f.Data) // written: the frame's buffer goes back to its pool
		n += int64(m)
		if err != nil {
			c.err = err
			return n, err
		}
	}
}

// deadline returns a channel closed once the read deadline has passed (nil without a deadline) and one closed when
// the deadline is set again.
func (c *agentTunnelConn) deadline() (expired, changed <-chan struct{}) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.expired, c.changed
}

func (c *agentTunnelConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), tunnelwire.FrameSize)]
		if err := c.stream.Send(&agentv1.TunnelFrame{Data: chunk}); err != nil {
			return n, fmt.Errorf("tunnel: %w", err)
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

// CloseWrite half-closes: the hub reads EOF.
func (c *agentTunnelConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.stream.CloseSend()
}

// Close ends the call.
func (c *agentTunnelConn) Close() error {
	c.cancel()
	return nil
}

func (c *agentTunnelConn) LocalAddr() net.Addr           { return tunnelAddr("agent") }
func (c *agentTunnelConn) RemoteAddr() net.Addr          { return tunnelAddr("hub") }
func (c *agentTunnelConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline makes a pending and future Read return os.ErrDeadlineExceeded once t has passed; zero: none.
func (c *agentTunnelConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.expired = nil
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	if t.IsZero() {
		return nil
	}
	expired := make(chan struct{})
	c.expired = expired
	if d := time.Until(t); d <= 0 {
		close(expired)
	} else {
		c.timer = time.AfterFunc(d, func() { close(expired) })
	}
	return nil
}

// SetWriteDeadline is not enforced: a write waits for the hub's flow control, and the call's end ends it.
func (c *agentTunnelConn) SetWriteDeadline(t time.Time) error { return nil }

// tunnelAddr names a tunnel's end.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "trellis-tunnel" }
func (a tunnelAddr) String() string  { return string(a) }

// defaultTunnelDomain is the hub's default shoot API domain (docs/tunnels.md), used until a hub names its own.
const defaultTunnelDomain = "tunnel.trellis.local"

// TunnelDomain is the domain of the hub's shoot API names (api.<shoot>.<project>.<domain>), as the last Welcome said.
func (a *Agent) TunnelDomain() string {
	if d := a.tunnelDomain.Load(); d != nil {
		return *d
	}
	return defaultTunnelDomain
}
