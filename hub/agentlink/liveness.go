package agentlink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// PresencePrefix is where, under the store prefix, replicas record the seeds whose agents they serve.
const PresencePrefix = "/agentlink/presence/"

// ReplicasPrefix is where, under the store prefix, each replica serving agents keeps a key bound to its presence
// lease: the replicas count them to share the fleet's Lease write budget. Its value is the address at which the other
// replicas reach its SNI listener ("" without one), to forward shoot API connections to the replica of a seed's agent.
const ReplicasPrefix = "/agentlink/replicas/"

// presence keeps one etcd key per seed whose agent has a session in this replica, bound to the replica's etcd lease:
// a crashed replica's keys vanish with its lease, and heartbeats cost no writes — only a session's start, end and
// health transitions do, batched into transactions. The key's value names the replica and the session, and ends in
// unhealthySuffix while the agent reports its seed unhealthy: such an agent does not count as present (Lifecycle), as
// a gardenlet that cannot reach its seed stops renewing its Lease, but its tunnels are still found through the key
// (tunnelPeer) — an operator reaches an unhealthy seed's API through any replica.
type presence struct {
	cli      *clientv3.Client
	prefix   string
	replicas string // ReplicasPrefix under the store prefix
	replica  string
	peer     string // the SNI listener's address for the other replicas (SetTunnelPeerAddress)
	ttl      int64
	log      *slog.Logger
	metrics  *metrics

	mu      sync.Mutex
	pending map[string]presenceOp
	desired map[string]presenceOp // seed → its session's record, for re-recording under a new lease
	wake    chan struct{}
}

// presenceOp is a change of a seed's presence key: the session's record (healthy or not), or its removal.
type presenceOp struct {
	session          string
	present, healthy bool
}

// unhealthySuffix ends the value of a presence key whose agent reports its seed unhealthy.
const unhealthySuffix = " unhealthy"

// presentValue reports whether a presence key's value counts its agent as present: its seed reported healthy.
func presentValue(v []byte) bool { return !bytes.HasSuffix(v, []byte(unhealthySuffix)) }

func newPresence(cli *clientv3.Client, prefix, replica string, ttl int64, log *slog.Logger, m *metrics) *presence {
	return &presence{
		cli: cli, prefix: prefix + PresencePrefix, replicas: prefix + ReplicasPrefix, replica: replica, ttl: ttl, log: log, metrics: m,
		pending: map[string]presenceOp{}, desired: map[string]presenceOp{}, wake: make(chan struct{}, 1),
	}
}

func (p *presence) key(seed string) string { return p.prefix + seed }

func (p *presence) value(session string, healthy bool) string {
	if healthy {
		return p.replica + "/" + session
	}
	return p.replica + "/" + session + unhealthySuffix
}

// set records that seed's agent has its session here, with its seed healthy or not.
func (p *presence) set(seed, session string, healthy bool) {
	p.change(seed, presenceOp{session: session, present: true, healthy: healthy})
}

// remove takes back session's record of seed; a removal by a session that has been superseded by another is ignored.
func (p *presence) remove(seed, session string) { p.change(seed, presenceOp{session: session}) }

