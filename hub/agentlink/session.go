package agentlink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/resources"
	"github.com/trellis-dev/trellis/tracing"
)

// streamed holds resources.Streamed, the resources an agent receives. ShootStates, Namespaces, Leases and CSRs belong
// to seeds too (the seed authorizer lets agents read them) but are not streamed: agents read them on demand.
var streamed = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range resources.Streamed {
		m[r] = true
	}
	return m
}()

// syncMarker stands in the queue for the SyncComplete message.
var syncMarker = seedgraph.Ref{}

// Annotations of Gardener's.
const (
	operationAnnotation = "gardener.cloud/operation"
	renewKubeconfig     = "renew-kubeconfig"
)

// session is one agent's stream. Its queue holds at most one entry per object of the seed (later changes of a queued
// object coalesce into the entry, and the object's state is read when it is sent), so a slow agent costs memory
// bounded by its seed's size and never holds up the graph or other sessions.
//
// A session owns no goroutine while it is idle besides its handler, which receives: what it sends (heartbeat acks,
// assignments) and writes (the Seed's status) runs on goroutines started on demand that end when nothing is left
// (demand), and one goroutine of the server ends silent sessions (Server.checkHeartbeats). With 10,000 agents each
// goroutine per session costs tens of MiB of stacks.
type session struct {
	srv    *Server
	id     string
	seed   string
	ident  Identity
	stream agentv1.AgentService_ConnectServer
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu sync.Mutex
	// pending and order are the queue; both are dropped when it empties (a map keeps its buckets after deletes, and
	// the first sync queues the whole seed), so an idle session holds none.
	pending map[seedgraph.Ref]struct{}
	order   []seedgraph.Ref
	head    int
	control []*agentv1.HubMessage
	// welcomed is set once the session's Welcome and initial state are queued (Graph.Subscribe's initial call); the
	// sender sends nothing before it. The session is registered, and so reachable by tunnels and rotations that
	// queue control messages and poke the sender, before that.
	welcomed atomic.Bool
	// ackSeq is the sequence of the latest heartbeat not yet acknowledged, if ackDue: acknowledgements are
	// cumulative (the agent takes an ack as one for every heartbeat up to its sequence), so heartbeats that arrive
	// while the sender is behind are answered by one ack.
	ackSeq int64
	ackDue bool

	// workers are the session's goroutines besides its handler: the sender, the status writer and a certificate
	// rotation in progress, each started on demand. The handler waits for them before it returns.
	workers workers
	// sender sends what is queued; statusWriter looks at the Seed's status. Requests while one runs coalesce into one
	// more run that sees the latest state.
	sender, statusWriter demand
	// started releases the session's start slot (Server.admitStart) once the first sync has been sent.
	started func()
	// ender ends the stream early (nil if gRPC offers no way to).
	ender statusWriter

	lastHeartbeat atomic.Int64 // unix nanoseconds
	healthy       atomic.Bool
	ackedSeq      atomic.Int64
	rotating      atomic.Bool
	notAfter      atomic.Int64 // unix seconds of the client certificate's expiry
	issuer        atomic.Value // string: the authority key id of the client certificate
	caRenewSent   atomic.Bool  // the agent was asked to renew because another CA signs now

	// Sender-owned (one sender runs at a time).
	// ack, ackOneof and ackMsg are the heartbeat acknowledgement, sent again for every heartbeat: gRPC has encoded a
	// message when Send returns, and 5,000 heartbeats a second at 10,000 agents made three objects each garbage.
	ack        agentv1.HeartbeatAck
	ackOneof   agentv1.HubMessage_HeartbeatAck
	ackMsg     agentv1.HubMessage
	seq        int64
	renewSent  bool
	sentSynced int64
	syncedAt   time.Time
}

// demand runs a function on a worker goroutine whenever it is asked to, one run at a time: an ask while it runs leads
// to one more run after it, an ask while none runs starts a goroutine, and no goroutine exists while nothing is
// asked.
type demand struct {
	wanted, running atomic.Bool
}

// ask requests a run of fn on a goroutine of ws (none once ws is closed).
func (d *demand) ask(ws *workers, fn func()) {
	d.wanted.Store(true)
	if d.running.CompareAndSwap(false, true) && !ws.Go(func() { d.loop(fn) }) {
		d.running.Store(false)
	}
}

// do runs fn on the calling goroutine unless a run is in progress, which then runs once more instead.
func (d *demand) do(fn func()) {
	d.wanted.Store(true)
	if d.running.CompareAndSwap(false, true) {
		d.loop(fn)
	}
}

