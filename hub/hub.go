package hub

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	openapidocs "github.com/trellis-dev/trellis/docs/openapi"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/openapi"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
)

// Config configures a hub. The zero value plus Default serves on 127.0.0.1:8443 with data in ./trellis-data.
type Config struct {
	// Listen is the TLS address serving gRPC and REST.
	Listen string
	// GRPCListen is a TLS address serving gRPC alone, with gRPC's own HTTP/2 transport: what agents connect to.
	// It carries every service the main port does, at a fraction of the memory per connection. "" serves none.
	GRPCListen string
	// GRPCListener, when set, is served instead of listening on GRPCListen (tests).
	GRPCListener net.Listener
	// DataDir holds the embedded etcd, pki/ca.crt, admin-token and encryption-keys.
	DataDir string
	// EtcdEndpoints selects an external etcd cluster instead of the embedded one.
	EtcdEndpoints []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile configure TLS to the external etcd.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// EncryptionKeyFile lists the keys for encryption at rest, one "name:base64(32 bytes)" per line; the first
	// encrypts, all decrypt. Default <DataDir>/encryption-keys, created on first start.
	EncryptionKeyFile string
	// Hosts are extra DNS names or IPs for the serving certificate.
	Hosts []string
	// WatchWindow is the number of events per kind kept for watch resumption.
	WatchWindow int
	// HeartbeatInterval is the interval agents heartbeat at (default 2 s).
	HeartbeatInterval time.Duration
	// MonitorPeriod is how long an agent may be silent before its Seed's GardenletReady turns Unknown (default 40 s);
	// its shoots' conditions follow after five times as long.
	MonitorPeriod time.Duration
	// ClusterIdentity is the garden's cluster identity (gardener-apiserver's --cluster-identity), published in
	// ConfigMap kube-system/cluster-identity and injected into every extension's chart values. Empty: the one stored,
	// or a new random one on first start. It cannot change once stored.
	ClusterIdentity string
	// ConfigFile is the control-plane loops' configuration: Gardener's ControllerManagerConfiguration and
	// SchedulerConfiguration documents (package componentconfig). Empty: Gardener's defaults.
	ConfigFile string
	// Components, when set, is used instead of ConfigFile (tests and in-process tools).
	Components *componentconfig.Config
	// Controllers selects the controller-manager's loops as kube-controller-manager's --controllers does: "name"
	// enables a controller, "-name" disables it, "*" enables every controller not named. Empty: "*". The names are
	// those in the logs and in docs/controller-manager.md (for example shoot-statuslabel, project-stale).
	Controllers []string
	// DisableScheduler leaves shoots without spec.seedName unplaced (the scheduler, package scheduler, runs in the
	// replica that wins its own election otherwise).
	DisableScheduler bool
	// MaxTokenLifetime, when set, refuses AccessTokens that would live longer (they live 90 days by default).
	MaxTokenLifetime time.Duration
	// Now, when set, is the clock of token expiry, for issuing and for authenticating (tests).
	Now func() time.Time
	// Listener, when set, is served instead of listening on Listen (tests pass an in-memory listener).
	Listener net.Listener
	// Logger receives structured logs.
	Logger *slog.Logger

	// shootMonitorPeriod is the configuration's seed.shootMonitorPeriod, when MonitorPeriod comes from it too.
	shootMonitorPeriod time.Duration
}

// Default fills unset fields.
func (c *Config) Default() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8443"
	}
	if c.DataDir == "" {
		c.DataDir = "trellis-data"
	}
	if c.EncryptionKeyFile == "" {
		c.EncryptionKeyFile = filepath.Join(c.DataDir, "encryption-keys")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// controllerName is the form of a controller's name: lower-case words joined by dashes.
var controllerName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Validate reports configuration errors.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %w", err))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir: required"))
	}
	if (c.EtcdCertFile == "") != (c.EtcdKeyFile == "") {
		errs = append(errs, errors.New("etcd-cert and etcd-key: set both or neither"))
	}
	if c.MaxTokenLifetime < 0 {
		errs = append(errs, errors.New("max-token-lifetime: must not be negative"))
	}
	if c.WatchWindow < 0 {
		errs = append(errs, errors.New("watch-window: must not be negative"))
	}
	for i, e := range c.Controllers {
		if name := strings.TrimPrefix(e, "-"); e != "*" && !controllerName.MatchString(name) {
			errs = append(errs, fmt.Errorf("controllers[%d]: %q is not \"*\", a controller name or -name", i, e))
		}
	}
	return errors.Join(errs...)
}

