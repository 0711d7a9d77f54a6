package agent

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/agent/backoff"
	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/identity"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Config configures an Agent.
type Config struct {
	// Configuration is the agent's configuration (the file's content). New works on a defaulted copy and validates it.
	Configuration *config.AgentConfiguration
	// Logger receives structured logs; nil uses slog.Default().
	Logger *slog.Logger
	// Version is the agent's build version, sent in Hello; default "dev".
	Version string
	// SeedRESTConfig reaches the seed cluster; nil builds it from Configuration.SeedClientConnection (a kubeconfig
	// file, or the in-cluster configuration).
	SeedRESTConfig *rest.Config
	// SeedClient is the seed cluster's core client (a client-go clientset is one); nil builds it from SeedRESTConfig.
	SeedClient SeedClient
	// SeedHealth checks the seed's health for heartbeats; nil uses GET /healthz on the seed's kube-apiserver (200 is
	// healthy).
	SeedHealth func(ctx context.Context) error
	// Rand returns numbers in [0, 1) for the backoff and rotation jitter; nil uses math/rand/v2.
	Rand func() float64
	// RotationDeadline, when set, is called for each client certificate with its validity and the rotation deadline
	// drawn for it (a random 70–90 % of the validity, as configured), and returns the deadline to use instead. It is
	// a test hook: the hub signs certificates for at least 10 minutes, so tests bring a deadline near with it.
	RotationDeadline func(notBefore, notAfter, drawn time.Time) time.Time
	// DialService connects to a Service's cluster IP and port, for tunnels to shoot API servers; nil dials directly
	// (in a seed, kube-proxy routes cluster IPs). Tests without kube-proxy pass a stand-in for it.
	DialService func(ctx context.Context, network, address string) (net.Conn, error)
}

// SeedClient is what the agent uses of a client-go clientset of the seed cluster, apart from the seed-side
// controllers: the core API, for its credentials Secret, the Services tunnels reach, and /healthz (through the
// core client's REST client). A clientset of package k8s.io/client-go/kubernetes is one.
type SeedClient interface {
	CoreV1() corev1client.CoreV1Interface
}

// coreClient is a SeedClient of a core client alone, so that the agent does not link every typed client of a
// clientset.
type coreClient struct{ core corev1client.CoreV1Interface }

func (c coreClient) CoreV1() corev1client.CoreV1Interface { return c.core }

// Agent is a seed agent. Create it with New and run it with Run.
type Agent struct {
	cfg      config.AgentConfiguration
	log      *slog.Logger
	version  string
	seedName string
	server   string // https://<hub address>, the server of the stored kubeconfig
	rand     func() float64
	hook     func(notBefore, notAfter, drawn time.Time) time.Time // Config.RotationDeadline
	health   func(ctx context.Context) error
	secrets  *identity.SecretStore
	creds    identity.Holder

	seedClient  SeedClient
	dialService func(ctx context.Context, network, address string) (net.Conn, error)
	proxyOnce   sync.Once
	proxy       http.Handler // the seed API proxy of tunnels (tunnel.go)
	proxyErr    error

	sessionHub  atomic.Value // string: the address the session's connection to the hub reached (dial)
	tlsMu       sync.Mutex
	tlsFor      *identity.Credentials
	tlsSessions tls.ClientSessionCache
	cache       *cache.Cache
	running     atomic.Bool
	seedREST    *rest.Config          // nil when the controllers are disabled and the caller gave only a clientset
	gardener    *corev1beta1.Gardener // the agent as the Seed's status.gardener names it

	hubMu    sync.Mutex       // serializes offerHubConn
	hubReady chan struct{}    // closed when hubConn is set
	hubConn  *grpc.ClientConn // the controllers' mTLS connection to the hub

	connected      atomic.Bool
	tunnelDomain   atomic.Pointer[string] // the hub's shoot API domain, from the last Welcome
	sessions       atomic.Int64
	csrsSent       atomic.Int64
	ackLatency     atomic.Int64 // nanoseconds, of the last HeartbeatAck
	seedRegistered atomic.Bool
	crdsInstalled  atomic.Bool
	controllers    atomic.Bool

	registry      *prometheus.Registry // the agent's own metrics (endpoints.go)
	assignmentLag prometheus.Histogram
	endpoints     endpoints

	mu          sync.Mutex
	sessionID   string
	lastErr     error
	deadline    time.Time             // when to rotate deadlineFor
	deadlineFor *identity.Credentials // the credentials deadline belongs to
}

