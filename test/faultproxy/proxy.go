package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the connection to the target; a target that does not answer in time closes the client side.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from a loopback port to a target.
type Proxy struct {
	ln      net.Listener
	done    chan struct{}
	closing sync.Once
	wg      sync.WaitGroup

	hole     atomic.Bool
	accepted atomic.Int64
	dropped  atomic.Int64

	mu     sync.Mutex
	target string
	healed chan struct{} // closed while no black hole is in place
	links  map[*link]struct{}
}

// link is one proxied connection: the client's side and, once dialled, the target's.
type link struct {
	client   net.Conn
	upstream net.Conn // nil until dialled; set under Proxy.mu
	once     sync.Once
	done     chan struct{}
}

// close ends both sides. abort resets them (SO_LINGER 0) instead of a graceful FIN, as a network cut would.
func (l *link) close(p *Proxy, abort bool) {
	l.once.Do(func() {
		close(l.done)
		p.mu.Lock()
		up := l.upstream
		delete(p.links, l)
		p.mu.Unlock()
		for _, c := range []net.Conn{l.client, up} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && abort {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

// Listen starts a proxy on 127.0.0.1:0 forwarding to target (host:port).
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	healed := make(chan struct{})
	close(healed)
	p := &Proxy{ln: ln, done: make(chan struct{}), target: target, healed: healed, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes new connections go to addr; connections already open keep their target.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Target is the address new connections go to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// CutAll resets every open connection, both the client's side and the target's, and returns how many it cut.
// New connections are accepted as before.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close(p, true)
	}
	return len(links)
}

// Blackhole turns the black hole on or off. While it is on, connections stay open but every byte read from either
// side is dropped, new connections are accepted (and dialled) but get the same treatment, and a side that closes is
// not told to the other: as on a partitioned network, the peers learn nothing until it heals. When it is turned off,
// bytes flow again on the connections that are still open (what was dropped stays lost, so a stream protocol on top
// sees a gap), and links one side of which closed meanwhile are closed on the other side too.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.hole.Load():
		p.healed = make(chan struct{})
		p.hole.Store(true)
	case !on && p.hole.Load():
		p.hole.Store(false)
		close(p.healed)
	}
}

// Blackholed reports whether the black hole is on.
func (p *Proxy) Blackholed() bool { return p.hole.Load() }

// Conns is the number of open connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Accepted counts the connections accepted since Listen.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Dropped counts the bytes the black hole swallowed.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Close stops listening, cuts every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	var err error
	p.closing.Do(func() {
		close(p.done)
		err = p.ln.Close()
		p.CutAll()
	})
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A listener error other than Close is not expected on loopback; back off briefly and retry.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	l := &link{client: client, done: make(chan struct{})}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		_ = client.Close()
		return
	default:
	}
	p.links[l] = struct{}{}
	target := p.target
	p.mu.Unlock()
	defer l.close(p, false)

	up, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		// The target is down: the client sees its connection closed, as behind a load balancer with no backend.
		l.close(p, false)
		return
	}
	p.mu.Lock()
	l.upstream = up
	p.mu.Unlock()
	select {
	case <-l.done: // cut while dialling
		_ = up.Close()
		return
	default:
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, client, up) }()
	go func() { defer wg.Done(); p.pipe(l, up, client) }()
	wg.Wait()
}

// pipe copies src to dst until either side fails, dropping what it reads while the black hole is on.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.hole.Load() {
				p.dropped.Add(int64(n))
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close(p, false)
				return
			}
		}
		if err != nil {
			// The other side learns of the close only once the network heals.
			p.waitHealed(l)
			l.close(p, false)
			return
		}
	}
}

func (p *Proxy) waitHealed(l *link) {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
	case <-l.done:
	case <-p.done:
	}
}
