package agentsim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/backoff"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/hubdial"
	"github.com/trellis-dev/trellis/agent/identity"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// CSR makes a key and a certificate request for seed; mutate may change the template (tests of refusals).
func CSR(seed string, mutate func(*x509.CertificateRequest)) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: identity.Subject(seed)}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// welcomeTimeout bounds the wait for the hub's Welcome, as the real agent's (agent.welcomeTimeout).
const welcomeTimeout = 30 * time.Second

// Dialer opens connections to the hub.
type Dialer struct {
	// Target is the hub's gRPC target, such as passthrough:///127.0.0.1:8444.
	Target string
	// Addresses, when set, are hub replicas (host:port), and Target is ignored: each connection tries them in a random
	// order and takes the first that accepts a TCP connection (hubdial.DialFirst), as a real agent does whose hub
	// address is a DNS name with one address per replica (a headless Service). A replica that is down costs a refused
	// TCP connect.
	Addresses []string
	CA        *x509.CertPool
	// Options are extra dial options (an in-memory dialer in bufconn tests).
	Options []grpc.DialOption
}

func (d Dialer) dial(cert *tls.Certificate, sessions tls.ClientSessionCache) (*grpc.ClientConn, error) {
	tc := &tls.Config{RootCAs: d.CA, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1", ClientSessionCache: sessions}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	// The real agent's options (package hubdial): a fast TCP connect, a generous TLS handshake.
	opts := append(hubdial.Options(tc), d.Options...)
	if len(d.Addresses) == 0 {
		return grpc.NewClient(d.Target, opts...)
	}
	// As the agent's own dialer tries a name's addresses (hubdial.DialFirst), with the replicas' ports.
	addrs := d.Addresses
	return grpc.NewClient(hubdial.Target("hub-replicas:443"), append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return hubdial.DialFirst(ctx, addrs)
	}))...)
}

// Bootstrap exchanges a bootstrap token for a seed client certificate, as an agent does on its first start. usages
// nil means the right ones; mutate may spoil the request.
func Bootstrap(ctx context.Context, d Dialer, token, seed string, usages []string, mutate func(*x509.CertificateRequest)) (tls.Certificate, error) {
	key, csrPEM, err := CSR(seed, mutate)
	if err != nil {
		return tls.Certificate{}, err
	}
	if usages == nil {
		usages = identity.Usages
	}
	cc, err := d.dial(nil, nil)
	if err != nil {
		return tls.Certificate{}, err
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	stream, err := agentv1.NewAgentServiceClient(cc).Connect(ctx)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := stream.Send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_CertificateRequest{CertificateRequest: &agentv1.CertificateRequest{
		Csr: csrPEM, Usages: usages, ExpirationSeconds: 3600,
	}}}); err != nil && !errors.Is(err, io.EOF) {
		return tls.Certificate{}, err
	} // on io.EOF the hub ended the stream: Recv returns its status

	msg, err := stream.Recv()
	if err != nil {
		return tls.Certificate{}, err
	}
	c := msg.GetCertificate()
	if c == nil {
		return tls.Certificate{}, fmt.Errorf("expected a Certificate, got %T", msg.GetMessage())
	}
	return keyPair(key, c.GetCertificatePem())
}

