package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultPrefix         = "/trellis"
	DefaultWatchWindow    = 10000
	DefaultWatchWindowAge = 5 * time.Minute
)

// Config says where the data lives and how it is protected. The zero value plus DataDir is a working embedded store.
type Config struct {
	// Traces, when set, records the trace context of each traced write by its revision (for the agent link).
	Traces *tracing.Index
	// DataDir holds the embedded etcd's data under DataDir/etcd. Required when Endpoints is empty.
	DataDir string
	// Endpoints of an external etcd cluster. Empty starts an embedded single-member etcd.
	Endpoints []string
	// TLS for the external etcd's client connections; nil dials in plain text.
	TLS *tls.Config
	// Prefix of every key, default "/trellis". Several Trellis installations can share one etcd with different prefixes.
	Prefix string
	// EncryptionKeys protect the values of Encrypted resources: the first key encrypts, every key decrypts, so a key is
	// rotated by putting a new key first, rewriting the objects, then dropping the old key.
	EncryptionKeys []Key
	// WatchWindow is how many events of history each resource keeps for watch resumption (default 10000).
	WatchWindow int
	// WatchWindowAge is how long the history keeps an event at most (default 5m): a watch resumes from any
	// revision of the last WatchWindowAge, or of the last WatchWindow events if they span less. kube-apiserver's watch
	// cache keeps 75 s of events at least; the bound gives back what a burst of writes (a fleet's arrival) left in
	// the history of a resource that is quiet afterwards.
	WatchWindowAge time.Duration
	// EtcdListen is the client URL of the embedded etcd, e.g. "http://127.0.0.1:2379" or "unix:///run/trellis/etcd".
	// Default: an ephemeral port on 127.0.0.1. It must be a loopback address or a unix socket.
	EtcdListen string
	// Logger receives the store's and the embedded etcd's logs; nil discards them.
	Logger *slog.Logger
}

// Key is one AES-256 key for encryption at rest. Name is recorded with every value it encrypts.
type Key struct {
	Name   string
	Secret []byte // 32 bytes
}

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Prefix = "/" + strings.Trim(c.Prefix, "/")
	if c.WatchWindow == 0 {
		c.WatchWindow = DefaultWatchWindow
	}
	if c.WatchWindowAge == 0 {
		c.WatchWindowAge = DefaultWatchWindowAge
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.EtcdListen == "" && len(c.Endpoints) == 0 && c.DataDir != "" {
		// The embedded etcd has no authentication of its own: by default its clients reach it through a unix socket
		// in the data directory, which only the hub's user can open, rather than a loopback port anyone on the
		// machine could connect to. Socket paths are limited to about 100 bytes; longer data directories fall back
		// to an ephemeral loopback port.
		if abs, err := filepath.Abs(c.DataDir); err == nil && len(abs) < maxSocketPath-len("/etcd.sock") {
			c.EtcdListen = "unix://" + filepath.Join(abs, "etcd.sock")
		}
	}
}

// maxSocketPath is the portable limit of a unix socket path (sun_path is 108 bytes on Linux, 104 on others).
const maxSocketPath = 100

// Validate reports the first problem of a Config (after defaults are applied).
func (c *Config) Validate() error {
	if len(c.Endpoints) == 0 && c.DataDir == "" {
		return errors.New("store: DataDir is required for the embedded etcd (or give Endpoints)")
	}
	if c.Prefix == "/" {
		return errors.New("store: Prefix must not be the root")
	}
	if c.WatchWindow < 0 {
		return fmt.Errorf("store: WatchWindow must not be negative, got %d", c.WatchWindow)
	}
	if c.WatchWindowAge < 0 {
		return fmt.Errorf("store: WatchWindowAge must not be negative, got %s", c.WatchWindowAge)
	}
	seen := map[string]bool{}
	for i, k := range c.EncryptionKeys {
		if k.Name == "" || strings.ContainsAny(k.Name, ": \t\n") {
			return fmt.Errorf("store: EncryptionKeys[%d]: name %q must be non-empty without ':' or spaces", i, k.Name)
		}
		if seen[k.Name] {
			return fmt.Errorf("store: EncryptionKeys[%d]: duplicate name %q", i, k.Name)
		}
		seen[k.Name] = true
		if len(k.Secret) != 32 {
			return fmt.Errorf("store: EncryptionKeys[%d] (%s): secret must be 32 bytes, got %d", i, k.Name, len(k.Secret))
		}
	}
	if c.EtcdListen != "" {
		if len(c.Endpoints) > 0 {
			return errors.New("store: EtcdListen applies to the embedded etcd only, not with Endpoints")
		}
		if err := checkLocalURL(c.EtcdListen); err != nil {
			return fmt.Errorf("store: EtcdListen: %w", err)
		}
	}
	return nil
}

// checkLocalURL accepts unix sockets and loopback TCP addresses only: the embedded etcd has no authentication.
func checkLocalURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "unix", "unixs":
		return nil
	case "http", "https":
	default:
		return fmt.Errorf("%q: scheme must be http, https, unix or unixs", s)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: host must be a loopback address", s)
	}
	return nil
}

