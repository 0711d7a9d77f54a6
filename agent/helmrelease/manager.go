package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/transport"
)

// Defaults of Config.
const (
	DefaultRequestTimeout   = 30 * time.Second
	DefaultOperationTimeout = 5 * time.Minute
	DefaultPullTimeout      = 2 * time.Minute
	DefaultMaxHistory       = 10
	DefaultChartCacheBytes  = 64 << 20
)

// Config configures a Manager.
type Config struct {
	// REST reaches the seed cluster; it is copied, never modified.
	REST *rest.Config
	// Log receives the Manager's logs, and Helm's own at Debug level; nil discards.
	Log *slog.Logger
	// RegistryTransport is the base of the connections to OCI registries (proxy, dialer, timeouts). It is cloned for
	// every Fetch and given the Source's TLS roots; nil clones http.DefaultTransport. Registries are spoken to over
	// TLS only.
	RegistryTransport *http.Transport
	// ChartCacheBytes caps the archives of OCI charts kept in memory (the sum of their sizes, least recently used
	// evicted first; an archive larger than the cap is not kept); default 64 MiB, negative disables the cache.
	ChartCacheBytes int64
	// MaxHistory is how many revisions of a release are kept; default 10.
	MaxHistory int
	// RequestTimeout bounds each request to the seed (unless REST sets its own Timeout); default 30 s.
	RequestTimeout time.Duration
	// OperationTimeout bounds each Apply and Uninstall on top of its context; default 5 min.
	OperationTimeout time.Duration
	// PullTimeout bounds one pull from a registry. A pull is shared by the Fetches of the same digest, so it is
	// bounded by this, not by the context of the Fetch that started it; default 2 min.
	PullTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.ChartCacheBytes == 0 {
		c.ChartCacheBytes = DefaultChartCacheBytes
	}
	if c.MaxHistory <= 0 {
		c.MaxHistory = DefaultMaxHistory
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.OperationTimeout <= 0 {
		c.OperationTimeout = DefaultOperationTimeout
	}
	if c.PullTimeout <= 0 {
		c.PullTimeout = DefaultPullTimeout
	}
}

// Validate reports what is missing from the configuration.
func (c *Config) Validate() error {
	if c.REST == nil {
		return errors.New("helmrelease: Config.REST is required")
	}
	return nil
}

// Manager manages the Helm releases of one seed. Its methods are safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	// rest is the seed's configuration with the request timeout and warnings sent to log; every operation binds a
	// copy of it to its context.
	rest *rest.Config
	// client and apps are bounded by the request timeout only; client writes release records (see doc.go), apps
	// reads for Health.
	client corev1client.CoreV1Interface
	apps   appsv1client.AppsV1Interface

	locks  releaseLocks
	charts *chartCache
	pulls  singleflight.Group
}

// New returns a Manager for the seed cfg.REST reaches. It does not contact the seed.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	m := &Manager{cfg: cfg, log: cfg.Log, charts: newChartCache(cfg.ChartCacheBytes)}

	m.rest = rest.CopyConfig(cfg.REST)
	if m.rest.Timeout == 0 {
		m.rest.Timeout = cfg.RequestTimeout
	}
	if m.rest.WarningHandler == nil && m.rest.WarningHandlerWithContext == nil {
		m.rest.WarningHandler = warningLogger{m.log}
	}
	var err error
	if m.client, err = corev1client.NewForConfig(m.rest); err != nil {
		return nil, fmt.Errorf("helmrelease: seed client: %w", err)
	}
	if m.apps, err = appsv1client.NewForConfig(m.rest); err != nil {
		return nil, fmt.Errorf("helmrelease: seed client: %w", err)
	}
	return m, nil
}

// operation is one call that works on one release in the seed: its clients, all bound to the call's context except
// the release records (see doc.go), and what it logged.
type operation struct {
	name, namespace string
	log             *slog.Logger

	seed      *rest.Config // bound to the call's context
	discovery discovery.CachedDiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	dynamic   dynamic.Interface
	records   records
}

// newOperation prepares an operation on the release name in namespace. Everything it sends to the seed is bound to
// ctx, except the release records, which go through m.client (see doc.go).
func (m *Manager) newOperation(ctx context.Context, name, namespace string) (*operation, error) {
	log := m.log.With("release", name, "namespace", namespace)
	config := bindConfig(ctx, m.rest)
	// Discovery is per operation, so that it is bound to ctx too. Sharing it would save little: an install or
	// upgrade reads the seed's capabilities afresh, and an unchanged Apply does not discover at all.
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: seed discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("helmrelease: seed client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &operation{
		name: name, namespace: namespace, log: log,
		seed:      config,
		discovery: cached,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(cached),
		dynamic:   dyn,
		records:   m.records(namespace),
	}, nil
}

// resetMapper forgets what discovery found, after CRDs were created.
func (op *operation) resetMapper() {
	op.discovery.Invalidate()
	op.mapper.Reset()
}

// records are the release records of namespace.
func (m *Manager) records(namespace string) records {
	return records{secrets: m.client.Secrets(namespace)}
}

// bindConfig returns a copy of base whose requests also end when ctx ends.
func bindConfig(ctx context.Context, base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	c.WrapTransport = transport.Wrappers(base.WrapTransport, func(rt http.RoundTripper) http.RoundTripper {
		return &ctxTransport{ctx: ctx, next: rt}
	})
	return c
}

// ctxTransport ends every request it carries when ctx ends, as well as when the request's own context ends: Helm's
// actions take no context, so this is how an operation's context reaches the seed requests they make.
type ctxTransport struct {
	ctx  context.Context
	next http.RoundTripper
}

func (t *ctxTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err // the http.Client names the request
	}
	reqCtx, cancel := req.Context(), context.CancelFunc(func() {})
	if deadline, ok := t.ctx.Deadline(); ok {
		// A deadline of its own makes the request fail with context.DeadlineExceeded, not just Canceled.
		reqCtx, cancel = context.WithDeadline(reqCtx, deadline)
	}
	reqCtx, cancelReq := context.WithCancel(reqCtx)
	stop := context.AfterFunc(t.ctx, cancelReq)
	done := func() {
		stop()
		cancelReq()
		cancel()
	}
	resp, err := t.next.RoundTrip(req.WithContext(reqCtx))
	if err != nil {
		done()
		return nil, err
	}
	// The body is read after RoundTrip returns, so the request's context lives until the body is closed.
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: done}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport utilities see through this wrapper.
func (t *ctxTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// warningLogger sends the seed's API warnings to the log instead of klog.
type warningLogger struct{ log *slog.Logger }

func (w warningLogger) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		w.log.Warn("seed API warning", "warning", text)
	}
}

// releasingBody runs release once, when the body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// registryLog is where Helm's registry client, which prints its progress, writes: the log, at Debug level.
type registryLog struct{ log *slog.Logger }

func (h registryLog) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(string(p)); s != "" {
		h.log.Debug(s, "source", "helm-registry")
	}
	return len(p), nil
}
