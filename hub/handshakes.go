package hub

import (
	"errors"
	"net"
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
// is served a few handshakes at a time, each at full speed, in the order the connections came, instead of all at once
// with each so slow that the agents give up on them and retry, which throws the work away and adds to the storm.
// Beyond maxQueuedHandshakes a connection is closed before any handshake work.
type boundedHandshakes struct {
	credentials.TransportCredentials
	slots     chan struct{}
	waiting   *atomic.Int64
	maxQueued int64
	timeout   time.Duration
	// refused counts connections closed before their handshake (optional).
	refused func()
}

func newBoundedHandshakes(c credentials.TransportCredentials, refused func()) *boundedHandshakes {
	return &boundedHandshakes{TransportCredentials: c, slots: make(chan struct{}, maxHandshakes), waiting: new(atomic.Int64),
		maxQueued: maxQueuedHandshakes, timeout: handshakeQueueTimeout, refused: refused}
}

// ServerHandshake waits for a slot and then runs the TLS handshake.
func (b *boundedHandshakes) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	select {
	case b.slots <- struct{}{}:
	default:
		if b.waiting.Add(1) > b.maxQueued {
			b.waiting.Add(-1)
			return nil, nil, b.refuse(conn)
		}
		t := time.NewTimer(b.timeout)
		select {
		case b.slots <- struct{}{}:
			t.Stop()
			b.waiting.Add(-1)
		case <-t.C:
			b.waiting.Add(-1)
			return nil, nil, b.refuse(conn)
		}
	}
	defer func() { <-b.slots }()
	return b.TransportCredentials.ServerHandshake(conn)
}

func (b *boundedHandshakes) refuse(conn net.Conn) error {
	_ = conn.Close()
	if b.refused != nil {
		b.refused()
	}
	return errHandshakeRefused
}

// Clone returns credentials that share the bound.
func (b *boundedHandshakes) Clone() credentials.TransportCredentials {
	c := *b
	c.TransportCredentials = b.TransportCredentials.Clone()
	return &c
}
