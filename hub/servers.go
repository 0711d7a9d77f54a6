package hub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"

	openapidocs "github.com/trellis-dev/trellis/docs/openapi"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/audit"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/kubeconfig"
	"github.com/trellis-dev/trellis/hub/kubeproto"
	"github.com/trellis-dev/trellis/hub/openapi"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/review"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/table"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
	"github.com/trellis-dev/trellis/tracing"
)

// serviceSet collects the gRPC services the parts register (the kinds', the agent link's) so that the servers, built
// after them, serve all of them: the gRPC server behind the main port's HTTP server and the gRPC-only listener's.
type serviceSet []service

type service struct {
	desc *grpc.ServiceDesc
	impl any
}

// RegisterService records a service (grpc.ServiceRegistrar).
func (s *serviceSet) RegisterService(desc *grpc.ServiceDesc, impl any) {
	*s = append(*s, service{desc, impl})
}

func (s serviceSet) registerOn(srv *grpc.Server) {
	for _, svc := range s {
		srv.RegisterService(svc.desc, svc.impl)
	}
}

// servers are the replica's listeners: one TLS port where gRPC (HTTP/2 with content-type application/grpc) goes to
// the gRPC server and everything else to the REST gateway, health, metrics and the other HTTP handlers — etcd's
// arrangement for TLS listeners — and optionally a gRPC-only TLS port for agents.
type servers struct {
	https     *http.Server
	grpc      *grpc.Server
	lis       net.Listener
	native    *grpc.Server // nil without a gRPC-only listener
	nativeLis net.Listener
	tunnelLis net.Listener   // nil without the shoot API SNI listener; served by package tunnel
	wg        sync.WaitGroup // serve's goroutines
}