func (p *presence) change(seed string, op presenceOp) {
	p.mu.Lock()
	cur, pending := p.pending[seed]
	if op.present || !pending || cur.session == op.session {
		p.pending[seed] = op
	}
	if op.present {
		p.desired[seed] = op
	} else if p.desired[seed].session == op.session {
		delete(p.desired, seed)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run grants the replica's lease, keeps it alive and writes presence changes until ctx ends. ready is closed once the
// lease exists.
func (p *presence) run(ctx context.Context, granted chan<- struct{}) error {
	signalled := false
	for ctx.Err() == nil {
		lease, err := p.cli.Grant(ctx, p.ttl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("presence: cannot grant lease", "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		ka, err := p.cli.KeepAlive(ctx, lease.ID)
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		// The replica counts as serving while its lease lives; without the key it is only not counted (countReplicas).
		if _, err := p.cli.Put(ctx, p.replicas+p.replica, p.peer, clientv3.WithLease(lease.ID)); err != nil && ctx.Err() == nil {
			p.log.Warn("presence: cannot record the replica", "err", err)
		}
		// Everything desired is recorded again under the new lease.
		p.mu.Lock()
		for seed, op := range p.desired {
			if _, ok := p.pending[seed]; !ok {
				p.pending[seed] = op
			}
		}
		p.mu.Unlock()
		if !signalled {
			close(granted)
			signalled = true
		}
		p.writeLoop(ctx, lease.ID, ka)
	}
	return nil
}

func (p *presence) writeLoop(ctx context.Context, lease clientv3.LeaseID, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	// retry fires once after a failed write, to write what was requeued.
	retry := time.NewTimer(0)
	if !retry.Stop() {
		<-retry.C
	}
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ka:
			if !ok {
				p.log.Warn("presence: lease keepalive ended; granting a new lease")
				return
			}
			continue
		case <-p.wake:
		case <-retry.C:
		}
		// Let a burst of session starts gather into few transactions.
		sleepCtx(ctx, 5*time.Millisecond)
		p.mu.Lock()
		ops := p.pending
		p.pending = map[string]presenceOp{}
		p.mu.Unlock()
		var puts []clientv3.Op
		for seed, op := range ops {
			if op.present {
				puts = append(puts, clientv3.OpPut(p.key(seed), p.value(op.session, op.healthy), clientv3.WithLease(lease)))
				continue
			}
			// Remove only our own record, healthy or not: a newer session of the seed, maybe in another replica,
			// keeps its.
			key := p.key(seed)
			own := func(healthy bool) clientv3.Cmp {
				return clientv3.Compare(clientv3.Value(key), "=", p.value(op.session, healthy))
			}
			_, err := p.cli.Txn(ctx).If(own(true)).Then(clientv3.OpDelete(key)).
				Else(clientv3.OpTxn([]clientv3.Cmp{own(false)}, []clientv3.Op{clientv3.OpDelete(key)}, nil)).Commit()
			p.metrics.writes.WithLabelValues("presence").Inc()
			if err != nil && ctx.Err() == nil {
				p.log.Warn("presence: delete failed", "seed", seed, "err", err)
			}
		}
		for len(puts) > 0 {
			n := min(len(puts), 100)
			_, err := p.cli.Txn(ctx).Then(puts[:n]...).Commit()
			p.metrics.writes.WithLabelValues("presence").Inc()
			if err != nil {
				if ctx.Err() == nil {
					p.log.Warn("presence: write failed; retrying", "err", err)
					p.requeue(ops)
					retry.Reset(500 * time.Millisecond)
				}
				break
			}
			puts = puts[n:]
		}
	}
}

// tunnelPeer returns the SNI listener address of the replica that records a session of seed's agent (its seed healthy
// or not), "" when none does, this replica does, or that replica has no SNI listener.
func (p *presence) tunnelPeer(ctx context.Context, seed string) (string, error) {
	resp, err := p.cli.Get(ctx, p.key(seed))
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	replica, _, _ := strings.Cut(string(resp.Kvs[0].Value), "/")
	if replica == p.replica {
		return "", nil
	}
	if resp, err = p.cli.Get(ctx, p.replicas+replica); err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	return string(resp.Kvs[0].Value), nil
}

// replicaTag is the first characters of every tunnel id a replica makes (hex of its id's hash): a data connection
// that reaches another replica names the one it belongs to.
func replicaTag(replica string) string {
	h := sha256.Sum256([]byte(replica))
	return hex.EncodeToString(h[:])[:replicaTagLen]
}

// replicaTagLen is the length of a replicaTag; the rest of a tunnel id is random.
const replicaTagLen = 12

// peerByTag returns the SNI listener address of the serving replica whose replicaTag is tag, "" when none is known.
func (p *presence) peerByTag(ctx context.Context, tag string) (string, error) {
	resp, err := p.cli.Get(ctx, p.replicas, clientv3.WithPrefix())
	if err != nil {
		return "", err
	}
	for _, kv := range resp.Kvs {
		if replicaTag(strings.TrimPrefix(string(kv.Key), p.replicas)) == tag {
			return string(kv.Value), nil
		}
	}
	return "", nil
}

// isPeer reports whether host is the host of a serving replica's SNI listener address.
func (p *presence) isPeer(ctx context.Context, host string) bool {
	resp, err := p.cli.Get(ctx, p.replicas, clientv3.WithPrefix())
	if err != nil {
		return false
	}
	for _, kv := range resp.Kvs {
		if h, _, err := net.SplitHostPort(string(kv.Value)); err == nil && h == host {
			return true
		}
	}
	return false
}

// countReplicas returns how many replicas serve agents (at least 1: this one, whose key may not be written yet).
func (p *presence) countReplicas(ctx context.Context) int {
	resp, err := p.cli.Get(ctx, p.replicas, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0
	}
	return max(1, int(resp.Count))
}

func (p *presence) requeue(ops map[string]presenceOp) {
	p.mu.Lock()
	for seed, op := range ops {
		if _, newer := p.pending[seed]; !newer {
			p.pending[seed] = op
		}
	}
	p.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// leaseWriter renews the seeds' Leases (gardener-system-seed-lease/<seed>) for the healthy sessions of this replica,
// each at most every MinLeaseInterval and all together at most LeaseWritesPerSecond, shared by the replicas serving
// agents (each takes an equal part of it): with 10,000 agents a Lease is renewed every 250 s, whatever the heartbeat
// interval and however the fleet is spread over the replicas. GardenletReady does not depend on these writes (the
// lifecycle controller reads presence), so the rate bound costs nothing in detection time.
type leaseWriter struct {
	s     *Server
	mu    sync.Mutex
	seeds map[string]time.Time // seed → next renewal
}

func newLeaseWriter(s *Server) *leaseWriter {
	return &leaseWriter{s: s, seeds: map[string]time.Time{}}
}

func (l *leaseWriter) add(seed string) {
	l.mu.Lock()
	if _, ok := l.seeds[seed]; !ok {
		l.seeds[seed] = time.Now()
	}
	l.mu.Unlock()
}

func (l *leaseWriter) remove(seed, session string) {
	l.s.mu.Lock()
	cur := l.s.sessions[seed]
	l.s.mu.Unlock()
	if session != "" && cur != nil && cur.id != session {
		return // a newer session keeps renewing
	}
	l.mu.Lock()
	delete(l.seeds, seed)
	l.mu.Unlock()
}

// replicaCountInterval is how often the lease writer counts the replicas it shares the write budget with.
const replicaCountInterval = 10 * time.Second

func (l *leaseWriter) run(ctx context.Context) {
	const tick = 250 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	budget := 0.0
	replicas, counted := 1, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(counted) > replicaCountInterval {
			if n := l.s.presence.countReplicas(ctx); n > 0 {
				replicas = n
			}
			counted = time.Now()
		}
		rate := l.s.cfg.LeaseWritesPerSecond / float64(replicas)
		budget = min(budget+rate*tick.Seconds(), rate)
		now := time.Now()
		l.mu.Lock()
		interval := max(l.s.cfg.MinLeaseInterval, time.Duration(float64(len(l.seeds))/rate*float64(time.Second)))
		var due []string
		for seed, next := range l.seeds {
			if !next.After(now) && float64(len(due)) < budget {
				due = append(due, seed)
				l.seeds[seed] = now.Add(time.Duration(float64(interval) * (0.9 + 0.2*rand.Float64()))) //nolint:gosec // G404: jitter, not a secret
			}
		}
		l.mu.Unlock()
		for _, seed := range due {
			if l.renew(ctx, seed, interval) {
				budget--
			}
		}
	}
}

// renew writes the seed's Lease unless it was renewed less than half an interval ago (by this or another replica,
// for instance before a restart). It reports whether it wrote.
func (l *leaseWriter) renew(ctx context.Context, seed string, interval time.Duration) bool {
	leases := l.s.colls.leases
	now := timestamppb.New(time.Now().Truncate(time.Microsecond)) // renewTime is a MicroTime
	cur, err := leases.Get(ctx, seedgraph.LeaseNamespace, seed)
	if err == nil {
		if rt := cur.(*coordinationv1.Lease).GetSpec().GetRenewTime(); rt != nil && time.Since(rt.AsTime()) < interval/2 {
			return false
		}
	}
	spec := &coordinationv1.LeaseSpec{
		HolderIdentity: proto.String(seed), LeaseDurationSeconds: proto.Int32(leaseDurationSeconds(l.s.cfg.HeartbeatInterval)),
		RenewTime: now,
	}
	var owners []*metav1.OwnerReference
	if s, err := l.s.colls.seeds.Get(ctx, "", seed); err == nil {
		owners = []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Name: seed, Uid: s.GetMetadata().GetUid()}}
	}
	l.s.metrics.writes.WithLabelValues("lease").Inc()
	if apierrors.IsNotFound(err) || cur == nil {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ApiVersion: "coordination.k8s.io/v1", Kind: "Lease",
			Metadata: &metav1.ObjectMeta{Namespace: seedgraph.LeaseNamespace, Name: seed, OwnerReferences: owners},
			Spec:     spec,
		})
		if err == nil || !apierrors.IsAlreadyExists(err) {
			return true
		}
	}
	_, err = leases.GuaranteedUpdate(ctx, seedgraph.LeaseNamespace, seed, false, func(cur store.Object) (store.Object, error) {
		next := cur.(*coordinationv1.Lease)
		next.Spec = spec
		if len(owners) > 0 {
			next.Metadata.OwnerReferences = owners
		}
		return next, nil
	})
	if err != nil && ctx.Err() == nil {
		l.s.cfg.Log.Warn("cannot renew seed lease", "seed", seed, "err", err)
	}
	return true
}