func (d *demand) loop(fn func()) {
	for {
		for d.wanted.Swap(false) {
			fn()
		}
		d.running.Store(false)
		// An ask between the last Swap and the Store saw running and started nothing: take it over.
		if !d.wanted.Load() || !d.running.CompareAndSwap(false, true) {
			return
		}
	}
}

func newSessionID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// welcome queues the seed's members the agent does not hold (all of them unless resumed from versions), the sync
// marker and, ahead of every control message queued so far, the Welcome; then lets the sender send. It runs under
// the graph's lock (Graph.Subscribe's initial call), before any Notify can start the sender, and takes the session's
// lock as enqueue does: tunnels and rotations reach a session once it is registered, before this, and a sender they
// poked may have dropped the emptied queue.
func (ss *session) welcome(members []seedgraph.Member, resumed bool, resume map[string]int64) {
	cfg := &ss.srv.cfg
	sort.Slice(members, func(i, j int) bool { return members[i].Version < members[j].Version })
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.pending == nil {
		ss.pending = map[seedgraph.Ref]struct{}{}
	}
	for _, m := range members {
		if !streamed[m.Ref.Resource] {
			continue
		}
		if resumed && m.Version <= resume[m.Ref.Resource] {
			continue // the agent holds it as it is
		}
		ss.pending[m.Ref] = struct{}{}
		ss.order = append(ss.order, m.Ref)
	}
	ss.pending[syncMarker] = struct{}{}
	ss.order = append(ss.order, syncMarker)
	ss.control = append([]*agentv1.HubMessage{{Message: &agentv1.HubMessage_Welcome{Welcome: &agentv1.Welcome{
		SessionId: ss.id, HeartbeatInterval: durationpb.New(cfg.HeartbeatInterval), Resumed: resumed,
		HubVersion: cfg.HubVersion, TunnelDomain: cfg.TunnelDomain,
	}}}}, ss.control...)
	ss.welcomed.Store(true)
}

// Notify queues ref for sending (seedgraph.Subscriber). It runs under the graph's lock.
func (ss *session) Notify(ref seedgraph.Ref) {
	if !streamed[ref.Resource] {
		return
	}
	ss.enqueue(ref)
}

func (ss *session) enqueue(ref seedgraph.Ref) {
	ss.mu.Lock()
	if _, ok := ss.pending[ref]; !ok {
		if ss.pending == nil {
			ss.pending = map[seedgraph.Ref]struct{}{}
		}
		ss.pending[ref] = struct{}{}
		ss.order = append(ss.order, ref)
	}
	ss.mu.Unlock()
	ss.poke()
}

// poke has the sender send what is queued.
func (ss *session) poke() {
	ss.sender.ask(&ss.workers, ss.send)
}

func (ss *session) sendControl(m *agentv1.HubMessage) {
	ss.mu.Lock()
	ss.control = append(ss.control, m)
	ss.mu.Unlock()
	ss.poke()
}

// pop takes up to n queued refs, stopping before the sync marker; marker reports that the marker was taken instead
// (only when it is first), and empty that nothing is left.
func (ss *session) pop(n int) (refs []seedgraph.Ref, marker, empty bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for ss.head < len(ss.order) && len(refs) < n {
		r := ss.order[ss.head]
		if r == syncMarker {
			if len(refs) > 0 {
				break
			}
			marker = true
			ss.head++
			delete(ss.pending, r)
			break
		}
		refs = append(refs, r)
		ss.head++
		delete(ss.pending, r)
	}
	if ss.head == len(ss.order) {
		ss.pending, ss.order, ss.head = nil, nil, 0
	} else if ss.head > 1024 && ss.head > len(ss.order)/2 {
		ss.order = append(ss.order[:0:0], ss.order[ss.head:]...)
		ss.head = 0
	}
	return refs, marker, len(ss.order) == ss.head
}

// takeControl takes the queued control messages and the heartbeat acknowledgement due, if any.
func (ss *session) takeControl() (control []*agentv1.HubMessage, ackSeq int64, ackDue bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	control, ss.control = ss.control, nil
	ackDue, ss.ackDue = ss.ackDue, false
	return control, ss.ackSeq, ackDue
}