// newServers builds the servers and opens their listeners. Every gRPC call goes through the interceptors
// (authentication, request ids, error mapping, metrics); every other request through the handlers.
func (h *Hub) newServers(ctx context.Context, trust *trust, ca *pki.Authority, authn *auth.Authenticator, services serviceSet, reg *api.Registry, st *store.Store, m *metrics, auditor *audit.Auditor, tunnels *tunnel.Tunnels, link *agentlink.Server, routes ...api.Routes) (*servers, error) {
	ic := &interceptors{authn: authn, metrics: m, errors: api.Errors{Log: h.log.With("component", "api")}, auditor: auditor}
	var grpcOpts []grpc.ServerOption
	if tracing.Enabled() {
		// Tracing first, so that the calls' spans hold the interceptors' work (admission, store writes). Without
		// tracing the stats handler is left out: it would cost every call a no-op span and its attributes.
		grpcOpts = append(grpcOpts, grpc.StatsHandler(otelgrpc.NewServerHandler()))
	}
	grpcOpts = append(grpcOpts,
		grpc.ChainUnaryInterceptor(ic.unary),
		grpc.ChainStreamInterceptor(ic.stream),
		grpc.MaxRecvMsgSize(16<<20),
		// The protobuf codec, but tunnels' frames are decoded with one copy instead of two (docs/tunnels.md).
		grpc.ForceServerCodecV2(tunnelwire.Codec),
	)
	s := &servers{grpc: grpc.NewServer(grpcOpts...)}
	services.registerOn(s.grpc)
	if h.cfg.GRPCListen != "" || h.cfg.GRPCListener != nil {
		current, err := trust.listenerConfig(nativeTLS)
		if err != nil {
			return nil, err
		}
		s.native = grpc.NewServer(append(grpcOpts, nativeOptions(current, link.TapHandle, m.handshakesRefused.Inc)...)...)
		services.registerOn(s.native)
	}
	rest, err := h.handlers(ctx, authn, reg, st, m, ic.errors, tunnels, ca, routes)
	if err != nil {
		return nil, err
	}
	httpsTLS, err := trust.serverConfig([]string{"h2", "http/1.1"}, func(m tlsMaterial) *tls.Config {
		return &tls.Config{
			Certificates: []tls.Certificate{m.Serving},
			NextProtos:   []string{"h2", "http/1.1"},
			MinVersion:   tls.VersionTLS12,
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    m.ClientCAs,
		}
	})
	if err != nil {
		return nil, err
	}
	restHandler := withRequestID(withAudit(auditor, rest))
	if tracing.Enabled() {
		restHandler = otelhttp.NewHandler(restHandler, "rest")
	}
	s.https = &http.Server{
		Handler:           grpcOr(s.grpc, restHandler),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		TLSConfig:         httpsTLS,
	}
	if s.lis = h.cfg.Listener; s.lis == nil {
		if s.lis, err = net.Listen("tcp", h.cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
	}
	// Agents reach either port; their tunnels' data connections arrive there too (docs/tunnels.md).
	s.lis = link.Listener(s.lis)
	if s.tunnelLis = h.cfg.TunnelListener; s.tunnelLis == nil && h.cfg.TunnelListen != "" {
		if s.tunnelLis, err = net.Listen("tcp", h.cfg.TunnelListen); err != nil {
			_ = s.lis.Close()
			return nil, fmt.Errorf("tunnel-listen: %w", err)
		}
	}
	if s.native != nil {
		if s.nativeLis = h.cfg.GRPCListener; s.nativeLis == nil {
			if s.nativeLis, err = net.Listen("tcp", h.cfg.GRPCListen); err != nil {
				_ = s.lis.Close()
				if s.tunnelLis != nil {
					_ = s.tunnelLis.Close()
				}
				return nil, fmt.Errorf("grpc-listen: %w", err)
			}
		}
		s.nativeLis = link.Listener(s.nativeLis)
	}
	return s, nil
}

// handlers are the main port's HTTP handlers besides gRPC: health, metrics, profiling, discovery, OpenAPI and the
// REST gateway. This is the one place where HTTP handlers are mounted; mount new ones (the dashboard) here.
func (h *Hub) handlers(ctx context.Context, authn *auth.Authenticator, reg *api.Registry, st *store.Store, m *metrics, errs api.Errors, tunnels *tunnel.Tunnels, ca *pki.Authority, routes []api.Routes) (http.Handler, error) {
	// The REST gateway calls the kinds' servers in-process; it authenticates requests itself.
	gwCfg := gateway.Config{Logger: h.log, ObjectJSON: reg.ObjectJSON, ObjectDeflated: reg.ObjectDeflated, PublicError: errs.Public,
		Authenticate: func(r *http.Request) (context.Context, error) {
			ctx, err := authenticateHTTP(authn, r)
			if err != nil {
				return nil, err
			}
			return api.WithREST(ctx), nil
		}}
	for _, rt := range append(reg.Routes(), routes...) {
		gwCfg.Routes = append(gwCfg.Routes, rt)
	}
	rest, err := gateway.New(ctx, gwCfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthz(st))
	mux.HandleFunc("/livez", healthz(st))
	mux.HandleFunc("/readyz", h.readyz(st))
	mux.Handle("/metrics", requireToken(authn, m.handler()))
	// Go's profiler, for cluster admins (kube-apiserver serves it too, behind --profiling).
	mux.Handle("/debug/pprof/", requireToken(authn, http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/profile", requireToken(authn, http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/trace", requireToken(authn, http.HandlerFunc(pprof.Trace)))
	disc := api.DiscoveryHandler(append(append([]api.Endpoint{}, review.Endpoints...), kubeconfig.Endpoints...)...)
	mux.Handle("/api", requireToken(authn, disc))
	mux.Handle("/apis", requireToken(authn, disc))
	// The OpenAPI documents generated into docs/openapi, for every user but bootstrap tokens (as discovery).
	apiDocs, err := openapi.Handler(openapidocs.FS)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	mux.Handle("/openapi/", requireToken(authn, gateway.Compress(apiDocs)))
	now := h.cfg.Now
	if now == nil {
		now = time.Now
	}
	// The CA rotation, for cluster admins (docs/operations.md).
	mux.Handle(CARotationPath, requireToken(authn, caRotationHandler(ca, authn, now)))
	mux.Handle(CARotationPath+"/", requireToken(authn, caRotationHandler(ca, authn, now)))
	// Seeds' kube-apiservers through their agents, for cluster admins (docs/tunnels.md).
	mux.Handle(tunnel.SeedAPIPrefix, tunnels.SeedAPI(seedAPIAuthorizer(authn), gateway.WriteError))
	// Gets and lists asking for a Table (kubectl get) are answered with the kinds' printer columns.
	// Protobuf bodies and answers of Kubernetes' kinds are translated to and from the JSON the gateway serves.
	// Answers of 128 KiB or more go out gzipped to clients that take it, as kube-apiserver's.
	mux.Handle("/", discoveryOr(authn, disc, gateway.Compress(m.http(kubeproto.Handler(table.Handler(rest, now), gateway.WriteError)))))
	// The access reviews (kubectl auth can-i, whoami), answered by the kinds' authorizer; every user but bootstrap
	// tokens may ask about itself.
	reviews := review.Handler(review.Config{
		Authorizer:   reg.Authorizer(),
		Reader:       reg,
		Authenticate: func(r *http.Request) (context.Context, error) { return authenticateHTTP(authn, r) },
		WriteError:   gateway.WriteError,
		PathAllowed: func(u auth.User, verb, path string) error {
			return authz.AuthorizePath(u, verb, path, api.IsDiscoveryPath(path) || openapi.IsPath(path))
		},
		Log: h.log.With("component", "review"),
	})
	for _, p := range []string{review.AccessReviewPath, review.RulesReviewPath, review.WhoAmIPath} {
		mux.Handle(p, m.http(reviews))
	}
	if err := mountDashboard(mux, authn, h.log); err != nil {
		return nil, err
	}
	return mux, nil
}

func (s *servers) addr() string { return s.lis.Addr().String() }

// grpcAddr is the gRPC-only listener's address, "" without one.
func (s *servers) grpcAddr() string {
	if s.nativeLis == nil {
		return ""
	}
	return s.nativeLis.Addr().String()
}

// tunnelAddr is the SNI listener's address, "" without one.
func (s *servers) tunnelAddr() string {
	if s.tunnelLis == nil {
		return ""
	}
	return s.tunnelLis.Addr().String()
}

// serve runs every server until shutdown; the channel receives the failures of servers that end otherwise.
func (s *servers) serve() <-chan error {
	errc := make(chan error, 2)
	s.wg.Go(func() {
		if err := s.https.ServeTLS(s.lis, "", ""); err != nil && !isClosedErr(err) {
			errc <- fmt.Errorf("https: %w", err)
		}
	})
	if s.native != nil {
		s.wg.Go(func() {
			if err := s.native.Serve(s.nativeLis); err != nil && !isClosedErr(err) {
				errc <- fmt.Errorf("grpc: %w", err)
			}
		})
	}
	return errc
}

// stopAgentListener closes the gRPC-only listener (agents'), if there is one: no new connections, while those open
// stay until shutdown.
func (s *servers) stopAgentListener() {
	if s.nativeLis != nil {
		_ = s.nativeLis.Close()
	}
}

// shutdown stops the servers, gracefully within timeout and forcibly after it, and waits for serve's goroutines.
func (s *servers) shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = s.https.Shutdown(ctx)
	for _, srv := range []*grpc.Server{s.grpc, s.native} {
		if srv == nil {
			continue
		}
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			srv.Stop()
			<-stopped
		}
	}
	_ = s.lis.Close()
	s.wg.Wait()
}