// AddFlags binds the configuration to command-line flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8443", "TLS address serving gRPC and REST")
	fs.StringVar(&c.GRPCListen, "grpc-listen", "127.0.0.1:8444", "TLS address serving gRPC alone, for agents (empty: none)")
	fs.StringVar(&c.DataDir, "data-dir", "trellis-data", "directory for the embedded etcd, the CA certificate, the admin token and the encryption keys")
	fs.Func("etcd-endpoints", "comma-separated external etcd endpoints (default: embedded etcd)", func(s string) error {
		c.EtcdEndpoints = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&c.EtcdCAFile, "etcd-ca", "", "CA bundle of the external etcd")
	fs.StringVar(&c.EtcdCertFile, "etcd-cert", "", "client certificate for the external etcd")
	fs.StringVar(&c.EtcdKeyFile, "etcd-key", "", "client key for the external etcd")
	fs.StringVar(&c.EncryptionKeyFile, "encryption-key-file", "", "keys for encryption at rest (default <data-dir>/encryption-keys)")
	fs.Func("host", "extra DNS name or IP for the serving certificate (repeatable)", func(s string) error {
		c.Hosts = append(c.Hosts, s)
		return nil
	})
	fs.IntVar(&c.WatchWindow, "watch-window", 0, "events per kind kept for watch resumption (default 10000)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 0, "interval agents heartbeat at (default 2s)")
	fs.DurationVar(&c.MonitorPeriod, "seed-monitor-period", 0, "how long an agent may be silent before GardenletReady turns Unknown (default 40s)")
	fs.StringVar(&c.ClusterIdentity, "cluster-identity", "", "the garden's cluster identity, published in ConfigMap kube-system/cluster-identity (default: the stored one, or a random one on first start; immutable)")
	fs.StringVar(&c.ConfigFile, "config", "", "file with Gardener's ControllerManagerConfiguration and/or SchedulerConfiguration for the control-plane loops (default: Gardener's defaults)")
	fs.Func("controllers", "comma-separated controller-manager loops to run: '*' all, 'name' enables, '-name' disables, e.g. '*,-shoot-statuslabel' (default '*')", func(s string) error {
		c.Controllers = strings.Split(s, ",")
		return nil
	})
	fs.BoolVar(&c.DisableScheduler, "disable-scheduler", false, "do not place shoots without spec.seedName on seeds")
	fs.DurationVar(&c.MaxTokenLifetime, "max-token-lifetime", 0, "longest lifetime of an AccessToken, e.g. 2160h (default: no maximum; tokens live 90 days unless their create asks otherwise)")
}

// Hub is one hub replica: the API over gRPC and REST on one TLS port, backed by etcd.
type Hub struct {
	cfg   Config
	log   *slog.Logger
	ready chan struct{}

	mu       sync.Mutex
	addr     string
	grpcAddr string
	registry *api.Registry
	store    *store.Store
	agents   *agentParts
	ca       *pki.CA
}

// New returns a hub for cfg.
func New(cfg Config) (*Hub, error) {
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Components == nil {
		c, err := componentconfig.Load(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		cfg.Components = c
	} else {
		cfg.Components.Default()
		if err := cfg.Components.Validate(); err != nil {
			return nil, err
		}
	}
	if seed := cfg.Components.ControllerManager.Controllers.Seed; cfg.MonitorPeriod == 0 {
		// Without --seed-monitor-period, the configuration's seed.monitorPeriod and shootMonitorPeriod apply.
		cfg.MonitorPeriod, cfg.shootMonitorPeriod = seed.MonitorPeriod.Duration, seed.ShootMonitorPeriod.Duration
	}
	return &Hub{cfg: cfg, log: cfg.Logger, ready: make(chan struct{})}, nil
}

// Ready is closed once the hub serves.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Addr is the address the hub listens on (after Ready).
func (h *Hub) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// GRPCAddr is the address of the gRPC-only listener ("" when there is none), after Ready.
func (h *Hub) GRPCAddr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.grpcAddr
}

// Registry returns the kinds' registry (after Ready), for in-process controllers and tests.
func (h *Hub) Registry() *api.Registry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registry
}