func keyPair(key *ecdsa.PrivateKey, certPEM []byte) (tls.Certificate, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// Object is what the simulated agent keeps of an assigned object.
type Object struct {
	ResourceVersion int64
	Message         proto.Message // nil unless KeepObjects
}

// Agent is one simulated agent.
type Agent struct {
	Seed              string
	Dialer            Dialer
	Cert              tls.Certificate
	HeartbeatInterval time.Duration
	// KeepObjects keeps the decoded objects (tests); the load generator keeps only versions.
	KeepObjects bool
	// OnAssignment, if set, is called for every assignment received, with the receive time.
	OnAssignment func(a *agentv1.Assignment, at time.Time)
	// OnHeartbeatAck, if set, is called with each heartbeat's round trip.
	OnHeartbeatAck func(rtt time.Duration)
	// Healthy is reported in heartbeats (default true; set Unhealthy to report a broken seed).
	Unhealthy atomic.Bool

	mu       sync.Mutex
	objects  map[string]map[string]Object
	synced   map[string]int64
	syncs    int // SyncCompletes received
	resumed  bool
	sessions int
	remote   string // the hub address of the last session that was welcomed
	syncedCh chan struct{}
	renew    chan struct{}
	send     func(*agentv1.AgentMessage) error // the live session's sender, nil between sessions
	certs    chan *agentv1.Certificate
	// tlsSessions lets a reconnect resume the TLS session instead of a full handshake.
	tlsSessions tls.ClientSessionCache
}

func (a *Agent) init() {
	if a.objects == nil {
		a.objects = map[string]map[string]Object{}
		a.synced = map[string]int64{}
		a.syncedCh = make(chan struct{})
		a.renew = make(chan struct{}, 1)
		a.certs = make(chan *agentv1.Certificate, 1)
		a.tlsSessions = tls.NewLRUClientSessionCache(4)
	}
	if a.HeartbeatInterval == 0 {
		a.HeartbeatInterval = 2 * time.Second
	}
}

// Run keeps a session up until ctx ends, reconnecting as the real agent does: full-jitter exponential backoff with
// the agent's default delays (agent/backoff), or the hub's retry delay when it refused the session and asked for a
// longer one.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	a.init()
	a.mu.Unlock()
	b := &backoff.Backoff{Initial: config.DefaultInitialDelay, Max: config.DefaultMaxDelay, ResetAfter: config.DefaultResetAfter}
	for ctx.Err() == nil {
		err := a.Session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		t := time.NewTimer(b.Delay(time.Now(), err))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// ForgetTLSSessions drops the TLS sessions the agent could resume: its next connection needs a full handshake, as
// after a CA rotation or a hub whose ticket keys changed.
func (a *Agent) ForgetTLSSessions() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tlsSessions = tls.NewLRUClientSessionCache(4)
}

// Session runs one session until it fails or ctx ends.
func (a *Agent) Session(ctx context.Context) error {
	a.mu.Lock()
	a.init()
	resume := make(map[string]int64, len(a.synced))
	for r, v := range a.synced {
		resume[r] = v
	}
	a.sessions++
	a.mu.Unlock()
	a.mu.Lock()
	cert, sessions := a.Cert, a.tlsSessions
	a.mu.Unlock()
	cc, err := a.Dialer.dial(&cert, sessions)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stream, err := agentv1.NewAgentServiceClient(cc).Connect(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Hello{Hello: &agentv1.Hello{
		SeedName: a.Seed, AgentVersion: "agentsim", ResumeVersions: resume,
	}}}); err != nil {
		return err
	}
	var sendMu sync.Mutex
	send := func(m *agentv1.AgentMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	a.mu.Lock()
	a.send = send
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.send = nil
		a.mu.Unlock()
	}()
	var sent sync.Map // heartbeat sequence → send time
	var acked int64   // the highest heartbeat sequence acknowledged (receiving goroutine only)
	var lastRecv atomic.Int64
	var welcomed atomic.Bool
	start := time.Now()
	lastRecv.Store(start.UnixNano())
	// As the real agent: the hub has welcomeTimeout to answer Hello (it may hold a session start back in a storm);
	// then it acks every heartbeat, and silence for three intervals means a dead or blackholed connection.
	go func() {
		t := time.NewTicker(a.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !welcomed.Load() {
					if time.Since(start) > welcomeTimeout {
						cancel(fmt.Errorf("the hub did not answer Hello within %s", welcomeTimeout))
						return
					}
					continue
				}
				if time.Since(time.Unix(0, lastRecv.Load())) > 3*a.HeartbeatInterval+time.Second {
					cancel(errors.New("no message from the hub for three heartbeat intervals"))
					return
				}
			}
		}
	}()
	go func() {
		t := time.NewTicker(a.HeartbeatInterval)
		defer t.Stop()
		var seq int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			seq++
			sent.Store(seq, time.Now())
			if err := send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Heartbeat{Heartbeat: &agentv1.Heartbeat{
				Sequence: seq, SentTime: timestamppb.Now(), SeedHealthy: !a.Unhealthy.Load(),
			}}}); err != nil {
				cancel(err)
				return
			}
		}
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		now := time.Now()
		lastRecv.Store(now.UnixNano())
		switch m := msg.GetMessage().(type) {
		case *agentv1.HubMessage_Welcome:
			welcomed.Store(true)
			a.mu.Lock()
			a.resumed = m.Welcome.GetResumed()
			if p, ok := peer.FromContext(stream.Context()); ok {
				a.remote = p.Addr.String()
			}
			a.mu.Unlock()
		case *agentv1.HubMessage_HeartbeatAck:
			// Acks are cumulative, as the real agent takes them: heartbeats the hub answered with one later ack (its
			// sender was behind) are acknowledged by it, and their round trips end now.
			for ; acked < m.HeartbeatAck.GetSequence(); acked++ {
				if v, ok := sent.LoadAndDelete(acked + 1); ok && a.OnHeartbeatAck != nil {
					a.OnHeartbeatAck(now.Sub(v.(time.Time)))
				}
			}
			if sv, rev := m.HeartbeatAck.GetSyncedVersions(), m.HeartbeatAck.GetSyncedRevision(); len(sv) > 0 || rev != 0 {
				a.mu.Lock()
				maps.Copy(a.synced, sv)
				if rev != 0 {
					maps.Copy(a.synced, resources.SyncedAt(rev))
				}
				a.mu.Unlock()
			}
		case *agentv1.HubMessage_Assignments:
			a.apply(m.Assignments, now)
			if err := send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Ack{Ack: &agentv1.Ack{Sequence: m.Assignments.GetSequence()}}}); err != nil {
				return err
			}
		case *agentv1.HubMessage_SyncComplete:
			a.syncComplete(m.SyncComplete)
		case *agentv1.HubMessage_RenewCertificate:
			select {
			case a.renew <- struct{}{}:
			default:
			}
		case *agentv1.HubMessage_Certificate:
			select {
			case a.certs <- m.Certificate:
			default:
			}
		}
	}
}