// Store is the handle on etcd and on the watch caches of the registered resources.
type Store struct {
	cfg    Config
	log    *slog.Logger
	etcd   *embed.Etcd // nil with external endpoints
	client *clientv3.Client
	enc    *transformer

	// ctx lives until Close; every goroutine of the store ends with it and is counted in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	progress *progressRequester

	mu          sync.Mutex
	collections map[string]*Collection // by group/resource
	closed      bool
	closeOnce   sync.Once
	closeErr    error

	rev atomic.Int64 // highest revision any cache has seen

	closing atomic.Bool // quiets etcd's shutdown errors
}

// Open starts the embedded etcd (Endpoints empty) or connects to the external one, and returns a Store without
// resources; Register adds them.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	enc, err := newTransformer(cfg.EncryptionKeys)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg:         cfg,
		log:         cfg.Logger,
		enc:         enc,
		collections: map[string]*Collection{},
	}
	var client *clientv3.Client
	endpoints := cfg.Endpoints
	if len(endpoints) == 0 {
		start := time.Now()
		e, endpoint, err := startEmbedded(ctx, cfg, zap.New(newSlogCore(cfg.Logger.With("component", "etcd"), zap.ErrorLevel, &s.closing)))
		if err != nil {
			return nil, err
		}
		s.etcd = e
		endpoints = []string{endpoint}
		s.log.Info("embedded etcd ready", "dir", e.Config().Dir, "endpoint", endpoint, "took", time.Since(start))
		// The store calls the member in this process; the endpoint serves etcdctl and other tools.
		client = inProcessClient(e.Server)
	} else {
		client, err = clientv3.New(clientv3.Config{
			Endpoints:            endpoints,
			TLS:                  cfg.TLS,
			DialTimeout:          5 * time.Second,
			DialKeepAliveTime:    30 * time.Second,
			DialKeepAliveTimeout: 10 * time.Second,
			Logger:               zap.New(newSlogCore(cfg.Logger.With("component", "etcd-client"), zap.ErrorLevel, &s.closing)),
			Context:              context.WithoutCancel(ctx),
			MaxCallRecvMsgSize:   64 << 20,
		})
		if err != nil {
			return nil, fmt.Errorf("store: connect to etcd %v: %w", endpoints, err)
		}
	}
	s.client = client
	// clientv3.New does not wait for a connection; a first read proves the cluster answers.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = client.Get(pctx, cfg.Prefix+"/", clientv3.WithCountOnly())
	cancel()
	if err != nil {
		s.closing.Store(true)
		client.Close()
		s.closeEtcd()
		return nil, fmt.Errorf("store: etcd %v does not answer: %w", endpoints, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.progress = newProgressRequester(s)
	if err := s.goroutine(s.progress.run); err != nil {
		return nil, err
	}
	return s, nil
}

// errClosed is returned by operations that would start work after Close.
var errClosed = errors.New("store: closed")

// goroutine runs fn as a goroutine owned by the store: Close cancels its context and waits for it. After Close it
// runs nothing and returns errClosed.
func (s *Store) goroutine(fn func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
	return nil
}

// Client is the etcd client of the store, for leader election and other coordination. Do not write under Prefix with
// it: the caches would see the writes, but read-your-writes would not cover them.
func (s *Store) Client() *clientv3.Client { return s.client }

// Revision is the latest etcd revision the watch caches have seen.
func (s *Store) Revision() int64 { return s.rev.Load() }

func (s *Store) observe(rev int64) {
	for {
		cur := s.rev.Load()
		if rev <= cur || s.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Close stops every watch, cache and the embedded etcd, and waits for their goroutines. Watchers' channels are closed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.closing.Store(true)
		s.cancel()
		s.wg.Wait()
		if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("store: close etcd client: %w", err)
		}
		s.closeEtcd()
	})
	return s.closeErr
}

func (s *Store) closeEtcd() {
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
}

// Register adds a resource: it lists the resource's keys, starts the watch that keeps its cache current and returns
// when the cache holds the listed state. A resource is registered once per Store.
func (s *Store) Register(ctx context.Context, r Resource) (*Collection, error) {
	c, err := newCollection(s, r)
	if err != nil {
		return nil, err
	}
	id := r.Group + "/" + r.Resource
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	if _, ok := s.collections[id]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("store: resource %s registered twice", id)
	}
	s.collections[id] = c
	s.mu.Unlock()

	fail := func(err error) (*Collection, error) {
		s.mu.Lock()
		delete(s.collections, id)
		s.mu.Unlock()
		return nil, fmt.Errorf("store: register %s: %w", id, err)
	}
	rev, err := c.cache.start(ctx)
	if err != nil {
		return fail(err)
	}
	if err := s.goroutine(c.cache.run); err != nil {
		close(c.cache.backfilled)
		return fail(err)
	}
	if err := s.goroutine(func(ctx context.Context) { c.cache.backfill(ctx, rev) }); err != nil {
		close(c.cache.backfilled)
	}
	return c, nil
}
