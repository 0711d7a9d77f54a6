package hub

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/audit"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/openapi"
	"github.com/trellis-dev/trellis/hub/store"
)

// interceptors give every call a request id, authenticate it, map its error to a status code (the one edge where
// that happens; internal errors reach the client only as their request id) and record metrics.
type interceptors struct {
	authn   *auth.Authenticator
	metrics *metrics
	errors  api.Errors
	auditor *audit.Auditor // nil: no audit log
}

// authenticate identifies the caller (client certificate, then bearer token) and keeps bootstrap token users to the
// bootstrap exchange; what other users may do is decided per object by the kinds' servers.
func (ic *interceptors) authenticate(ctx context.Context, fullMethod string) (context.Context, error) {
	u, err := ic.authn.Authenticate(ctx, auth.RequestFromGRPC(ctx))
	if err != nil {
		return ctx, apierrors.NewUnauthorized(err.Error())
	}
	if err := authz.RestrictBootstrap(u, fullMethod); err != nil {
		return ctx, err
	}
	audit.SetUser(ctx, u)
	return auth.WithUser(ctx, u), nil
}

// authenticateHTTP is authenticate for REST requests (the gateway's Authenticate hook).
func authenticateHTTP(authn *auth.Authenticator, r *http.Request) (context.Context, error) {
	u, err := authn.Authenticate(r.Context(), auth.RequestFromHTTP(r))
	if err != nil {
		return nil, apierrors.NewUnauthorized(err.Error())
	}
	audit.SetUser(r.Context(), u)
	if err := authz.RestrictBootstrap(u, r.Method+" "+r.URL.Path); err != nil {
		return nil, err
	}
	return auth.WithUser(r.Context(), u), nil
}

// requestIDHeader is api.RequestIDHeader as gRPC metadata keys are: lower case.
var requestIDHeader = strings.ToLower(api.RequestIDHeader)

// requestID gives a call its id: the one the client sent in the request id header when usable, else a new one.
// The id is sent back in the response header metadata.
func requestID(ctx context.Context) (context.Context, metadata.MD) {
	var sent string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(requestIDHeader); len(v) > 0 {
			sent = v[0]
		}
	}
	id := api.RequestIDOf(sent)
	return api.WithRequestID(ctx, id), metadata.Pairs(requestIDHeader, id)
}

func (ic *interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ic.metrics.inflight.Add(1)
	defer ic.metrics.inflight.Add(-1)
	ctx, header := requestID(ctx)
	_ = grpc.SetHeader(ctx, header)
	ctx = beginGRPC(ctx, ic.auditor, info.FullMethod)
	ctx, err := ic.authenticate(ctx, info.FullMethod)
	var resp any
	if err == nil {
		resp, err = handler(ctx, req)
	}
	err = ic.errors.Public(ctx, err)
	finishGRPC(ctx, info.FullMethod, err, resp)
	err = api.ToGRPC(err)
	ic.metrics.observe(info.FullMethod, status.Code(err).String(), time.Since(start))
	return resp, err
}

func (ic *interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	ctx, header := requestID(ss.Context())
	_ = ss.SetHeader(header)
	ctx = beginGRPC(ctx, ic.auditor, info.FullMethod)
	ctx, err := ic.authenticate(ctx, info.FullMethod)
	if err == nil {
		err = handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
	}
	err = ic.errors.Public(ctx, err)
	finishGRPC(ctx, info.FullMethod, err, nil)
	err = api.ToGRPC(err)
	ic.metrics.observe(info.FullMethod, status.Code(err).String(), time.Since(start))
	return err
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

// withRequestID gives every REST request its id, as kube-apiserver gives its Audit-Id: the one the client sent in
// the header when usable, else a new one; the response carries it in the same header, and errors name it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := api.RequestIDOf(r.Header.Get(api.RequestIDHeader))
		w.Header().Set(api.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(api.WithRequestID(r.Context(), id)))
	})
}