// New returns an agent for cfg. It validates the configuration and builds the seed client; it does not connect.
func New(cfg Config) (*Agent, error) {
	if cfg.Configuration == nil {
		return nil, errors.New("agent: Configuration is required")
	}
	c := *cfg.Configuration
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("agent configuration: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	restCfg := cfg.SeedRESTConfig
	if restCfg == nil && (cfg.SeedClient == nil || !c.Controllers.Disabled) {
		var err error
		if restCfg, err = seedRESTConfig(c.SeedClientConnection.Kubeconfig); err != nil {
			return nil, err
		}
	}
	if restCfg != nil {
		restCfg = rest.CopyConfig(restCfg)
		restCfg.UserAgent = "trellis-agent/" + cfg.Version
		restCfg.QPS, restCfg.Burst = *c.SeedClientConnection.QPS, int(*c.SeedClientConnection.Burst)
	}
	seedClient := cfg.SeedClient
	if seedClient == nil {
		core, err := corev1client.NewForConfig(restCfg)
		if err != nil {
			return nil, fmt.Errorf("seed client: %w", err)
		}
		seedClient = coreClient{core}
	}
	health := cfg.SeedHealth
	if health == nil {
		health = apiserverHealth(seedClient)
	}
	ref := c.HubClientConnection.KubeconfigSecret
	a := &Agent{
		cfg:      c,
		log:      cfg.Logger.With("seed", c.SeedName()),
		version:  cfg.Version,
		seedName: c.SeedName(),
		server:   "https://" + c.HubClientConnection.Address,
		rand:     cfg.Rand,
		hook:     cfg.RotationDeadline,
		health:   health,
		secrets:  &identity.SecretStore{Client: seedClient.CoreV1(), Namespace: ref.Namespace, Name: ref.Name},
		cache:    cache.New(),
		seedREST: restCfg,
		gardener: gardenerIdentity(cfg.Version),
		hubReady: make(chan struct{}),

		seedClient:    seedClient,
		dialService:   cfg.DialService,
		assignmentLag: newAssignmentLag(),
		endpoints:     endpoints{ready: make(chan struct{})},
	}
	if a.dialService == nil {
		a.dialService = (&net.Dialer{}).DialContext
	}
	a.registry = a.newRegistry()
	return a, nil
}

// gardenerIdentity is the agent's identity for the Seed's status.gardener, made as the gardenlet makes its own: a
// random id for this process (Gardener's container id, or a random one outside a container), the host name (the
// pod's name in a cluster) and the version.
func gardenerIdentity(version string) *corev1beta1.Gardener {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "trellis-agent"
	}
	return &corev1beta1.Gardener{Id: crand.Text(), Name: name, Version: version}
}

func seedRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("seedClientConnection.kubeconfig is empty and the in-cluster configuration is unavailable: %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("seedClientConnection.kubeconfig: %w", err)
	}
	return c, nil
}

// errReconnect ends a connection attempt that succeeded in a way that calls for an immediate new one: after
// bootstrapping, and after a rotation.
var errReconnect = errors.New("reconnect")