// sendAck acknowledges the heartbeats up to seq; the ack carries the graph's synced revision when it moved on, the
// agent's versions were last advanced ten heartbeat intervals ago and nothing is queued (agents that receive no
// assignments learn that they are current that way).
func (ss *session) sendAck(seq, synced int64) error {
	if ss.ackMsg.Message == nil {
		ss.ackOneof.HeartbeatAck = &ss.ack
		ss.ackMsg.Message = &ss.ackOneof
	}
	ss.ack.Sequence, ss.ack.SyncedRevision = seq, 0
	if synced > ss.sentSynced && time.Since(ss.syncedAt) > 10*ss.srv.cfg.HeartbeatInterval && ss.queueLen() == 0 {
		ss.ack.SyncedRevision = synced
		ss.sentSynced, ss.syncedAt = synced, time.Now()
	}
	return ss.stream.Send(&ss.ackMsg)
}

// queueLen is how many entries are queued, the sync marker among them while it waits.
func (ss *session) queueLen() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.order) - ss.head
}

// queuedAssignments is how many objects are queued: the entries less the sync marker while it waits.
func (ss *session) queuedAssignments() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := len(ss.order) - ss.head
	if _, ok := ss.pending[syncMarker]; ok {
		n--
	}
	return n
}

// serveSession runs the session of an agent with a seed client certificate.
func (s *Server) serveSession(ctx context.Context, id Identity, stream agentv1.AgentService_ConnectServer) error {
	msg, err := s.recvTimeout(ctx, stream, 30*time.Second)
	if err != nil {
		return err
	}
	hello := msg.GetHello()
	if hello == nil {
		return status.Errorf(codes.InvalidArgument, "the first message of a session must be Hello, got %s", messageName(msg))
	}
	if hello.GetSeedName() != id.Seed {
		return status.Errorf(codes.PermissionDenied, "hello.seed_name %q does not match the client certificate's seed %q", hello.GetSeedName(), id.Seed)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return status.Error(codes.Unavailable, "the hub is still loading; retry")
	}
	release, err := s.admitStart(ctx)
	if err != nil {
		return err
	}
	var once sync.Once
	started := func() { once.Do(release) }
	defer started()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ss := &session{
		srv: s, id: newSessionID(), seed: id.Seed, ident: id, stream: stream, ctx: sctx, cancel: cancel,
		pending: map[seedgraph.Ref]struct{}{}, started: started, ender: statusWriterOf(ctx),
	}
	defer context.AfterFunc(s.runCtx, func() { ss.end(errShutdown) })()
	ss.lastHeartbeat.Store(time.Now().UnixNano())
	ss.healthy.Store(true)
	ss.notAfter.Store(id.CertNotAfter.Unix())
	ss.issuer.Store(string(id.CertAuthorityKeyID))
	s.register(ss)
	defer s.deregister(ss)

	resume := hello.GetResumeVersions()
	var resumed bool
	unsubscribe := s.cfg.Graph.Subscribe(ss.seed, ss, func(members []seedgraph.Member, synced int64) {
		resumed = canResume(resume, synced, s.cfg.ResumeFloor)
		ss.welcome(members, resumed, resume)
	})
	defer unsubscribe()
	s.cfg.Log.Info("agent session started", "seed", ss.seed, "session", ss.id, "resumed", resumed, "queued", ss.queuedAssignments())
	ss.checkIssuer()
	s.metrics.sessionsStarted.Inc()

	s.presence.set(ss.seed, ss.id, true)
	s.leases.add(ss.seed)
	defer func() {
		s.presence.remove(ss.seed, ss.id)
		s.leases.remove(ss.seed, ss.id)
	}()
	ss.poke()

	// The handler's goroutine receives, and the session ends early by ending its stream (session.end). Should gRPC
	// offer no way to, a second goroutine receives; it can only end once the handler has returned (gRPC cancels the
	// stream then), so the server owns it (s.streams).
	if ss.ender != nil {
		cancel(ss.recvLoop())
	} else if s.streams.Go(func() { cancel(ss.recvLoop()) }) {
		<-sctx.Done()
	} else {
		cancel(errShutdown)
	}
	ss.workers.Close()
	cause := context.Cause(sctx)
	s.cfg.Log.Info("agent session ended", "seed", ss.seed, "session", ss.id, "cause", cause)
	return endStatus(cause)
}

// endStatus is the status a session's stream ends with, nil for the agent's own end.
func endStatus(cause error) error {
	switch {
	case errors.Is(cause, io.EOF), errors.Is(cause, context.Canceled):
		return nil
	case errors.Is(cause, errSuperseded):
		return status.Error(codes.Aborted, errSuperseded.Error())
	case errors.Is(cause, errShutdown):
		return status.Error(codes.Unavailable, errShutdown.Error())
	}
	return cause
}

