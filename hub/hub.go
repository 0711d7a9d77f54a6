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
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/audit"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/tracing"
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
	// TunnelListen is the TLS-passthrough address of shoot API servers: it reads the server name of each ClientHello,
	// api.<shoot>.<project>.<TunnelDomain>, and pipes the connection to the shoot's kube-apiserver through its seed's
	// agent (docs/tunnels.md). "" serves none.
	TunnelListen string
	// TunnelListener, when set, is served instead of listening on TunnelListen (tests).
	TunnelListener net.Listener
	// TunnelDomain is the domain of shoot API names on TunnelListen (default tunnel.trellis.local).
	TunnelDomain string
	// TunnelAdvertiseAddress is host:port of TunnelListen as clients reach it: the server of the shoot kubeconfigs the
	// hub issues and of the shoots' external advertised address. Default: TunnelListen's address.
	TunnelAdvertiseAddress string
	// TunnelPeerAddress is host:port of TunnelListen as the other hub replicas reach it: a shoot API connection that
	// reaches a replica other than the one serving the seed's agent is forwarded there. Default: TunnelListen's
	// address as it listens, when that names a host (not 0.0.0.0 or ::); else none, and such connections are refused.
	TunnelPeerAddress string
	// ShootKubeconfigMaxExpiration shortens the shoot kubeconfigs asked for longer (default 24 h; package kubeconfig).
	ShootKubeconfigMaxExpiration time.Duration
	// TunnelMaxPerSeed and TunnelMaxPerClient bound the open tunnels per seed and per client (defaults 1000 and 100);
	// TunnelIdleTimeout ends passthrough tunnels without traffic (default 30 min). See docs/tunnels.md.
	TunnelMaxPerSeed, TunnelMaxPerClient int
	TunnelIdleTimeout                    time.Duration
	// TunnelNoDataConnections keeps passthrough tunnels' bytes on the agent link's encrypted connection instead of
	// raw data connections that agents open to the agent port (--tunnel-data-connections=false; docs/tunnels.md).
	TunnelNoDataConnections bool
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
	// TLSCertFile and TLSKeyFile, when set, are the serving certificate (chain) and key in PEM, served instead of a
	// certificate the hub's CA issues (the hub chart's tls.existingSecret). Clients then verify the hub with that
	// certificate's CA; agents' client certificates still come from the hub's CA.
	TLSCertFile, TLSKeyFile string
	// AdminTokenFile, when set, holds the admin token to use on first start, when etcd holds no admin token yet
	// (the hub chart's admin token Secret, so that every replica and the operator know it) instead of generating
	// one. Once a token is stored the file is not read.
	AdminTokenFile string
	// WatchWindow is the number of events per kind kept for watch resumption.
	WatchWindow int
	// WatchWindowAge is how long an event is kept for watch resumption at most (default 5m).
	WatchWindowAge time.Duration
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
	// Loops is the share of the replica its scheduler and controller-manager loops get (controller.Lane): at most
	// Seats reconciliations at once, writing to the store at QPS per second (Burst at once) and at BusyQPS while API
	// requests are being served. Zero fields: at most half the CPUs (at least 2) and 100 writes/s with bursts of 200,
	// about what gardener-controller-manager's client connection allows, and 20 writes/s (a fifth) while the API is
	// busy. Its API field is set by the replica.
	Loops controller.LaneConfig
	// DisableScheduler leaves shoots without spec.seedName unplaced (the scheduler, package scheduler, runs in the
	// replica that wins its own election otherwise).
	DisableScheduler bool
	// MaxTokenLifetime, when set, refuses AccessTokens that would live longer (they live 90 days by default).
	MaxTokenLifetime time.Duration
	// AllowUnregisteredExtensions turns off Gardener's ExtensionValidator, which refuses shoots, seeds, BackupBuckets
	// and BackupEntries naming extension types no ControllerRegistration registers (admission.Config): as
	// gardener-apiserver's --disable-admission-plugins=ExtensionValidator, for a garden that stores objects before
	// their extensions are registered (a migration, an API-only hub).
	AllowUnregisteredExtensions bool
	// BackupDir, when set, is where the leader stores etcd snapshots of the garden every BackupInterval (package
	// backup), keeping the newest BackupKeep and none older than BackupMaxAge (0: no limit).
	BackupDir      string
	BackupInterval time.Duration
	BackupKeep     int
	BackupMaxAge   time.Duration
	// Audit configures the audit log (package audit), with kube-apiserver's --audit-* flags. Zero: none.
	Audit audit.Config
	// Now, when set, is the clock of token expiry, for issuing and for authenticating (tests).
	Now func() time.Time
	// Listener, when set, is served instead of listening on Listen (tests pass an in-memory listener).
	Listener net.Listener
	// Logger receives structured logs.
	Logger *slog.Logger
	// OnReady, when set, is called once, when the hub serves, with the parts it was built from: for in-process tools
	// and test harnesses (test/hubtest) that read the store as it is or issue client certificates. It must not block.
	OnReady func(Parts)

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
	if c.Loops.Seats == 0 {
		c.Loops.Seats = max(2, runtime.NumCPU()/2)
	}
	if c.Loops.QPS == 0 {
		c.Loops.QPS = 100
	}
	if c.Loops.Burst == 0 {
		c.Loops.Burst = 200
	}
	if c.Loops.BusyQPS == 0 {
		c.Loops.BusyQPS = c.Loops.QPS / 5
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
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("tls-cert-file and tls-key-file: set both or neither"))
	}
	if c.MaxTokenLifetime < 0 {
		errs = append(errs, errors.New("max-token-lifetime: must not be negative"))
	}
	if c.TunnelListen != "" {
		if _, _, err := net.SplitHostPort(c.TunnelListen); err != nil {
			errs = append(errs, fmt.Errorf("tunnel-listen: %w", err))
		}
	}
	if c.TunnelAdvertiseAddress != "" {
		if _, _, err := net.SplitHostPort(c.TunnelAdvertiseAddress); err != nil {
			errs = append(errs, fmt.Errorf("tunnel-advertise-address: %w", err))
		}
	}
	if c.TunnelPeerAddress != "" {
		if _, _, err := net.SplitHostPort(c.TunnelPeerAddress); err != nil {
			errs = append(errs, fmt.Errorf("tunnel-peer-address: %w", err))
		}
	}
	if c.ShootKubeconfigMaxExpiration < 0 {
		errs = append(errs, errors.New("shoot-kubeconfig-max-expiration: must not be negative"))
	}
	if c.TunnelMaxPerSeed < 0 || c.TunnelMaxPerClient < 0 || c.TunnelIdleTimeout < 0 {
		errs = append(errs, errors.New("tunnel-max-per-seed, tunnel-max-per-client and tunnel-idle-timeout: must not be negative"))
	}
	if c.WatchWindow < 0 {
		errs = append(errs, errors.New("watch-window: must not be negative"))
	}
	if c.WatchWindowAge < 0 {
		errs = append(errs, errors.New("watch-window-age: must not be negative"))
	}
	for i, e := range c.Controllers {
		if name := strings.TrimPrefix(e, "-"); e != "*" && !controllerName.MatchString(name) {
			errs = append(errs, fmt.Errorf("controllers[%d]: %q is not \"*\", a controller name or -name", i, e))
		}
	}
	if c.BackupDir != "" && c.BackupInterval <= 0 {
		errs = append(errs, errors.New("backup-interval: must be positive with --backup-dir"))
	}
	if c.BackupKeep < 0 || c.BackupMaxAge < 0 {
		errs = append(errs, errors.New("backup-keep and backup-max-age: must not be negative"))
	}
	if err := c.Audit.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Loops.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("loop-seats, loop-qps, loop-burst and loop-busy-qps: %w", err))
	}
	return errors.Join(errs...)
}