// Run runs the agent until ctx ends; then it returns nil, once every goroutine it started has returned. It serves
// the health probes and metrics, builds the seed-side controllers (unless they are disabled) and returns an error at
// once if one cannot be built or the endpoints' addresses cannot be bound; it then keeps the agent link up (failed
// attempts are retried with backoff) and runs the controllers beside it. If the seed side fails (its cache cannot
// start), Run stops the link and returns that error. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	servers, listeners, err := a.listenEndpoints()
	if err != nil {
		return err
	}
	{
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(ctx)
		defer func() {
			cancel()
			wg.Wait()
		}()
		wg.Go(func() { a.runEndpoints(ctx, servers, listeners) })
	}
	a.log.Info("agent starting", "hub", a.cfg.HubClientConnection.Address, "version", a.version,
		"kubeconfigSecret", a.cfg.HubClientConnection.KubeconfigSecret.String())
	defer a.closeHubConn()
	switch {
	case a.cfg.Controllers.Disabled:
		return a.runLink(ctx)
	case a.seedREST == nil:
		a.log.Warn("seed-side controllers are off: the agent was given a seed clientset without a REST config")
		return a.runLink(ctx)
	}
	side, err := a.newSeedSide()
	if err != nil {
		return fmt.Errorf("agent: seed-side controllers: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := side.run(gctx, a); err != nil {
			return fmt.Errorf("agent: seed side: %w", err)
		}
		return nil
	})
	g.Go(func() error { return a.runLink(gctx) })
	return g.Wait()
}

// refusedMaxDelay bounds the wait after a connect the hub's host refused (nothing listens: the hub is restarting), so
// the agent is back within about a second of the hub's return (backoff.Backoff.RefusedMax).
const refusedMaxDelay = time.Second

// runLink keeps the agent link up until ctx ends, retrying failed attempts with backoff; it returns nil.
func (a *Agent) runLink(ctx context.Context) error {
	b := &backoff.Backoff{
		Initial:    a.cfg.ReconnectBackoff.InitialDelay.Duration,
		Max:        a.cfg.ReconnectBackoff.MaxDelay.Duration,
		ResetAfter: a.cfg.ReconnectBackoff.ResetAfter.Duration,
		RefusedMax: refusedMaxDelay,
		Rand:       a.rand,
	}
	for {
		err := a.connect(ctx)
		if ctx.Err() != nil {
			a.log.Info("agent stopped")
			return nil
		}
		if errors.Is(err, errReconnect) {
			continue
		}
		a.setLastErr(err)
		d := b.Delay(time.Now(), err) // a refusing hub's retry delay, when longer

		a.log.Warn("hub connection failed; retrying", "err", err, "retryIn", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			a.log.Info("agent stopped")
			return nil
		case <-t.C:
		}
	}
}

// connect makes one connection attempt: it loads stored credentials if it has none, bootstraps when there are none
// (or they expired and a bootstrap token is configured), and otherwise runs a session.
func (a *Agent) connect(ctx context.Context) error {
	if a.creds.Get() == nil {
		stored, err := a.secrets.Load(ctx)
		if err != nil {
			return err
		}
		if stored != nil {
			if err := stored.CheckSubject(a.seedName); err != nil {
				a.log.Warn("ignoring stored credentials", "secret", a.cfg.HubClientConnection.KubeconfigSecret.String(), "err", err)
			} else {
				a.log.Info("using stored credentials", "secret", a.cfg.HubClientConnection.KubeconfigSecret.String(), "notAfter", stored.NotAfter())
				a.useCredentials(stored)
			}
		}
	}
	creds := a.creds.Get()
	switch {
	case creds == nil:
		return a.bootstrap(ctx)
	case time.Now().After(creds.NotAfter()) && a.hasBootstrapToken():
		a.log.Warn("client certificate expired; bootstrapping again", "notAfter", creds.NotAfter())
		return a.bootstrap(ctx)
	}
	return a.session(ctx, creds)
}

func (a *Agent) hasBootstrapToken() bool {
	h := a.cfg.HubClientConnection
	return h.BootstrapToken != "" || h.BootstrapTokenFile != ""
}

