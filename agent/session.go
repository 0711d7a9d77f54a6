package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/identity"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

const (
	// welcomeTimeout bounds the wait for the hub's answer to Hello.
	welcomeTimeout = 30 * time.Second
	// missedAcks is how many heartbeat intervals without a HeartbeatAck end a session.
	missedAcks = 3
)

var (
	errRotated   = errors.New("client certificate rotated; reconnecting with the new certificate")
	errNoWelcome = errors.New("the hub did not answer Hello within " + welcomeTimeout.String())
	// ErrHeartbeatTimeout ends a session whose heartbeats went unacknowledged for three intervals.
	ErrHeartbeatTimeout = errors.New("no heartbeat acknowledgement from the hub")
)

// session is one mTLS session of the agent link. Its goroutines (heartbeats, seed health, rotation, seed
// registration) are owned by session.run and end with its context; the receive loop runs on run's goroutine.
type session struct {
	a        *Agent
	log      *slog.Logger
	stream   grpc.BidiStreamingClient[agentv1.AgentMessage, agentv1.HubMessage]
	cancel   context.CancelCauseFunc
	creds    *identity.Credentials
	interval time.Duration

	sendMu sync.Mutex // a gRPC stream allows one sender at a time

	lastAck atomic.Int64 // unix nanoseconds of the last HeartbeatAck (or of Welcome)
	hbMu    sync.Mutex
	sentAt  map[int64]time.Time // heartbeat sequence → when it was sent

	healthErr atomic.Pointer[error] // the seed's last health result; nil pointer value = healthy

	conn    *grpc.ClientConn // the session's connection
	tunnels sync.WaitGroup   // the tunnels' goroutines; they end with the session

	// tunnelConn is the session's second connection to the hub, for tunnels (tunnelConnection).
	tunnelOnce sync.Once
	tunnelConn *grpc.ClientConn
	// dataPause is when (unix nanoseconds) the session tries data connections again after one failed (tunnel.go).
	dataPause atomic.Int64

	renew chan string               // RenewCertificate reasons, for the rotation loop
	certs chan *agentv1.Certificate // Certificates answering the rotation loop's requests
}

// session runs one session with creds until it ends. It returns errReconnect after a rotation, the context's error
// when ctx ended, and otherwise why the session failed or ended.
func (a *Agent) session(ctx context.Context, creds *identity.Credentials) error {
	conn, err := a.dial(creds, true)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	s := &session{
		a: a, log: a.log, cancel: cancel, creds: creds, interval: a.cfg.HeartbeatInterval(), conn: conn,
		sentAt: map[int64]time.Time{}, renew: make(chan string, 1), certs: make(chan *agentv1.Certificate, 1),
	}
	s.checkHealth(ctx) // the first heartbeat carries a real result

	s.stream, err = agentv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	err = s.send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Hello{Hello: &agentv1.Hello{
		SeedName: a.seedName, AgentVersion: a.version, ResumeVersions: a.cache.SyncedVersions(),
	}}})
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("send hello: %w", err)
	}
	timer := time.AfterFunc(welcomeTimeout, func() { cancel(errNoWelcome) })
	msg, err := s.stream.Recv()
	timer.Stop()
	if err != nil {
		return s.ended(ctx, err)
	}
	w := msg.GetWelcome()
	if w == nil {
		return fmt.Errorf("the hub answered Hello with %T instead of Welcome", msg.GetMessage())
	}
	if hub := w.GetHeartbeatInterval().AsDuration(); hub > 0 && hub < s.interval {
		s.interval = hub // the hub ends sessions that miss its interval
	}
	s.log = a.log.With("session", w.GetSessionId())
	if d := w.GetTunnelDomain(); d != "" {
		a.tunnelDomain.Store(&d)
	}
	s.lastAck.Store(time.Now().UnixNano())
	a.mu.Lock()
	a.sessionID = w.GetSessionId()
	a.lastErr = nil // the link is up again: the last failure is over
	a.mu.Unlock()
	a.sessions.Add(1)
	a.connected.Store(true)
	defer a.connected.Store(false)
	a.offerHubConn(creds)
	s.log.Info("session established", "resumed", w.GetResumed(), "hubVersion", w.GetHubVersion(),
		"heartbeatInterval", s.interval, "certificateNotAfter", creds.NotAfter())

	var wg sync.WaitGroup
	wg.Go(func() { s.heartbeats(ctx) })
	wg.Go(func() { s.healthLoop(ctx) })
	wg.Go(func() { s.rotation(ctx) })
	if !a.seedRegistered.Load() {
		wg.Go(func() { s.registerSeed(ctx, conn) })
	}
	err = s.receive(ctx)
	cancel(err)
	wg.Wait()
	s.tunnels.Wait()
	if s.tunnelConn != nil {
		_ = s.tunnelConn.Close()
	}

	cause := context.Cause(ctx)
	if errors.Is(cause, errRotated) {
		s.log.Info("session closed to use the rotated certificate")
		return errReconnect
	}
	return cause
}

// ended explains the end of the stream: the session's own reason when it cancelled itself, else the hub's.
func (s *session) ended(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the hub ended the session")
	}
	return fmt.Errorf("the hub ended the session: %w", err)
}