// leaseDurationSeconds is Gardener's leaseResyncSeconds: the heartbeat interval in whole seconds, at least 1 (the
// Lease API requires a positive duration).
func leaseDurationSeconds(interval time.Duration) int32 {
	return int32(max(1, (interval+time.Second-1)/time.Second)) //nolint:gosec // G115: a heartbeat interval in seconds
}

// Gardener's GardenletReady condition.
const (
	GardenletReady = "GardenletReady"
)

// needsStatus reports whether the seed's status lacks what a live session maintains.
func needsStatus(seed *corev1beta1.Seed, notAfter int64) bool {
	st := seed.GetStatus()
	if ts := st.GetClientCertificateExpirationTimestamp(); notAfter > 0 && (ts == nil || ts.GetSeconds() != notAfter) {
		return true
	}
	c := findCondition(st.GetConditions(), GardenletReady)
	return c == nil || c.GetStatus() != "True"
}

func findCondition(conds []*metav1.Condition, typ string) *metav1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// setCondition sets a condition, moving lastTransitionTime only when the status changes. Times have whole seconds,
// as Kubernetes' metav1.Time.
func setCondition(conds []*metav1.Condition, typ, status, reason, message string, now *timestamppb.Timestamp) []*metav1.Condition {
	now = &timestamppb.Timestamp{Seconds: now.GetSeconds()}
	c := findCondition(conds, typ)
	if c == nil {
		c = &metav1.Condition{Type: typ, LastTransitionTime: now}
		conds = append(conds, c)
	}
	if c.Status != status {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, message, now
	return conds
}

// ensureSeedStatus asks the status writer to write GardenletReady=True and the certificate expiry into the Seed's
// status if they are not there yet. It never blocks; requests coalesce (session.statusWriter).
func (ss *session) ensureSeedStatus() {
	ss.statusWriter.ask(&ss.workers, ss.writeSeedStatus)
}

func (ss *session) writeSeedStatus() {
	if ss.ctx.Err() != nil || !ss.healthy.Load() {
		return
	}
	// A fleet's first connect writes every Seed's status at once: a few writes at a time keep etcd and the seed
	// graph (which applies each) from a convoy that holds up the sessions' starts.
	select {
	case ss.srv.statusWrites <- struct{}{}:
		defer func() { <-ss.srv.statusWrites }()
	case <-ss.ctx.Done():
		return
	}
	notAfter := ss.notAfter.Load()
	_, err := ss.srv.colls.seeds.GuaranteedUpdate(ss.ctx, "", ss.seed, true, func(cur store.Object) (store.Object, error) {
		seed := cur.(*corev1beta1.Seed)
		if !needsStatus(seed, notAfter) {
			return nil, nil
		}
		if seed.Status == nil {
			seed.Status = &corev1beta1.SeedStatus{}
		}
		now := timestamppb.Now()
		seed.Status.Conditions = setCondition(seed.Status.Conditions, GardenletReady, "True", "GardenletReady", "Gardenlet is posting ready status.", now)
		if notAfter > 0 {
			seed.Status.ClientCertificateExpirationTimestamp = &timestamppb.Timestamp{Seconds: notAfter}
		}
		ss.srv.metrics.writes.WithLabelValues("seed-status").Inc()
		return seed, nil
	})
	if err != nil && !apierrors.IsNotFound(err) && ss.ctx.Err() == nil {
		ss.srv.cfg.Log.Warn("cannot update seed status", "seed", ss.seed, "err", err)
	}
}

// rotate issues a new client certificate on a live session, then clears a renew-kubeconfig request from the Seed.
func (ss *session) rotate(req *agentv1.CertificateRequest) {
	defer ss.rotating.Store(false)
	cert, err := ss.srv.issue(ss.ctx, ss.ident.User, req)
	if err != nil {
		ss.srv.cfg.Log.Warn("certificate rotation failed", "seed", ss.seed, "err", err)
		ss.end(err)
		return
	}
	// The renew request is done: clear it before the agent gets its certificate, or its next session (which follows
	// at once) would still see it and rotate again. The clear must not depend on this session living on, so it is
	// bounded by the server's life and a timeout (the session's handler waits for it).
	cctx, cancel := context.WithTimeout(ss.srv.runCtx, 10*time.Second)
	_, err = ss.srv.colls.seeds.GuaranteedUpdate(cctx, "", ss.seed, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if md.GetAnnotations()[operationAnnotation] != renewKubeconfig {
			return nil, nil
		}
		delete(md.Annotations, operationAnnotation)
		return cur, nil
	})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		ss.srv.cfg.Log.Warn("cannot clear the renew-kubeconfig annotation", "seed", ss.seed, "err", err)
	}
	if block, _ := pem.Decode(cert.GetCertificatePem()); block != nil {
		if x, err := x509.ParseCertificate(block.Bytes); err == nil {
			ss.notAfter.Store(x.NotAfter.Unix())
			ss.issuer.Store(string(x.AuthorityKeyId))
		}
	}
	ss.sendControl(&agentv1.HubMessage{Message: &agentv1.HubMessage_Certificate{Certificate: cert}})
	ss.srv.cfg.Log.Info("agent certificate rotated", "seed", ss.seed, "csr", cert.GetCsrName())
	ss.ensureSeedStatus()
}