// end ends the session for cause: the agent gets the status of cause at once, and the handler's receive returns.
func (ss *session) end(cause error) {
	ss.cancel(cause)
	if ss.ender != nil {
		if err := endStatus(context.Cause(ss.ctx)); err != nil {
			_ = ss.ender.WriteStatus(status.Convert(err))
		}
	}
}

// canResume reports whether the agent's versions can be resumed from: every streamed resource has a version, none
// beyond what the hub has synced (an agent ahead of the hub saw a state the hub no longer has, e.g. after a restore),
// none at or below floor (a restore bumps revisions past what agents saw before it: package backup).
func canResume(versions map[string]int64, synced, floor int64) bool {
	if len(versions) == 0 {
		return false
	}
	for _, r := range resources.Streamed {
		v, ok := versions[r]
		if !ok || v <= 0 || v > synced || v <= floor {
			return false
		}
	}
	return true
}

func (s *Server) register(ss *session) {
	s.mu.Lock()
	old := s.sessions[ss.seed]
	s.sessions[ss.seed] = ss
	n := len(s.sessions)
	s.mu.Unlock()
	s.metrics.sessions.Set(float64(n))
	if old != nil {
		old.end(errSuperseded)
	}
}

func (s *Server) deregister(ss *session) {
	s.mu.Lock()
	if s.sessions[ss.seed] == ss {
		delete(s.sessions, ss.seed)
	}
	n := len(s.sessions)
	s.mu.Unlock()
	s.metrics.sessions.Set(float64(n))
}

func (ss *session) recvLoop() error {
	for {
		msg, err := ss.stream.Recv()
		if err != nil {
			return err
		}
		switch m := msg.GetMessage().(type) {
		case *agentv1.AgentMessage_Heartbeat:
			ss.heartbeat(m.Heartbeat)
		case *agentv1.AgentMessage_Ack:
			ss.ackedSeq.Store(m.Ack.GetSequence())
		case *agentv1.AgentMessage_CertificateRequest:
			if !ss.rotating.CompareAndSwap(false, true) {
				return status.Error(codes.FailedPrecondition, "a certificate request is already being processed")
			}
			if !ss.workers.Go(func() { ss.rotate(m.CertificateRequest) }) {
				return context.Cause(ss.ctx) // the session is ending
			}
		case *agentv1.AgentMessage_Hello:
			return status.Error(codes.InvalidArgument, "Hello may only be sent once, first")
		default:
			return status.Error(codes.InvalidArgument, "empty AgentMessage")
		}
	}
}

func (ss *session) heartbeat(hb *agentv1.Heartbeat) {
	ss.lastHeartbeat.Store(time.Now().UnixNano())
	ss.srv.metrics.heartbeats.Inc()
	healthy := hb.GetSeedHealthy()
	if ss.healthy.Swap(healthy) != healthy {
		// Only transitions write: an unhealthy seed stops counting as present, as a gardenlet that cannot reach
		// its seed stops renewing its Lease.
		ss.srv.presence.set(ss.seed, ss.id, healthy)
		if healthy {
			ss.srv.leases.add(ss.seed)
			ss.ensureSeedStatus()
		} else {
			ss.srv.leases.remove(ss.seed, "")
		}
	}
	// The receiving goroutine sends the ack itself unless a sender runs: a goroutine per heartbeat would cost more
	// than the ack. It cannot deadlock on flow control: it blocks only while the agent does not read, and a session
	// whose agent does not read ends (its heartbeats stop) with its stream.
	ss.mu.Lock()
	ss.ackSeq, ss.ackDue = max(ss.ackSeq, hb.GetSequence()), true
	ss.mu.Unlock()
	ss.sender.do(ss.send)
}

// heartbeatMargin is added to three heartbeat intervals before a silent session is ended.
const heartbeatMargin = 2 * time.Second

// silent returns an error once heartbeats have stopped.
func (ss *session) silent(now time.Time) error {
	interval := ss.srv.cfg.HeartbeatInterval
	// Three missed heartbeats plus a margin, so a hub or agent slowed by CPU load does not churn sessions.
	if since := now.Sub(time.Unix(0, ss.lastHeartbeat.Load())); since > 3*interval+heartbeatMargin {
		return status.Errorf(codes.DeadlineExceeded, "no heartbeat for %s (interval %s)", since.Round(time.Millisecond), interval)
	}
	return nil
}