// AddFlags binds the configuration to command-line flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8443", "TLS address serving gRPC and REST")
	fs.StringVar(&c.GRPCListen, "grpc-listen", "127.0.0.1:8444", "TLS address serving gRPC alone, for agents (empty: none)")
	fs.StringVar(&c.TunnelListen, "tunnel-listen", "127.0.0.1:8445", "TLS-passthrough address of shoot API servers, routed by SNI api.<shoot>.<project>.<tunnel-domain> through the seeds' agents (empty: none)")
	fs.StringVar(&c.TunnelDomain, "tunnel-domain", tunnel.DefaultDomain, "domain of shoot API names on --tunnel-listen")
	fs.StringVar(&c.TunnelAdvertiseAddress, "tunnel-advertise-address", "", "host:port of --tunnel-listen as clients reach it: the server of the shoot kubeconfigs the hub issues (default: the --tunnel-listen address)")
	fs.StringVar(&c.TunnelPeerAddress, "tunnel-peer-address", "", "host:port of --tunnel-listen as the other hub replicas reach it, to forward shoot API connections to the replica serving the seed's agent (default: the --tunnel-listen address as it listens, unless unspecified like 0.0.0.0)")
	fs.DurationVar(&c.ShootKubeconfigMaxExpiration, "shoot-kubeconfig-max-expiration", 0, "longest lifetime of the shoot kubeconfigs the hub issues (shoots/adminkubeconfig, shoots/viewerkubeconfig); longer requests are shortened (default 24h)")
	fs.IntVar(&c.TunnelMaxPerSeed, "tunnel-max-per-seed", 0, "most open tunnels (shoot API) and requests in flight (seed API) per seed (default 1000)")
	fs.IntVar(&c.TunnelMaxPerClient, "tunnel-max-per-client", 0, "most open tunnels per client: source IP (shoot API), hub user (seed API) (default 100)")
	fs.DurationVar(&c.TunnelIdleTimeout, "tunnel-idle-timeout", 0, "close a passthrough tunnel without traffic for this long (default 30m)")
	fs.BoolFunc("tunnel-data-connections", "carry passthrough tunnels (end-to-end TLS) on raw data connections that agents open to the agent port, falling back to the agent link (default true; =false: always the agent link)", func(v string) error {
		on, err := strconv.ParseBool(v)
		c.TunnelNoDataConnections = !on
		return err
	})
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
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM chain) instead of one the hub's CA issues; with --tls-key-file")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "file holding the admin token to store on first start instead of a generated one")
	fs.IntVar(&c.WatchWindow, "watch-window", 0, "events per kind kept for watch resumption (default 10000)")
	fs.DurationVar(&c.WatchWindowAge, "watch-window-age", 0, "how long an event is kept for watch resumption at most (default 5m)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", 0, "interval agents heartbeat at (default 2s)")
	fs.DurationVar(&c.MonitorPeriod, "seed-monitor-period", 0, "how long an agent may be silent before GardenletReady turns Unknown (default 40s)")
	fs.StringVar(&c.ClusterIdentity, "cluster-identity", "", "the garden's cluster identity, published in ConfigMap kube-system/cluster-identity (default: the stored one, or a random one on first start; immutable)")
	fs.StringVar(&c.ConfigFile, "config", "", "file with Gardener's ControllerManagerConfiguration and/or SchedulerConfiguration for the control-plane loops (default: Gardener's defaults)")
	fs.Func("controllers", "comma-separated controller-manager loops to run: '*' all, 'name' enables, '-name' disables, e.g. '*,-shoot-statuslabel' (default '*')", func(s string) error {
		c.Controllers = strings.Split(s, ",")
		return nil
	})
	fs.IntVar(&c.Loops.Seats, "loop-seats", 0, "reconciliations the scheduler and controller-manager loops run at once, all together (default half the CPUs, at least 2)")
	fs.Float64Var(&c.Loops.QPS, "loop-qps", 0, "writes per second of the loops to the store, all together (default 100)")
	fs.IntVar(&c.Loops.Burst, "loop-burst", 0, "writes the loops may make at once above --loop-qps (default 200)")
	fs.Float64Var(&c.Loops.BusyQPS, "loop-busy-qps", 0, "writes per second of the loops, all together, while the API serves requests (default a fifth of --loop-qps; --loop-qps's value: no yielding)")
	fs.BoolVar(&c.DisableScheduler, "disable-scheduler", false, "do not place shoots without spec.seedName on seeds")
	fs.BoolVar(&c.AllowUnregisteredExtensions, "allow-unregistered-extensions", false, "accept shoots, seeds, BackupBuckets and BackupEntries whose provider, networking, DNS, backup, extension, container runtime or operating system types no ControllerRegistration registers (Gardener's --disable-admission-plugins=ExtensionValidator; by default they are refused, as Gardener does)")
	fs.DurationVar(&c.MaxTokenLifetime, "max-token-lifetime", 0, "longest lifetime of an AccessToken, e.g. 2160h (default: no maximum; tokens live 90 days unless their create asks otherwise)")
	fs.StringVar(&c.BackupDir, "backup-dir", "", "directory the leader stores etcd snapshots of the garden in (empty: no backups)")
	fs.DurationVar(&c.BackupInterval, "backup-interval", time.Hour, "time between snapshots")
	fs.IntVar(&c.BackupKeep, "backup-keep", 24, "snapshots to keep (0: no limit)")
	fs.DurationVar(&c.BackupMaxAge, "backup-max-age", 0, "delete snapshots older than this, the newest excepted (0: no limit)")
	c.Audit.AddFlags(fs)
}