func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) ||
		strings.Contains(err.Error(), "use of closed network connection")
}

// nativeTLS is the TLS configuration of the gRPC-only listener from the replica's current material (see
// nativeOptions).
func nativeTLS(m tlsMaterial) *tls.Config {
	tc := &tls.Config{
		Certificates:     []tls.Certificate{m.Serving},
		NextProtos:       []string{"h2"},
		MinVersion:       tls.VersionTLS12,
		ClientAuth:       tls.VerifyClientCertIfGiven,
		ClientCAs:        m.ClientCAs,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	tc.SetSessionTicketKeys([][32]byte{m.TicketKey})
	return tc
}

// nativeOptions configure the gRPC-only listener for many long-lived agent connections: TLS with optional client
// certificates (agents present theirs) and the configuration current gives at each handshake, keepalive pings as
// often as every 20 s allowed (agents ping every 30 s, also without streams), and small per-connection buffers with a
// shared write buffer — with 10,000 agents the default 32 KiB read and write buffers alone would take 640 MB.
//
// A restarted hub meets all its agents at once, and TLS handshakes are what that reconnect storm costs: session tickets
// are encrypted with a key every replica derives from the CA (ticketKey), so agents resume their sessions across
// restarts without certificate verification or signatures, and the key exchange is X25519 (the default hybrid
// post-quantum exchange takes about half the CPU of a full handshake). The handshakes are worked on a few at a time
// (boundedHandshakes) and session starts are admitted (agentlink.Server.TapHandle), so a storm converges.
func nativeOptions(current func() *tls.Config, streams tap.ServerInHandle, handshakeRefused func()) []grpc.ServerOption {
	return []grpc.ServerOption{
		// A few handshakes at a time, the rest queued (boundedHandshakes), each with the configuration of the
		// current material (listenerCreds).
		grpc.Creds(newBoundedHandshakes(newListenerCreds(current), handshakeRefused)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 20 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		// No read buffer: crypto/tls holds each record decrypted, so gRPC's framer reads frames from memory anyway.
		grpc.ReadBufferSize(0),
		grpc.WriteBufferSize(4 << 10), // grpc shares write buffers by default (SharedWriteBuffer is deprecated)
		// No HPACK dynamic table for the agents' request headers: an agent opens its session stream once and makes
		// few other calls, so indexing their headers saves a few bytes a call, while each connection's table would
		// keep up to 4 KiB of them for as long as the agent stays connected (about 900 bytes an agent measured).
		grpc.HeaderTableSize(0),
		// Tunnels move bulk bytes: buffers that are not zeroed on every use (docs/tunnels.md).
		experimental.BufferPool(tunnelwire.BufferPool),
		// Fixed windows turn off gRPC's bandwidth-delay estimation, which would answer the data of every heartbeat
		// with a ping of its own. Sessions send small messages, but a tunnel's stream carries bulk bytes from the
		// seed: with 64 KiB it moved two frames per window update (a quarter of direct on loopback, 1.3 MB/s at
		// 50 ms), and a stream's window is also the most the hub buffers for a tunnel whose client reads slowly (the
		// connection's window is returned as data arrives, so one slow stream never holds up the others).
		grpc.InitialWindowSize(512 << 10),
		grpc.InitialConnWindowSize(1 << 20),
		// Session starts are admitted, and refused early when too many wait, before a stream exists
		// (agentlink.Server.TapHandle).
		grpc.InTapHandle(streams),
	}
}