// Store returns the hub's store (after Ready), for tests that read etcd as it is.
func (h *Hub) Store() *store.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.store
}

// CA returns the hub's certificate authority (after Ready), for tests and in-process tools that issue client
// certificates (a seed agent's, without its bootstrap exchange).
func (h *Hub) CA() *pki.CA {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ca
}

// Run serves until ctx ends, then shuts down gracefully.
func (h *Hub) Run(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	keys, err := loadOrCreateKeys(h.cfg.EncryptionKeyFile)
	if err != nil {
		return err
	}
	etcdTLS, err := h.etcdTLS()
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{
		DataDir: h.cfg.DataDir, Endpoints: h.cfg.EtcdEndpoints, TLS: etcdTLS, EncryptionKeys: keys,
		WatchWindow: h.cfg.WatchWindow, Logger: h.log.With("component", "store"),
	})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	ca, err := pki.LoadOrCreate(ctx, st.Client(), st.Prefix()+"/pki/ca", st)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(h.cfg.DataDir, "pki", "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return err
	}
	h.mu.Lock()
	h.ca = ca
	h.mu.Unlock()
	authn, err := auth.Open(ctx, st.Client(), st.Prefix(), filepath.Join(h.cfg.DataDir, "admin-token"))
	if err != nil {
		return err
	}
	hosts := append([]string{"127.0.0.1", "::1", "localhost"}, h.cfg.Hosts...)
	if hn, err := os.Hostname(); err == nil {
		hosts = append(hosts, hn)
	}
	if host, _, _ := net.SplitHostPort(h.cfg.Listen); host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	serving, err := ca.ServingCert(hosts, 365*24*time.Hour)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)
	ic := &interceptors{authn: authn, metrics: m}
	grpcOpts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ic.unary),
		grpc.ChainStreamInterceptor(ic.stream),
		grpc.MaxRecvMsgSize(16 << 20),
	}
	grpcSrv := grpc.NewServer(grpcOpts...)
	servers := registrars{grpcSrv}
	var nativeSrv *grpc.Server
	if h.cfg.GRPCListen != "" || h.cfg.GRPCListener != nil {
		ticketKey, err := ca.SessionTicketKey()
		if err != nil {
			return err
		}
		nativeSrv = grpc.NewServer(append(grpcOpts, nativeOptions(serving, ca.Pool(), ticketKey)...)...)
		servers = append(servers, nativeSrv)
	}
	indexes := append(authz.Indexes(), api.Index{Resource: auth.AccessTokens, Name: auth.TokenHashIndex, Values: auth.TokenHashes})
	registry, err := api.NewRegistry(ctx, st, servers, indexes...)
	if err != nil {
		return err
	}
	registry.SetAdmissionConfig(admission.Config{AccessTokenMaxLifetime: h.cfg.MaxTokenLifetime, Now: h.cfg.Now})
	if h.cfg.Now != nil {
		authn.SetClock(h.cfg.Now)
	}
	// The projects' default quotas are admission: every replica enforces them.
	quotas, err := admission.NewProjectQuotas(h.cfg.Components.ControllerManager.Controllers.Project.Quotas)
	if err != nil {
		return err
	}
	registry.SetCreateQuota(quotas)
	authn.SetObjectReader(registry) // bootstrap token Secrets, AccessTokens and their ServiceAccounts
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: the agent link's goroutines end with ctx
	agents, err := h.startAgentLink(ctx, &wg, st, registry, ca, servers, reg)
	if err != nil {
		return err
	}
	registry.SetAuthorizer(authz.New(authz.Config{Graph: agents.graph, GraphReady: agents.graphReady, Reader: registry, Index: registry}))
	h.startScheduler(ctx, &wg, st, registry)

	// The REST gateway calls the kinds' servers in-process; it authenticates requests itself.
	gwCfg := gateway.Config{Logger: h.log, ObjectJSON: registry.ObjectJSON, Authenticate: func(r *http.Request) (context.Context, error) {
		return authenticateHTTP(authn, r)
	}}
	for _, rt := range registry.Routes() {
		gwCfg.Routes = append(gwCfg.Routes, rt)
	}
	rest, err := gateway.New(ctx, gwCfg)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.healthz(st))
	mux.HandleFunc("/livez", h.healthz(st))
	mux.HandleFunc("/readyz", h.readyz(st))
	mux.Handle("/metrics", requireToken(authn, promhttpHandler(reg)))
	// Go's profiler, for cluster admins (kube-apiserver serves it too, behind --profiling).
	mux.Handle("/debug/pprof/", requireToken(authn, http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/profile", requireToken(authn, http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/trace", requireToken(authn, http.HandlerFunc(pprof.Trace)))
	disc := api.DiscoveryHandler()
	mux.Handle("/api", requireToken(authn, disc))
	mux.Handle("/apis", requireToken(authn, disc))
	// The OpenAPI documents generated into docs/openapi, for every user but bootstrap tokens (as discovery).
	apiDocs, err := openapi.Handler(openapidocs.FS)
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	mux.Handle("/openapi/", requireToken(authn, apiDocs))
	mux.Handle("/", discoveryOr(authn, disc, m.http(rest)))

	lis := h.cfg.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", h.cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	// One TLS port: gRPC (HTTP/2 with content-type application/grpc) goes to the gRPC server, everything else to the
	// REST gateway, health and metrics handlers — etcd's arrangement for TLS listeners.
	httpSrv := &http.Server{
		Handler:           grpcOr(grpcSrv, mux),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			NextProtos:   []string{"h2", "http/1.1"},
			MinVersion:   tls.VersionTLS12,
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    ca.Pool(),
		},
	}

	errc := make(chan error, 4)
	serve := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && !isClosedErr(err) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	serve("https", func() error { return httpSrv.ServeTLS(lis, "", "") })
	var grpcAddr string
	if nativeSrv != nil {
		glis := h.cfg.GRPCListener
		if glis == nil {
			if glis, err = net.Listen("tcp", h.cfg.GRPCListen); err != nil {
				_ = lis.Close()
				return fmt.Errorf("grpc-listen: %w", err)
			}
		}
		grpcAddr = glis.Addr().String()
		serve("grpc", func() error { return nativeSrv.Serve(glis) })
	}

	h.mu.Lock()
	h.addr, h.grpcAddr, h.registry, h.store, h.agents = lis.Addr().String(), grpcAddr, registry, st, agents
	h.mu.Unlock()
	close(h.ready)
	h.log.Info("hub ready", "address", lis.Addr().String(), "grpcAddress", grpcAddr, "dataDir", h.cfg.DataDir, "startup", time.Since(start).Round(time.Millisecond))

	select {
	case <-ctx.Done():
	case err = <-errc:
		h.log.Error("serving failed", "err", err)
	}
	agents.stop()
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	_ = httpSrv.Shutdown(shutdownCtx)
	for _, srv := range []*grpc.Server{grpcSrv, nativeSrv} {
		if srv == nil {
			continue
		}
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-shutdownCtx.Done():
			srv.Stop()
		}
	}
	_ = lis.Close()
	cancel()
	wg.Wait()
	return err
}