// send is the only sender on the stream while it runs (demand runs one at a time): control messages (Welcome,
// heartbeat acks, certificates) first, then assignments in batches, until nothing is queued. A failed send ends the
// session.
func (ss *session) send() {
	if ss.ctx.Err() != nil || !ss.welcomed.Load() {
		return // not yet welcomed: serveSession pokes the sender once it is
	}
	if err := ss.sendQueued(); err != nil {
		ss.end(err)
	}
}

func (ss *session) sendQueued() error {
	g := ss.srv.cfg.Graph
	for {
		synced := g.Synced() // read before popping: every change up to synced is queued already
		control, ackSeq, ackDue := ss.takeControl()
		for _, m := range control {
			if err := ss.stream.Send(m); err != nil {
				return err
			}
		}
		if ackDue {
			if err := ss.sendAck(ackSeq, synced); err != nil {
				return err
			}
		}
		refs, marker, empty := ss.pop(ss.srv.cfg.MaxBatch)
		if len(refs) > 0 {
			batches := ss.batches(refs)
			last := batches[len(batches)-1]
			if empty && synced > ss.sentSynced {
				last.SyncedVersions = ss.srv.syncedVersions(synced)
				ss.sentSynced, ss.syncedAt = synced, time.Now()
			}
			for _, b := range batches {
				if err := ss.stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_Assignments{Assignments: b}}); err != nil {
					return err
				}
				ss.srv.metrics.assignments.Add(float64(len(b.Assignments)))
			}
		}
		if marker {
			if err := ss.stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_SyncComplete{SyncComplete: ss.manifest()}}); err != nil {
				return err
			}
			ss.started() // the first sync is out: the next session may start
			if empty && synced > ss.sentSynced {
				ss.seq++
				ss.sentSynced, ss.syncedAt = synced, time.Now()
				if err := ss.stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_Assignments{Assignments: &agentv1.AssignmentBatch{
					Sequence: ss.seq, SyncedVersions: ss.srv.syncedVersions(synced),
				}}}); err != nil {
					return err
				}
			}
		}
		if len(refs) == 0 && !marker {
			return nil
		}
	}
}

// syncedVersions returns the SyncedVersions of revision rev: every streamed resource at rev. Sessions share the map of
// the latest revision (marshalling only reads it).
func (s *Server) syncedVersions(rev int64) map[string]int64 {
	if c := s.synced.Load(); c != nil && c.rev == rev {
		return c.versions
	}
	m := resources.SyncedAt(rev)
	s.synced.Store(&syncedAt{rev: rev, versions: m})
	return m
}

// syncedAt is the SyncedVersions map of a revision, never changed once stored.
type syncedAt struct {
	rev      int64
	versions map[string]int64
}

// maxBatchBytes bounds the objects in one AssignmentBatch; a single larger object goes alone.
const maxBatchBytes = 1 << 20

// batches builds the assignments of refs, split so that each message holds at most maxBatchBytes of objects.
func (ss *session) batches(refs []seedgraph.Ref) []*agentv1.AssignmentBatch {
	ss.seq++
	now := timestamppb.Now()
	b := &agentv1.AssignmentBatch{Sequence: ss.seq, Assignments: make([]*agentv1.Assignment, 0, len(refs)), SentTime: now}
	out := []*agentv1.AssignmentBatch{b}
	size := 0
	for _, ref := range refs {
		a := &agentv1.Assignment{Resource: ref.Resource, Namespace: ref.Namespace, Name: ref.Name}
		m, ok := ss.srv.cfg.Graph.Get(ss.seed, ref)
		if ok {
			a.ResourceVersion, _ = strconv.ParseInt(m.Object.GetMetadata().GetResourceVersion(), 10, 64)
			a.Traceparent = ss.srv.cfg.Traces.LookupObject(a.ResourceVersion, tracing.ObjectKey(ref.Resource, ref.Namespace, ref.Name))
			obj, err := ss.srv.encoder.encode(ref, m)
			if err != nil {
				ss.srv.cfg.Log.Error("cannot encode assignment", "resource", ref.Resource, "key", ref.Key(), "err", err)
				continue
			}
			a.Object = obj
			if ref.Resource == resources.Seeds && ref.Name == ss.seed {
				ss.seedChanged(m.Object.(*corev1beta1.Seed))
			}
		} else {
			a.Removed = true
		}
		if n := len(a.GetObject().GetValue()); size > 0 && size+n > maxBatchBytes {
			ss.seq++
			b = &agentv1.AssignmentBatch{Sequence: ss.seq, SentTime: now}
			out = append(out, b)
			size = 0
		}
		size += len(a.GetObject().GetValue()) + len(a.Name) + len(a.Namespace) + len(a.Resource)
		b.Assignments = append(b.Assignments, a)
	}
	return out
}

