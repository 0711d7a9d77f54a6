package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trellis-dev/trellis/agent/metrics"
)

// The agent's own metrics. Besides them /metrics serves the agent's shared registry (agent/metrics), which holds
// client-go's request metrics (rest_client_requests_total), the work queues' depths and latencies (workqueue_*),
// and the flows' and Helm's metrics the agent's packages register there.
func (a *Agent) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's metrics go to the shared registry, once per process.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := metrics.Registry.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			a.log.Warn("cannot register the runtime's metrics", "err", err)
		}
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agent_link_connected",
			Help: "1 while the agent link to the hub is up (the hub welcomed the session), else 0."},
			func() float64 { return b(a.connected.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "trellis_agent_link_sessions_total",
			Help: "Sessions the hub welcomed since the agent started; each one after the first is a reconnect."},
			func() float64 { return float64(a.sessions.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agent_link_heartbeat_ack_latency_seconds",
			Help: "Round trip of the last acknowledged heartbeat."},
			func() float64 { return time.Duration(a.ackLatency.Load()).Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "trellis_agent_csrs_sent_total",
			Help: "Certificate signing requests sent to the hub (bootstrap and rotation)."},
			func() float64 { return float64(a.csrsSent.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agent_client_certificate_expiration_timestamp_seconds",
			Help: "End of the validity of the agent's client certificate (Unix time); 0 before it has one."},
			func() float64 {
				if t := a.CertificateNotAfter(); !t.IsZero() {
					return float64(t.Unix())
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agent_cache_synced",
			Help: "1 once the agent received the initial state of its seed from the hub, else 0."},
			func() float64 { return b(a.cache.HasSynced()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_agent_controllers_running",
			Help: "1 while the seed-side controllers run, else 0."},
			func() float64 { return b(a.controllers.Load()) }),
		a.assignmentLag,
	)
	return reg
}

// newAssignmentLag is the histogram of how long an assignment took from the hub's commit to the agent's cache.
func newAssignmentLag() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "trellis_agent_assignment_lag_seconds",
		Help:    "Time from the hub sending an assignment batch to the agent applying it to its cache (clocks of hub and agent).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
}

// Ready reports why the agent is not ready, or nil: ready means the link to the hub is up, the agent holds the
// initial state of its seed, and — unless they are disabled — the seed-side controllers run.
func (a *Agent) Ready() error {
	var errs []error
	if !a.connected.Load() {
		errs = append(errs, errors.New("the agent link to the hub is down"))
	}
	if !a.cache.HasSynced() {
		errs = append(errs, errors.New("the initial state of the seed has not arrived from the hub"))
	}
	if !a.cfg.Controllers.Disabled && !a.controllers.Load() {
		errs = append(errs, errors.New("the seed-side controllers are not running"))
	}
	return errors.Join(errs...)
}

// endpoints are the agent's HTTP listeners: health probes and metrics, one listener when both share an address.
type endpoints struct {
	mu     sync.Mutex
	health string // bound address of /healthz and /readyz
	metric string // bound address of /metrics
	ready  chan struct{}
}

// HealthProbesAddr waits until the health probes listen and returns their address (host:port, the port bound when
// the configuration asked for 0); "" when ctx ends first.
func (a *Agent) HealthProbesAddr(ctx context.Context) string {
	return a.endpointAddr(ctx, func(e *endpoints) string { return e.health })
}

// MetricsAddr is HealthProbesAddr for /metrics.
func (a *Agent) MetricsAddr(ctx context.Context) string {
	return a.endpointAddr(ctx, func(e *endpoints) string { return e.metric })
}

func (a *Agent) endpointAddr(ctx context.Context, field func(*endpoints) string) string {
	select {
	case <-a.endpoints.ready:
	case <-ctx.Done():
		return ""
	}
	a.endpoints.mu.Lock()
	defer a.endpoints.mu.Unlock()
	return field(&a.endpoints)
}

// listenEndpoints binds the configured addresses and returns the servers to run; it fails when an address cannot
// be bound, as gardenlet does.
func (a *Agent) listenEndpoints() ([]*http.Server, []net.Listener, error) {
	probes := http.NewServeMux()
	probes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	probes.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	scrape := promhttp.HandlerFor(prometheus.Gatherers{a.registry, metrics.Registry}, promhttp.HandlerOpts{ErrorLog: nil})
	var (
		servers   []*http.Server
		listeners []net.Listener
	)
	serve := func(addr string, mux *http.ServeMux) (string, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return "", err
		}
		listeners = append(listeners, l)
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second})
		return l.Addr().String(), nil
	}
	cfg := a.cfg.Server
	fail := func(field string, err error) ([]*http.Server, []net.Listener, error) {
		for _, l := range listeners {
			_ = l.Close()
		}
		return nil, nil, fmt.Errorf("server.%s: %w", field, err)
	}
	health, err := serve(cfg.HealthProbes, probes)
	if err != nil {
		return fail("healthProbes", err)
	}
	metric := health
	if cfg.Metrics == cfg.HealthProbes {
		probes.Handle("GET /metrics", scrape)
	} else {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", scrape)
		if metric, err = serve(cfg.Metrics, mux); err != nil {
			return fail("metrics", err)
		}
	}
	a.endpoints.mu.Lock()
	a.endpoints.health, a.endpoints.metric = health, metric
	a.endpoints.mu.Unlock()
	close(a.endpoints.ready)
	a.log.Info("serving health probes and metrics", "healthProbes", health, "metrics", metric)
	return servers, listeners, nil
}

// runEndpoints serves until ctx ends, then shuts the servers down; it returns when they stopped.
func (a *Agent) runEndpoints(ctx context.Context, servers []*http.Server, listeners []net.Listener) {
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := s.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("endpoint server failed", "addr", listeners[i].Addr().String(), "err", err)
			}
		})
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	wg.Wait()
}