// Parts are what a running replica is built from, as OnReady hands them out.
type Parts struct {
	// Store is the replica's store; Registry serves every kind from its collections (reads are read-your-writes).
	Store    *store.Store
	Registry *api.Registry
	// CA is the hub's current certificate authority as the replica started.
	CA *pki.CA
	// Authority is the CA with its rotation (Start, MarkPrepared, Complete, Status); it signs seed client certificates.
	Authority *pki.Authority
	// AgentLink serves the agents' sessions in this replica.
	AgentLink *agentlink.Server
}

// Hub is one hub replica: the API over gRPC and REST on one TLS port, backed by etcd.
type Hub struct {
	cfg   Config
	log   *slog.Logger
	ready chan struct{}

	mu       sync.Mutex
	addr     string
	grpcAddr string
	// tunnelAddr is the SNI listener's address.
	tunnelAddr string
	// running holds the parts of a running replica, for the package's own tests (export_test.go).
	running *replica
	// traces maps recent revisions to the traceparent of the requests that wrote them, from the store's writes to
	// the agent link's assignments (in memory: a failover loses the link of writes before it).
	traces *tracing.Index
}

// traceIndexSize bounds the revisions whose traceparent the hub keeps for the agent link: far more writes than
// reach an agent's queue before it sends them.
const traceIndexSize = 8192

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
	return &Hub{cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), traces: tracing.NewIndex(traceIndexSize)}, nil
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