func (ss *session) manifest() *agentv1.SyncComplete {
	byRes := map[string][]string{}
	for _, m := range ss.srv.cfg.Graph.Members(ss.seed) {
		if streamed[m.Ref.Resource] {
			byRes[m.Ref.Resource] = append(byRes[m.Ref.Resource], m.Ref.Key())
		}
	}
	sc := &agentv1.SyncComplete{}
	for _, r := range resources.Streamed {
		keys := byRes[r]
		sort.Strings(keys)
		sc.Resources = append(sc.Resources, &agentv1.ResourceKeys{Resource: r, Keys: keys})
	}
	return sc
}

// TrustChanged re-checks the certificates of every session of this replica against the CA that signs now; call it
// when the CA or its rotation changed. Agents whose certificates another CA issued are asked to renew: after a CA
// rotation started, they get a certificate of the new CA with the trust bundle of both CAs over the link, so they
// trust the hub whichever CA serves it, and the old CA can be dropped.
func (s *Server) TrustChanged() {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.checkIssuer()
	}
}

// checkIssuer asks the agent, once per session, to renew its certificate when the CA that signs now did not issue
// it.
func (ss *session) checkIssuer() {
	issuer, _ := ss.issuer.Load().(string)
	if issuer == "" || ss.srv.cfg.CA == nil {
		return
	}
	if signer := ss.srv.cfg.CA.SignerKeyID(); len(signer) == 0 || string(signer) == issuer || ss.caRenewSent.Swap(true) {
		return
	}
	ss.srv.cfg.Log.Info("asking the agent to renew its certificate: the hub's CA rotates", "seed", ss.seed, "session", ss.id)
	ss.sendControl(&agentv1.HubMessage{Message: &agentv1.HubMessage_RenewCertificate{RenewCertificate: &agentv1.RenewCertificate{
		Reason: "the hub's CA rotates: the certificate was issued by another CA than the one that signs now",
	}}})
}

// seedChanged reacts to a new state of the session's Seed: a renew-kubeconfig request, and the status the session
// maintains (GardenletReady, the certificate's expiry).
func (ss *session) seedChanged(seed *corev1beta1.Seed) {
	renew := seed.GetMetadata().GetAnnotations()[operationAnnotation] == renewKubeconfig
	if renew && !ss.renewSent {
		ss.sendControl(&agentv1.HubMessage{Message: &agentv1.HubMessage_RenewCertificate{RenewCertificate: &agentv1.RenewCertificate{
			Reason: "the Seed is annotated " + operationAnnotation + "=" + renewKubeconfig,
		}}})
	}
	ss.renewSent = renew
	if ss.healthy.Load() && needsStatus(seed, ss.notAfter.Load()) {
		ss.ensureSeedStatus()
	}
}

type encoder struct {
	mu   sync.Mutex
	memo map[seedgraph.Ref]encoded
}

type encoded struct {
	obj store.Object
	any *anypb.Any
}

func newEncoder() *encoder { return &encoder{memo: map[seedgraph.Ref]encoded{}} }

// encode returns m's object as an Any. The encodings of objects several seeds share, such as cloud profiles, are
// memoized per object state (the store's objects are immutable and shared, so a state is its pointer): they are
// marshalled once per change, not once per agent. An object of one seed (its Seed, its Shoots) is marshalled for each
// send instead: it goes to one agent, and holding its encoding would cost every agent a few KiB for as long as the
// object does not change. The returned Any is shared and must not be modified.
func (e *encoder) encode(ref seedgraph.Ref, m seedgraph.Member) (*anypb.Any, error) {
	obj := m.Object
	if !m.Shared {
		return anypb.New(obj)
	}
	e.mu.Lock()
	if c, ok := e.memo[ref]; ok && c.obj == obj {
		e.mu.Unlock()
		return c.any, nil
	}
	e.mu.Unlock()
	a, err := anypb.New(obj)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.memo) > 200000 {
		clear(e.memo)
	}
	e.memo[ref] = encoded{obj: obj, any: a}
	e.mu.Unlock()
	return a, nil
}