func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) ||
		strings.Contains(err.Error(), "use of closed network connection")
}

func (h *Hub) etcdTLS() (*tls.Config, error) {
	if h.cfg.EtcdCAFile == "" && h.cfg.EtcdCertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if h.cfg.EtcdCAFile != "" {
		pem, err := os.ReadFile(h.cfg.EtcdCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd-ca %s: no certificates", h.cfg.EtcdCAFile)
		}
		cfg.RootCAs = pool
	}
	if h.cfg.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(h.cfg.EtcdCertFile, h.cfg.EtcdKeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// loadOrCreateKeys reads the encryption keys, creating the file with one fresh key on first start.
func loadOrCreateKeys(path string) ([]store.Key, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: a file of the operator's data directory
	if errors.Is(err, os.ErrNotExist) {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		line := "key1:" + base64.StdEncoding.EncodeToString(secret) + "\n"
		if err := writeFileAtomic(path, []byte(line), 0o600); err != nil {
			return nil, err
		}
		data = []byte(line)
	} else if err != nil {
		return nil, err
	}
	return parseKeys(path, data)
}

func parseKeys(path string, data []byte) ([]store.Key, error) {
	var keys []store.Key
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, b64, ok := strings.Cut(line, ":")
		secret, err := base64.StdEncoding.DecodeString(b64)
		if !ok || name == "" || err != nil || len(secret) != 32 {
			return nil, fmt.Errorf("%s:%d: want name:base64 of a 32-byte key", path, i+1)
		}
		keys = append(keys, store.Key{Name: name, Secret: secret})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return keys, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
