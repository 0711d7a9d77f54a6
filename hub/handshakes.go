package hub

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// Bounds of the gRPC-only listener's TLS handshakes (boundedHandshakes).
const (
	// maxHandshakes is how many TLS handshakes the listener works on at once: their CPU work is bounded, and more at
	// once only make each slower (and a client's timeout more likely) without making more of them per second; a
	// handshake also waits a round trip for its client, so there are more slots than cores.
	maxHandshakes = 128
	// maxQueuedHandshakes is how many accepted connections may wait for a handshake slot; more are closed at once,
	// before any handshake work, and their agents come back after their backoff.
	maxQueuedHandshakes = 16384
	// handshakeQueueTimeout bounds a connection's wait for a slot; agents allow a minute for the handshake
	// (agent/hubdial.HandshakeTimeout).
	handshakeQueueTimeout = 45 * time.Second
)

var errHandshakeRefused = errors.New("too many TLS handshakes waiting; closed before the handshake")

// boundedHandshakes wraps the transport credentials of the gRPC-only listener: a reconnect storm of thousands of agents
// is served a few handshakes at a time, each at full speed, instead of all at once with each so slow that the agents
// give up on them and retry, which throws the work away and adds to the storm. Beyond maxQueuedHandshakes a connection
// is closed before any handshake work.
//
// Waiting connections are served newest first: while the queue is short the order makes no difference, and when the
// hub falls behind, the newest connections are those whose agents are still waiting, while the oldest are the ones
// that would time out anyway (their agents gave up, or they are closed here after handshakeQueueTimeout).
type boundedHandshakes struct {
	credentials.TransportCredentials
	slots *slots
	// refused counts connections closed before their handshake (optional).
	refused func()
}

func newBoundedHandshakes(c credentials.TransportCredentials, refused func()) *boundedHandshakes {
	return &boundedHandshakes{TransportCredentials: c, refused: refused,
		slots: &slots{free: maxHandshakes, maxQueued: maxQueuedHandshakes, timeout: handshakeQueueTimeout}}
}

// ServerHandshake waits for a slot and then runs the TLS handshake.
func (b *boundedHandshakes) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if !b.slots.acquire() {
		_ = conn.Close()
		if b.refused != nil {
			b.refused()
		}
		return nil, nil, errHandshakeRefused
	}
	defer b.slots.release()
	return b.TransportCredentials.ServerHandshake(conn)
}

// Clone returns credentials that share the bound.
func (b *boundedHandshakes) Clone() credentials.TransportCredentials {
	c := *b
	c.TransportCredentials = b.TransportCredentials.Clone()
	return &c
}

// slots is a counting semaphore whose waiters are served last come, first served, each for at most timeout.
type slots struct {
	mu        sync.Mutex
	free      int
	waiters   []*waiter // a stack: the newest on top; abandoned ones stay until popped
	queued    int       // waiters not abandoned
	maxQueued int
	timeout   time.Duration
}

type waiter struct {
	ready     chan struct{} // closed when handed a slot
	abandoned bool
}

// acquire takes a slot, waiting at most timeout; false without one (the queue is full, or the wait timed out).
func (s *slots) acquire() bool {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		s.mu.Unlock()
		return true
	}
	if s.queued >= s.maxQueued {
		s.mu.Unlock()
		return false
	}
	w := &waiter{ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.queued++
	s.mu.Unlock()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready: // handed a slot while timing out
		return true
	default:
	}
	w.abandoned = true
	s.queued--
	return false
}

// release hands the slot to the newest waiter, or frees it.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := len(s.waiters); n > 0; n = len(s.waiters) {
		w := s.waiters[n-1]
		s.waiters[n-1] = nil
		s.waiters = s.waiters[:n-1]
		if !w.abandoned {
			s.queued--
			close(w.ready)
			return
		}
	}
	s.free++
}

// listenerCreds are the TLS credentials of the gRPC-only listener with the configuration the trust material gives now
// (trust.listenerConfig): gRPC's TLS credentials, made once per configuration. gRPC's credentials for a configuration
// that names another per client (tls.Config.GetConfigForClient, which the hub's CA rotation needs) clone that one at
// every handshake to add gRPC's defaults, and the connection keeps its clone: about 0.5 KiB per agent for as long as it
// is connected, the same configuration ten thousand times.
type listenerCreds struct {
	// TransportCredentials are those of the first configuration, for what is not a server handshake (Info, ...).
	credentials.TransportCredentials
	current func() *tls.Config
	last    atomic.Pointer[credsOf]
}

// credsOf are gRPC's TLS credentials of one configuration.
type credsOf struct {
	cfg   *tls.Config
	creds credentials.TransportCredentials
}

func newListenerCreds(current func() *tls.Config) *listenerCreds {
	l := &listenerCreds{current: current}
	l.TransportCredentials = l.of(current())
	return l
}

// of returns the credentials of cfg, made when cfg is another configuration than the last one's.
func (l *listenerCreds) of(cfg *tls.Config) credentials.TransportCredentials {
	if c := l.last.Load(); c != nil && c.cfg == cfg {
		return c.creds
	}
	c := &credsOf{cfg: cfg, creds: credentials.NewTLS(cfg)}
	l.last.Store(c)
	return c.creds
}

// ServerHandshake runs the TLS handshake with the current configuration.
func (l *listenerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return l.of(l.current()).ServerHandshake(conn)
}

// Clone returns credentials that follow the same configurations.
func (l *listenerCreds) Clone() credentials.TransportCredentials {
	return newListenerCreds(l.current)
}
