package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-dev/trellis/hub/agentlink"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Serve accepts connections on lis until ctx ends, maps each to a shoot by the server name of its ClientHello and
// pipes it, TLS untouched, to the shoot's kube-apiserver through its seed's agent. A connection whose name maps to no
// scheduled shoot, whose seed's agent is not connected or that exceeds a limit is closed (the client sees a broken
// handshake; the hub logs why). Serve closes lis and returns once every connection it accepted has ended.
func (t *Tunnels) Serve(ctx context.Context, lis net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = lis.Close() })
	defer stop()
	for {
		c, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Go(func() { t.serveConn(ctx, c) })
	}
}

// serveConn serves one connection of the SNI listener: a data connection forwarded by another replica goes to Peers,
// a seed API tunnel forwarded by another replica is served here, anything else is a client's connection to a shoot's
// API server (passthrough).
func (t *Tunnels) serveConn(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(t.cfg.HelloTimeout))
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	kind, c, err := t.sniff(ctx, c)
	stop()
	if err == nil && kind == forwardedData {
		if t.cfg.Peers == nil {
			_ = c.Close()
			return
		}
		t.cfg.Peers.ServeForwardedData(ctx, c)
		return
	}
	if err == nil && kind == forwardedSeedAPI {
		t.serveSeedAPIForward(ctx, c)
		return
	}
	t.passthrough(ctx, c, kind == forwardedHello, err)
}

// passthrough pipes a client's connection (forwarded: by another replica) whose ClientHello is still to be read,
// unless sniffing it failed (err).
func (t *Tunnels) passthrough(ctx context.Context, c net.Conn, forwarded bool, err error) {
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	log := t.cfg.Log.With("client", c.RemoteAddr().String())
	var name string
	var hello []byte
	if err == nil {
		name, hello, err = readClientHello(c)
	}
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		t.metrics.failures.WithLabelValues(kindShootAPI, "bad-hello").Inc()
		log.Info("tunnel refused", "err", err)
		return
	}
	log = log.With("serverName", name)
	project, shoot, err := ShootOfServerName(name, t.cfg.Domain)
	var seed string
	if err == nil {
		seed, err = t.cfg.Shoots.SeedOf(ctx, project, shoot)
	}
	if err != nil {
		t.metrics.failures.WithLabelValues(kindShootAPI, "unknown-name").Inc()
		log.Info("tunnel refused", "err", err)
		return
	}
	client := "" // a forwarded connection's client was counted by the replica that forwarded it
	if forwarded {
		t.metrics.forwards.WithLabelValues(kindShootAPI, "in").Inc()
		log = log.With("forwardedBy", c.RemoteAddr().String())
	} else {
		client, _, _ = net.SplitHostPort(c.RemoteAddr().String())
	}
	release, err := t.limits.acquire(seed, client)
	if err != nil {
		t.metrics.failures.WithLabelValues(kindShootAPI, "limit").Inc()
		log.Warn("tunnel refused", "err", err)
		return
	}
	up, err := t.cfg.Dialer.DialTunnel(ctx, seed, &agentv1.TunnelTarget{
		Kind: agentv1.TunnelTarget_KIND_SHOOT_API_SERVER, ShootNamespace: ShootNamespace(project, shoot)})
	if errors.Is(err, agentlink.ErrNotConnected) && !forwarded {
		// The agent's session may be with another replica: that one opens the tunnel (the ClientHello follows).
		if fwd, ferr := t.dialReplica(ctx, seed, forwardPreface); ferr != nil {
			err = fmt.Errorf("%w; %w", err, ferr)
		} else if fwd != nil {
			up, err = fwd, nil
			t.metrics.forwards.WithLabelValues(kindShootAPI, "out").Inc()
			log.Info("tunnel forwarded to the replica of the seed's agent", "seed", seed, "replica", fwd.RemoteAddr().String())
		}
	}
	if err != nil {
		release()
		t.metrics.failures.WithLabelValues(kindShootAPI, failureReason(err)).Inc()
		log.Warn("tunnel failed", "seed", seed, "err", err)
		return
	}
	open := t.metrics.open.WithLabelValues(kindShootAPI)
	open.Inc()
	defer func() { open.Dec(); release() }()
	defer up.Close()
	if _, err := up.Write(hello); err != nil {
		return
	}
	t.metrics.bytes.WithLabelValues(kindShootAPI, "to-seed").Add(float64(len(hello)))
	t.pipe(ctx, c, up, kindShootAPI)
}

func failureReason(err error) string {
	if errors.Is(err, agentlink.ErrNotConnected) {
		return "not-connected"
	}
	return "target"
}

// pipe copies both ways until both directions ended, either failed, ctx ended, or nothing moved for the idle
// timeout, counting kind's bytes. It runs one direction itself and the other in one goroutine; the idle timeout is a
// timer, not a goroutine. Between the client's connection and a data connection (both TCP) the bytes move with
// splice(2) and never enter the hub's memory; over a Tunnel call, neither direction holds a buffer while the tunnel is
// idle: the client is read into a pooled buffer only once it has bytes, and the tunnel's frames are written straight to
// the client (tunnelwire.Splice). The end of the tunnel's side (the agent half-closed: the target closed its side)
// half-closes the client's; the end of the client's side ends the tunnel (the hub never half-closes toward the agent).
func (t *Tunnels) pipe(ctx context.Context, client, up net.Conn, kind string) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	closeAll := func() { _ = client.Close(); _ = up.Close() }
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	if b, ok := up.(interface{ OnBreak(func()) }); ok {
		b.OnBreak(closeAll) // a data connection: the agent's session ended
	}
	var idle *time.Timer
	var idleMu sync.Mutex // orders the timer's re-arming after its creation
	idleMu.Lock()
	idle = time.AfterFunc(t.cfg.IdleTimeout, func() {
		idleMu.Lock()
		defer idleMu.Unlock()
		if since := time.Since(time.Unix(0, last.Load())); since < t.cfg.IdleTimeout {
			idle.Reset(t.cfg.IdleTimeout - since)
			return
		}
		t.cfg.Log.Info("tunnel idle; closing", "idle", t.cfg.IdleTimeout)
		closeAll()
	})
	idleMu.Unlock()
	defer idle.Stop()
	counted := func(c prometheus.Counter) func(int) {
		return func(n int) {
			last.Store(time.Now().UnixNano())
			c.Add(float64(n))
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := tunnelwire.Splice(client, up, counted(t.metrics.bytes.WithLabelValues(kind, "from-seed")))
		if cw, ok := client.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite() // the target ended its side
			return
		}
		closeAll()
	})
	_, _ = tunnelwire.Splice(up, client, counted(t.metrics.bytes.WithLabelValues(kind, "to-seed")))
	closeAll()
	wg.Wait()
}
