package agentlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// Identity is who opened a stream, as the hub's authenticators established it.
type Identity struct {
	// User is the user name.
	User string
	// Seed is the seed of a seed client certificate ("" otherwise).
	Seed string
	// CertNotAfter is the expiry of the seed client certificate.
	CertNotAfter time.Time
	// CertAuthorityKeyID is the authority key id of the seed client certificate (which CA issued it).
	CertAuthorityKeyID []byte
	// BootstrapTokenID is the id of the bootstrap token the stream authenticated with ("" otherwise).
	BootstrapTokenID string
}

// Source gives the agent link the store's collections.
type Source interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// TrustBundle gives the hub's CA bundle in PEM and which CA signs new certificates (pki.Authority).
type TrustBundle interface {
	BundlePEM() []byte
	// SignerKeyID is the subject key id of the CA that signs new certificates: during a CA rotation the new one.
	SignerKeyID() []byte
}

// Config configures the agent link of one hub replica.
type Config struct {
	// Traces, when set, gives each assignment the traceparent of the write of its version (Assignment.traceparent).
	Traces *tracing.Index
	Source Source
	Graph  *seedgraph.Graph
	// GraphReady is closed once the graph has loaded every resource; sessions wait for it.
	GraphReady <-chan struct{}
	// CA is the trust bundle answered with every signed certificate (both CAs while a CA rotation runs), so
	// agents trust the hub's serving certificate whichever CA issued it.
	CA TrustBundle
	// Etcd and Prefix locate the presence keys.
	Etcd   *clientv3.Client
	Prefix string
	// Identify returns the identity of a stream's caller.
	Identify func(ctx context.Context) (Identity, error)
	// ReplicaID names this replica in presence keys.
	ReplicaID string
	// HubVersion is reported to agents.
	HubVersion string
	// TunnelDomain is the domain of the hub's shoot API names, reported to agents in Welcome ("" without a
	// passthrough listener).
	TunnelDomain string
	// HeartbeatInterval is the interval agents heartbeat at (default 2 s); a session that misses three ends.
	HeartbeatInterval time.Duration
	// LeaseWritesPerSecond bounds the heartbeat-driven writes of seed Leases (default 40).
	LeaseWritesPerSecond float64
	// MinLeaseInterval is the shortest interval between two writes of one seed's Lease (default 10 s).
	MinLeaseInterval time.Duration
	// PresenceTTL is the lease (seconds) presence keys are bound to: how long a crashed replica's agents still count
	// as present (default 15).
	PresenceTTL int64
	// ApprovalTimeout bounds how long a bootstrap or rotation waits for its CSR to be approved and signed (default 60 s).
	ApprovalTimeout time.Duration
	// MaxBatch is the most assignments in one message (default 256).
	MaxBatch int
	// MaxStarts bounds the sessions that start at once, from Hello until their first sync has been sent (default
	// 256); later ones wait for a slot.
	MaxStarts int
	// MaxWaitingStarts bounds the streams waiting for a start slot (default 4096); TapHandle refuses streams beyond
	// it at once with a retry delay.
	MaxWaitingStarts int
	// StartTimeout bounds the wait for a start slot (default 20 s); a stream that waited this long is refused with a
	// retry delay.
	StartTimeout time.Duration
	// RetryAfter is the mean retry delay of a refused stream (default 2 s); each refusal draws its delay uniformly
	// from [RetryAfter/2, 3·RetryAfter/2).
	RetryAfter time.Duration
	// ResumeFloor is the revision the store was restored at from a snapshot (0: never restored): an agent's versions
	// at or below it may name states the restore undid, so its session starts with a full sync instead of resuming.
	ResumeFloor int64
	// NoDataConnections keeps passthrough tunnels on the agent link's Tunnel calls: DialTunnel offers agents no raw
	// data connections (docs/tunnels.md).
	NoDataConnections bool
	// Registerer receives the link's metrics (optional).
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

func (c *Config) defaults() {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.LeaseWritesPerSecond == 0 {
		c.LeaseWritesPerSecond = 40
	}
	if c.MinLeaseInterval == 0 {
		c.MinLeaseInterval = 10 * time.Second
	}
	if c.PresenceTTL == 0 {
		c.PresenceTTL = 15
	}
	if c.ApprovalTimeout == 0 {
		c.ApprovalTimeout = 60 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.MaxStarts == 0 {
		c.MaxStarts = 256
	}
	if c.MaxWaitingStarts == 0 {
		c.MaxWaitingStarts = 4096
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 20 * time.Second
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 2 * time.Second
	}
	if c.ReplicaID == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		c.ReplicaID = hex.EncodeToString(b)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Server implements agentv1.AgentServiceServer.
type Server struct {
	cfg      Config
	tag      string // replicaTag of cfg.ReplicaID, the start of every tunnel id
	colls    collections
	presence *presence
	leases   *leaseWriter
	metrics  *metrics
	encoder  *encoder
	synced   atomic.Pointer[syncedAt] // the latest SyncedVersions map built (syncedVersions)

	mu       sync.Mutex
	sessions map[string]*session // by seed: one agent per seed
	ready    chan struct{}
	runCtx   context.Context // set before ready closes; sessions end with it
	// streams counts the goroutines that receive from agent streams whose handlers cannot end them early. A receive
	// ends only once its stream's handler has returned (gRPC cancels the stream then), so they outlive their handlers
	// briefly; Run waits for them.
	streams workers
	// starts holds a token per session starting (MaxStarts); waiting counts the streams waiting for one.
	starts  chan struct{}
	waiting atomic.Int64
	// statusWrites holds a token per Seed status write in progress (maxStatusWrites).
	statusWrites chan struct{}

	tunnelMu sync.Mutex
	pending  map[string]*pendingTunnel // tunnels being opened, by id
	// usedTokens are the ids of tunnels whose data token was used, until the token would have expired: a second
	// preface with one is counted as a reuse.
	usedTokens map[string]time.Time
}

// workers counts goroutines for their owner, which waits for them with Close; once closed it starts no more, so
// that the wait is final.
type workers struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs fn in a counted goroutine; false, and nothing runs, once Close has been called.
func (w *workers) Go(fn func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.wg.Go(fn)
	return true
}

// Close starts no more goroutines and waits for those running.
func (w *workers) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}

type collections struct {
	csrs, secrets, seeds, shoots, leases *store.Collection
}

// New returns the agent link. Run must be running for sessions to be served.
func New(cfg Config) (*Server, error) {
	cfg.defaults()
	s := &Server{cfg: cfg, tag: replicaTag(cfg.ReplicaID), sessions: map[string]*session{}, ready: make(chan struct{}), encoder: newEncoder(),
		starts: make(chan struct{}, cfg.MaxStarts), statusWrites: make(chan struct{}, maxStatusWrites)}
	for gr, dst := range map[schema.GroupResource]**store.Collection{
		{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: &s.colls.csrs,
		{Resource: "secrets"}:                              &s.colls.secrets,
		{Group: "core.gardener.cloud", Resource: "seeds"}:  &s.colls.seeds,
		{Group: "core.gardener.cloud", Resource: "shoots"}: &s.colls.shoots,
		{Group: "coordination.k8s.io", Resource: "leases"}: &s.colls.leases,
	} {
		c, ok := cfg.Source.Collection(gr)
		if !ok {
			return nil, fmt.Errorf("agentlink: resource %s is not served", gr)
		}
		*dst = c
	}
	s.metrics = newMetrics(cfg.Registerer, s)
	s.presence = newPresence(cfg.Etcd, cfg.Prefix, cfg.ReplicaID, cfg.PresenceTTL, cfg.Log, s.metrics)
	s.leases = newLeaseWriter(s)
	return s, nil
}

// Run keeps the replica's presence lease, writes the seeds' Leases and ends silent sessions until ctx ends; sessions end with ctx too.
// It returns once the streams' receive loops have ended, which needs their handlers to have returned: stop the gRPC
// servers before waiting for Run.
func (s *Server) Run(ctx context.Context) error {
	s.runCtx = ctx
	defer s.streams.Close()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	granted := make(chan struct{})
	wg.Add(4)
	go func() { defer wg.Done(); errc <- s.presence.run(ctx, granted) }()
	go func() { defer wg.Done(); s.leases.run(ctx); errc <- nil }()
	go func() { defer wg.Done(); s.checkHeartbeats(ctx); errc <- nil }()
	go func() {
		defer wg.Done()
		for _, ch := range []<-chan struct{}{granted, s.cfg.GraphReady} {
			select {
			case <-ch:
			case <-ctx.Done():
				errc <- nil
				return
			}
		}
		close(s.ready)
		errc <- nil
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

// Sessions returns the seeds with a live session in this replica.
func (s *Server) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sessions))
	for seed := range s.sessions {
		out = append(out, seed)
	}
	return out
}

// Connect serves one agent stream.
func (s *Server) Connect(stream agentv1.AgentService_ConnectServer) error {
	ctx := stream.Context()
	id, err := s.cfg.Identify(ctx)
	if err != nil {
		return err
	}
	switch {
	case id.BootstrapTokenID != "":
		return s.bootstrap(ctx, id, stream)
	case id.Seed != "":
		return s.serveSession(ctx, id, stream)
	}
	return status.Errorf(codes.PermissionDenied, "user %q is neither a seed agent (client certificate with O=%s) nor a bootstrap token", id.User, "gardener.cloud:system:seeds")
}

// checkHeartbeats ends the sessions whose heartbeats have stopped, looking every heartbeat interval: one goroutine
// for all sessions instead of a timer per session.
func (s *Server) checkHeartbeats(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	var all []*session
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			all = all[:0]
			for _, ss := range s.sessions {
				all = append(all, ss)
			}
			s.mu.Unlock()
			for _, ss := range all {
				if err := ss.silent(now); err != nil {
					ss.end(err)
				}
			}
			clear(all)
		}
	}
}

// recvTimeout receives one message, failing after d. The receive goroutine is counted in s.streams.
func (s *Server) recvTimeout(ctx context.Context, stream agentv1.AgentService_ConnectServer, d time.Duration) (*agentv1.AgentMessage, error) {
	type res struct {
		m   *agentv1.AgentMessage
		err error
	}
	ch := make(chan res, 1)
	if !s.streams.Go(func() {
		m, err := stream.Recv()
		ch <- res{m, err}
	}) {
		return nil, status.Error(codes.Unavailable, errShutdown.Error())
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return nil, status.Errorf(codes.DeadlineExceeded, "no message within %s of connecting", d)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxStatusWrites bounds the sessions' Seed status writes in progress at once.
const maxStatusWrites = 16

var (
	errSuperseded = errors.New("superseded by a newer session of the same seed")
	errShutdown   = errors.New("the hub is shutting down; reconnect")
)

// QueueLength is the number of assignments waiting in the session of seed (-1 without a session).
func (s *Server) QueueLength(seed string) int {
	s.mu.Lock()
	ss := s.sessions[seed]
	s.mu.Unlock()
	if ss == nil {
		return -1
	}
	return ss.queuedAssignments()
}