// TunnelAddr is the address of the shoot API SNI listener ("" when there is none), after Ready.
func (h *Hub) TunnelAddr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tunnelAddr
}

// Run builds the replica from its parts (parts.go), serves until ctx ends, then shuts down: first the agent sessions
// and the leader's loops (sessions are long-lived streams a graceful stop would wait for), then the servers, then the
// store. Every goroutine Run starts has ended when it returns.
func (h *Hub) Run(ctx context.Context) error {
	start := time.Now()
	st, err := h.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ca, trust, err := h.openPKI(ctx, st)
	if err != nil {
		return err
	}
	metrics := newMetrics()
	services := &serviceSet{}
	plugins := admission.Builtin() // the API's admission, and the loops' that write as the API would
	graph := newSeedGraph()
	var registry *api.Registry
	auditor, err := h.newAuditor(&registry)
	if err != nil {
		return err
	}
	if registry, err = h.newAPI(ctx, st, services, plugins, graph, auditor); err != nil {
		return err
	}
	initial, err := h.initialAdminToken()
	if err != nil {
		return err
	}
	authn, err := auth.Open(ctx, auth.Config{Etcd: st.Client(), Prefix: st.Prefix(), InitialToken: initial,
		TokenFile: filepath.Join(h.cfg.DataDir, "admin-token"), Reader: registry, Now: h.cfg.Now})
	if err != nil {
		return err
	}
	if err := ensureGarden(ctx, registry, h.cfg.ClusterIdentity); err != nil {
		return err
	}
	link, err := h.newAgentLink(ctx, st, registry, ca, graph, services, metrics.registry)
	if err != nil {
		return err
	}
	tunnels, err := h.newTunnels(registry, link, ca, metrics.registry)
	if err != nil {
		return err
	}
	leader, err := h.newLeaderLoops(st, registry, plugins, ca)
	if err != nil {
		return err
	}
	if err := h.addBackups(leader, st, metrics.registry); err != nil {
		return err
	}
	kubeconfigs, err := h.newKubeconfigs(registry, services)
	if err != nil {
		return err
	}
	trust.OnChange(link.TrustChanged)
	srv, err := h.newServers(ctx, trust, ca, authn, *services, registry, st, metrics, auditor, tunnels, link, kubeconfigs.Routes)
	if err != nil {
		return err
	}
	if srv.tunnelLis != nil {
		link.SetTunnelPeerAddress(h.tunnelPeerAddress(srv.tunnelLis.Addr())) // before link.Run records the replica
	}
	// The audit backends outlive the servers' shutdown, so the last requests' events are written too.
	auditCtx, stopAudit := context.WithCancel(context.WithoutCancel(ctx))
	var auditDone sync.WaitGroup
	auditDone.Go(func() {
		if err := auditor.Run(auditCtx); err != nil {
			h.log.Error("audit log", "err", err)
		}
	})
	defer func() { stopAudit(); auditDone.Wait() }()

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var loops sync.WaitGroup
	run := func(name string, fn func(context.Context) error) {
		loops.Go(func() {
			if err := fn(loopCtx); err != nil && loopCtx.Err() == nil {
				h.log.Error(name+" stopped", "err", err)
			}
		})
	}
	run("seed graph", graph.run(registry, h.log.With("component", "seedgraph")))
	run("agent link", link.Run)
	run("CA watch", func(ctx context.Context) error { return trust.watch(ctx, st.Client(), st.Prefix()+"/pki/ca") })
	// The leader's loops and the scheduler run in one lane, a bounded share of the replica beside the API.
	// They yield to the API's requests (--loop-busy-qps while any is served).
	laneCfg := h.cfg.Loops
	laneCfg.API = metrics
	lane, err := controller.NewLane(laneCfg)
	if err != nil {
		return err
	}
	inLane := func(fn func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error { return fn(controller.WithLane(ctx, lane)) }
	}
	run("leader election", inLane(leader.Run))
	if sched := h.newScheduler(st, registry); sched != nil {
		run("scheduler election", inLane(sched))
	}
	if srv.tunnelLis != nil {
		run("tunnel listener", func(ctx context.Context) error { return tunnels.Serve(ctx, srv.tunnelLis) })
	}
	serveErr := srv.serve()

	h.mu.Lock()
	h.addr, h.grpcAddr, h.tunnelAddr = srv.addr(), srv.grpcAddr(), srv.tunnelAddr()
	h.running = &replica{Parts: Parts{Store: st, Registry: registry, CA: ca.Current(), Authority: ca, AgentLink: link}, elector: leader.elector}
	h.mu.Unlock()
	close(h.ready)
	h.log.Info("hub ready", "address", srv.addr(), "grpcAddress", srv.grpcAddr(), "dataDir", h.cfg.DataDir, "startup", time.Since(start).Round(time.Millisecond))
	if h.cfg.OnReady != nil {
		h.cfg.OnReady(h.running.Parts)
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		h.log.Error("serving failed", "err", err)
	}
	// Agents whose sessions end now reconnect at once: the agent listener is closed first, so they find no hub
	// (a refused TCP connect costs nothing) instead of one that takes their handshake and then ends the session.
	srv.stopAgentListener()
	stopLoops()
	srv.shutdown(5 * time.Second)
	loops.Wait()
	return err
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