func (a *Agent) apply(b *agentv1.AssignmentBatch, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, as := range b.GetAssignments() {
		key := as.GetName()
		if as.GetNamespace() != "" {
			key = as.GetNamespace() + "/" + key
		}
		m := a.objects[as.GetResource()]
		if m == nil {
			m = map[string]Object{}
			a.objects[as.GetResource()] = m
		}
		if as.GetRemoved() {
			delete(m, key)
			continue
		}
		o := Object{ResourceVersion: as.GetResourceVersion()}
		if a.KeepObjects {
			if msg, err := as.GetObject().UnmarshalNew(); err == nil {
				o.Message = msg
			}
		}
		m[key] = o
	}
	for r, v := range b.GetSyncedVersions() {
		a.synced[r] = v
	}
	if a.OnAssignment != nil {
		for _, as := range b.GetAssignments() {
			a.OnAssignment(as, at)
		}
	}
}

func (a *Agent) syncComplete(sc *agentv1.SyncComplete) {
	a.mu.Lock()
	defer a.mu.Unlock()
	listed := map[string]bool{}
	for _, rk := range sc.GetResources() {
		listed[rk.GetResource()] = true
		keep := map[string]bool{}
		for _, k := range rk.GetKeys() {
			keep[k] = true
		}
		for k := range a.objects[rk.GetResource()] {
			if !keep[k] {
				delete(a.objects[rk.GetResource()], k)
			}
		}
	}
	for r := range a.objects {
		if !listed[r] {
			delete(a.objects, r)
		}
	}
	a.syncs++
	if a.syncs == 1 {
		close(a.syncedCh)
	}
}

// Synced is closed after the first SyncComplete.
func (a *Agent) Synced() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	return a.syncedCh
}

// Syncs counts SyncCompletes received (one per session that synced).
func (a *Agent) Syncs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.syncs
}

// Remote is the hub address (host:port) of the agent's last session that the hub welcomed: with Dialer.Addresses,
// the replica it is served by.
func (a *Agent) Remote() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.remote
}

// Resumed reports whether the last session resumed from the agent's versions.
func (a *Agent) Resumed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.resumed
}

// Snapshot returns resource → key → resourceVersion of everything the agent holds.
func (a *Agent) Snapshot() map[string]map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]map[string]int64{}
	for r, m := range a.objects {
		if len(m) == 0 {
			continue
		}
		out[r] = map[string]int64{}
		for k, o := range m {
			out[r][k] = o.ResourceVersion
		}
	}
	return out
}

// Object returns a kept object.
func (a *Agent) Object(resource, key string) (Object, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.objects[resource][key]
	return o, ok
}

// SyncedVersions returns the versions the agent would resume from.
func (a *Agent) SyncedVersions() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int64{}
	for r, v := range a.synced {
		out[r] = v
	}
	return out
}

// RenewRequested is signalled when the hub asks for a certificate rotation.
func (a *Agent) RenewRequested() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	return a.renew
}

// Rotate asks for a new client certificate on the live session and switches to it; the next session uses it.
func (a *Agent) Rotate(ctx context.Context) (tls.Certificate, error) {
	a.mu.Lock()
	a.init()
	send, certs := a.send, a.certs
	a.mu.Unlock()
	if send == nil {
		return tls.Certificate{}, errors.New("no live session")
	}
	key, csrPEM, err := CSR(a.Seed, nil)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_CertificateRequest{CertificateRequest: &agentv1.CertificateRequest{
		Csr: csrPEM, Usages: identity.Usages, ExpirationSeconds: 7200,
	}}}); err != nil {
		return tls.Certificate{}, err
	}
	select {
	case c := <-certs:
		pair, err := keyPair(key, c.GetCertificatePem())
		if err != nil {
			return tls.Certificate{}, err
		}
		a.mu.Lock()
		a.Cert = pair
		a.tlsSessions = tls.NewLRUClientSessionCache(4) // sessions of the old certificate would carry its identity
		a.mu.Unlock()
		return pair, nil
	case <-ctx.Done():
		return tls.Certificate{}, ctx.Err()
	}
}