// useCredentials makes c the credentials for new connections and draws its rotation deadline.
func (a *Agent) useCredentials(c *identity.Credentials) {
	deadline := a.drawDeadline(c, a.rand())
	a.mu.Lock()
	a.deadline, a.deadlineFor = deadline, c
	a.mu.Unlock()
	a.creds.Set(c)
}

// rotationDeadline is when to rotate c.
func (a *Agent) rotationDeadline(c *identity.Credentials) time.Time {
	a.mu.Lock()
	d, drawn := a.deadline, a.deadlineFor == c
	a.mu.Unlock()
	if drawn {
		return d
	}
	return a.drawDeadline(c, 0.5)
}

// drawDeadline is the rotation deadline of c at r (in [0, 1)) of the configured jitter range.
func (a *Agent) drawDeadline(c *identity.Credentials, r float64) time.Time {
	v := a.cfg.HubClientConnection.KubeconfigValidity
	d := identity.RotationDeadline(c.NotBefore(), c.NotAfter(), *v.AutoRotationJitterPercentageMin, *v.AutoRotationJitterPercentageMax, r)
	if a.hook != nil {
		d = a.hook(c.NotBefore(), c.NotAfter(), d)
	}
	return d
}

func (a *Agent) setLastErr(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = err
}

// Cache is the agent's local state of its seed.
func (a *Agent) Cache() *cache.Cache { return a.cache }

// SeedName is the name of the agent's seed.
func (a *Agent) SeedName() string { return a.seedName }

// Connected reports whether a session is up (the hub sent Welcome and the session has not ended).
func (a *Agent) Connected() bool { return a.connected.Load() }

// CertificateNotAfter is the end of the validity of the client certificate in use; zero before there is one.
func (a *Agent) CertificateNotAfter() time.Time {
	if c := a.creds.Get(); c != nil {
		return c.NotAfter()
	}
	return time.Time{}
}

// Status is a point-in-time view of the agent, for tests and diagnostics.
type Status struct {
	// Connected reports whether a session is up.
	Connected bool
	// SessionID is the hub's id of the current (or last) session.
	SessionID string
	// Sessions counts the sessions the hub welcomed.
	Sessions int64
	// CSRsSent counts certificate requests sent (bootstrap and rotation).
	CSRsSent int64
	// SeedRegistered reports whether the Seed was created or updated from seedConfig.
	SeedRegistered bool
	// CertificateNotAfter is the end of the client certificate's validity.
	CertificateNotAfter time.Time
	// RotationDeadline is when the client certificate will be rotated.
	RotationDeadline time.Time
	// HeartbeatAckLatency is the round trip of the last acknowledged heartbeat.
	HeartbeatAckLatency time.Duration
	// LastError is the error of the last failed connection attempt or session; a session's start clears it.
	LastError error
	// CRDsInstalled reports whether the extension CRDs were installed in the seed.
	CRDsInstalled bool
	// ControllersRunning reports whether the seed-side controllers run.
	ControllersRunning bool
}

// Status returns the agent's status.
func (a *Agent) Status() Status {
	s := Status{
		Connected:           a.connected.Load(),
		Sessions:            a.sessions.Load(),
		CSRsSent:            a.csrsSent.Load(),
		SeedRegistered:      a.seedRegistered.Load(),
		CRDsInstalled:       a.crdsInstalled.Load(),
		ControllersRunning:  a.controllers.Load(),
		CertificateNotAfter: a.CertificateNotAfter(),
		HeartbeatAckLatency: time.Duration(a.ackLatency.Load()),
	}
	a.mu.Lock()
	s.SessionID, s.LastError = a.sessionID, a.lastErr
	if c := a.creds.Get(); c != nil && a.deadlineFor == c {
		s.RotationDeadline = a.deadline
	}
	a.mu.Unlock()
	return s
}
