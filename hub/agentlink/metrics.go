package agentlink

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	sessions        prometheus.Gauge
	sessionsStarted prometheus.Counter
	heartbeats      prometheus.Counter
	refused         prometheus.Counter
	assignments     prometheus.Counter
	writes          *prometheus.CounterVec
	dataConns       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		sessions:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "trellis_agentlink_sessions", Help: "Agent sessions served by this replica."}),
		sessionsStarted: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_agentlink_sessions_started_total", Help: "Agent sessions started."}),
		heartbeats:      prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_agentlink_heartbeats_total", Help: "Heartbeats received."}),
		refused:         prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_agentlink_sessions_refused_total", Help: "Agent streams refused with a retry delay because too many sessions were starting."}),
		assignments:     prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_agentlink_assignments_total", Help: "Assignments sent to agents."}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_agentlink_etcd_writes_total",
			Help: "etcd writes the agent link made, by purpose (presence, lease, seed-status).",
		}, []string{"purpose"}),
		dataConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_tunnel_data_connections_total",
			Help: "Data connections of passthrough tunnels on the agent port, by result (accepted, forwarded, unknown, reused, expired, bad-token, bad-preface, gone).",
		}, []string{"result"}),
	}
	if reg != nil {
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agentlink_queued_assignments", Help: "Assignments waiting in session queues."}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			n := 0
			for _, ss := range s.sessions {
				n += ss.queuedAssignments()
			}
			return float64(n)
		})
		reg.MustRegister(m.sessions, m.sessionsStarted, m.heartbeats, m.refused, m.assignments, m.writes, m.dataConns, queued)
	}
	return m
}