// grpcOr sends gRPC requests to the gRPC server and everything else to rest.
func grpcOr(grpcSrv *grpc.Server, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			grpcSrv.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// metrics are the hub's Prometheus metrics: the Go runtime's and the process's, the calls' and what the parts
// register.
type metrics struct {
	registry     *prometheus.Registry
	grpcRequests *prometheus.CounterVec
	grpcDuration *prometheus.HistogramVec
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	// handshakesRefused counts connections of the gRPC-only listener closed before their TLS handshake
	// (boundedHandshakes).
	handshakesRefused prometheus.Counter
	// inflight counts the API requests being served: unary gRPC calls and REST requests, not watches and streams,
	// which wait more than they work. The loops' lane yields to them (Busy).
	inflight atomic.Int64
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &metrics{
		registry:     reg,
		grpcRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_grpc_requests_total", Help: "gRPC calls by method and code."}, []string{"method", "code"}),
		grpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trellis_grpc_request_duration_seconds", Help: "gRPC call latency by method (streams: their lifetime).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"method"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_http_requests_total", Help: "REST requests by method and code."}, []string{"method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trellis_http_request_duration_seconds", Help: "REST request latency by method (watches: their lifetime).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"method"}),
	}
	m.handshakesRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_grpc_handshakes_refused_total", Help: "Connections of the gRPC-only listener closed before their TLS handshake because too many waited for one."})
	inflight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_api_inflight_requests", Help: "API requests being served (unary gRPC calls and REST requests; not watches and streams). While there are any, the loops write at --loop-busy-qps."},
		func() float64 { return float64(m.inflight.Load()) })
	reg.MustRegister(m.grpcRequests, m.grpcDuration, m.httpRequests, m.httpDuration, m.handshakesRefused, inflight)
	return m
}

// Busy reports whether API requests are being served: the loops' lane yields to them (controller.Load).
func (m *metrics) Busy() bool { return m.inflight.Load() > 0 }

func (m *metrics) observe(method, code string, d time.Duration) {
	m.grpcRequests.WithLabelValues(method, code).Inc()
	m.grpcDuration.WithLabelValues(method).Observe(d.Seconds())
}

func (m *metrics) http(next http.Handler) http.Handler {
	instrumented := promhttp.InstrumentHandlerCounter(m.httpRequests, promhttp.InstrumentHandlerDuration(m.httpDuration, next))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !gateway.IsWatch(r) {
			m.inflight.Add(1)
			defer m.inflight.Add(-1)
		}
		instrumented.ServeHTTP(w, r)
	})
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// requireToken guards plain HTTP endpoints (metrics, profiling, discovery) with the same credentials as the API:
// discovery is for every user but bootstrap tokens, the others are not for agents either (authz.AuthorizePath).
func requireToken(authn *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := authn.Authenticate(r.Context(), auth.RequestFromHTTP(r))
		if err != nil {
			gateway.WriteError(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		discovery := api.IsDiscoveryPath(r.URL.Path) || openapi.IsPath(r.URL.Path)
		if err := authz.AuthorizePath(u, strings.ToLower(r.Method), r.URL.Path, discovery); err != nil {
			gateway.WriteError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// discoveryOr serves discovery documents (/api/v1, /apis/<group>, /apis/<group>/<version>) and passes everything
// else to the REST gateway.
func discoveryOr(authn *auth.Authenticator, disc, rest http.Handler) http.Handler {
	guarded := requireToken(authn, disc)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && api.IsDiscoveryPath(strings.TrimSuffix(r.URL.Path, "/")) {
			guarded.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

func healthz(st *store.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := st.Client().Get(ctx, "health", clientv3.WithCountOnly()); err != nil {
			http.Error(w, "etcd: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

func (h *Hub) readyz(st *store.Store) http.HandlerFunc {
	health := healthz(st)
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-h.ready:
			health(w, r)
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	}
}
