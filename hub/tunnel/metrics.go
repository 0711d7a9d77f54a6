package tunnel

import (
	"io"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Tunnel kinds in metrics.
const (
	kindSeedAPI  = "seed-api"
	kindShootAPI = "shoot-api"
)

type metrics struct {
	open     *prometheus.GaugeVec
	bytes    *prometheus.CounterVec
	failures *prometheus.CounterVec
	forwards *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trellis_tunnel_open",
			Help: "Open tunnels through seed agents, by kind (seed-api, shoot-api)."}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_tunnel_bytes_total",
			Help: "Bytes carried by tunnels, by kind and direction (to-seed, from-seed)."}, []string{"kind", "direction"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_tunnel_dial_failures_total",
			Help: "Tunnels that could not be opened, by kind and reason (not-connected, limit, unknown-name, target, bad-hello)."}, []string{"kind", "reason"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_tunnel_forwarded_total",
			Help: "Tunnels forwarded between hub replicas, by kind and direction (out: to the replica of the seed's agent; in: from another replica)."}, []string{"kind", "direction"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.bytes, m.failures, m.forwards)
	}
	return m
}

// countedConn counts a tunnel's bytes and keeps it in the open gauge until closed.
type countedConn struct {
	net.Conn
	in, out prometheus.Counter // from-seed, to-seed
	once    sync.Once
	closed  func()
}

func (m *metrics) counted(kind string, c net.Conn, release func()) net.Conn {
	g := m.open.WithLabelValues(kind)
	g.Inc()
	return &countedConn{Conn: c, in: m.bytes.WithLabelValues(kind, "from-seed"), out: m.bytes.WithLabelValues(kind, "to-seed"),
		closed: func() { g.Dec(); release() }}
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(float64(n))
	return n, err
}

// WriteTo copies from the tunnel with its own WriteTo when it has one (no copy buffer), counting.
func (c *countedConn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		n, err := wt.WriteTo(w)
		c.in.Add(float64(n))
		return n, err
	}
	return io.Copy(w, struct{ io.Reader }{c})
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.Add(float64(n))
	return n, err
}

func (c *countedConn) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}