// receive handles the hub's messages until the stream ends.
func (s *session) receive(ctx context.Context) error {
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			return s.ended(ctx, err)
		}
		switch m := msg.GetMessage().(type) {
		case *agentv1.HubMessage_HeartbeatAck:
			s.acked(m.HeartbeatAck.GetSequence())
			// Messages are handled in order, so every batch the hub sent before this ack is in the cache.
			s.a.cache.SetSynced(m.HeartbeatAck.GetSyncedVersions(), m.HeartbeatAck.GetSyncedRevision())
		case *agentv1.HubMessage_Assignments:
			if err := s.apply(m.Assignments); err != nil {
				return err
			}
		case *agentv1.HubMessage_SyncComplete:
			s.a.cache.CompleteSync(m.SyncComplete)
			s.log.Info("synced with the hub", "resources", len(m.SyncComplete.GetResources()))
		case *agentv1.HubMessage_RenewCertificate:
			s.log.Info("the hub asked for a certificate renewal", "reason", m.RenewCertificate.GetReason())
			select {
			case s.renew <- m.RenewCertificate.GetReason():
			default: // a renewal is pending already
			}
		case *agentv1.HubMessage_Certificate:
			select {
			case s.certs <- m.Certificate:
			default:
				s.log.Warn("dropping a certificate nobody waits for", "csr", m.Certificate.GetCsrName())
			}
		case *agentv1.HubMessage_OpenTunnel:
			s.tunnels.Go(func() { s.openTunnel(ctx, s.tunnelConnection(), m.OpenTunnel) })
		case *agentv1.HubMessage_Welcome:
			s.log.Warn("ignoring a second Welcome")
		default:
			s.log.Debug("ignoring an unknown hub message", "type", fmt.Sprintf("%T", m))
		}
	}
}

// apply stores an assignment batch in the cache and acknowledges it with the versions the cache now holds.
func (s *session) apply(b *agentv1.AssignmentBatch) error {
	if err := s.a.cache.Apply(b); err != nil {
		s.log.Error("assignment batch applied partly", "sequence", b.GetSequence(), "err", err)
	}
	if b.GetSentTime() != nil && len(b.GetAssignments()) > 0 {
		s.a.assignmentLag.Observe(max(0, time.Since(b.GetSentTime().AsTime()).Seconds()))
	}
	s.log.Debug("assignment batch applied", "sequence", b.GetSequence(), "objects", len(b.GetAssignments()))
	err := s.send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Ack{Ack: &agentv1.Ack{
		Sequence: b.GetSequence(), SyncedVersions: s.a.cache.SyncedVersions(),
	}}})
	if err != nil && !errors.Is(err, io.EOF) { // on EOF the next Recv says why the stream ended
		return fmt.Errorf("send ack: %w", err)
	}
	return nil
}

// send sends one message. io.EOF means the stream ended; Recv reports why.
func (s *session) send(m *agentv1.AgentMessage) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(m)
}

// heartbeats sends a heartbeat at once and then every interval, and ends the session when no HeartbeatAck came for
// missedAcks intervals.
func (s *session) heartbeats(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for seq := int64(1); ; seq++ {
		if err := s.sendHeartbeat(seq); err != nil {
			if !errors.Is(err, io.EOF) {
				s.cancel(fmt.Errorf("send heartbeat: %w", err))
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if since := time.Since(time.Unix(0, s.lastAck.Load())); since > missedAcks*s.interval {
			s.cancel(fmt.Errorf("%w for %v (%d heartbeat intervals); reconnecting", ErrHeartbeatTimeout, since.Round(time.Millisecond), missedAcks))
			return
		}
	}
}

func (s *session) sendHeartbeat(seq int64) error {
	now := time.Now()
	hb := &agentv1.Heartbeat{Sequence: seq, SentTime: timestamppb.New(now), SeedHealthy: true}
	if p := s.healthErr.Load(); p != nil && *p != nil {
		hb.SeedHealthy, hb.Message = false, (*p).Error()
	}
	s.hbMu.Lock()
	s.sentAt[seq] = now
	for k := range s.sentAt { // unanswered heartbeats older than the watchdog's window
		if k < seq-2*missedAcks {
			delete(s.sentAt, k)
		}
	}
	s.hbMu.Unlock()
	return s.send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_Heartbeat{Heartbeat: hb}})
}

func (s *session) acked(seq int64) {
	now := time.Now()
	s.lastAck.Store(now.UnixNano())
	s.hbMu.Lock()
	sent, ok := s.sentAt[seq]
	for k := range s.sentAt {
		if k <= seq {
			delete(s.sentAt, k)
		}
	}
	s.hbMu.Unlock()
	if ok {
		s.a.ackLatency.Store(int64(now.Sub(sent)))
	}
}

// healthLoop checks the seed's health every interval, each check bounded by the interval.
func (s *session) healthLoop(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkHealth(ctx)
	}
}

func (s *session) checkHealth(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, s.interval)
	err := s.a.health(hctx)
	if err == nil && hctx.Err() != nil {
		err = fmt.Errorf("seed health check: %w", hctx.Err())
	}
	cancel()
	if ctx.Err() != nil {
		return // the session ended; nothing to report
	}
	prev := s.healthErr.Swap(&err)
	switch wasHealthy := prev == nil || *prev == nil; {
	case err != nil && wasHealthy:
		s.log.Warn("seed unhealthy", "err", err)
	case err == nil && !wasHealthy:
		s.log.Info("seed healthy again")
	}
}

// tunnelConnection is the connection the session's tunnels are calls on: a second connection to the hub with the
// session's certificate, made with the first tunnel, so that a bulk tunnel's bytes queue in a TCP connection and
// socket buffers of their own and not ahead of the session's heartbeats and assignments. Without it (it could not be
// made) tunnels use the session's connection. It is closed when the session ends, after its tunnels.
func (s *session) tunnelConnection() grpc.ClientConnInterface {
	s.tunnelOnce.Do(func() {
		c, err := s.a.dial(s.creds, true)
		if err != nil {
			s.log.Warn("no second connection for tunnels; they share the session's", "err", err)
			return
		}
		s.tunnelConn = c
	})
	if s.tunnelConn == nil {
		return s.conn
	}
	return s.tunnelConn
}
