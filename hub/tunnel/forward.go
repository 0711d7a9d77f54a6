package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
)

// Peers finds the other hub replicas' SNI listeners and serves data connections (hub/agentlink's Server): a seed's
// agent has its session with one replica, and a client's connection that reaches another is forwarded to that one;
// so is a tunnel's data connection that the agent opened to another replica (that replica sends it on here).
type Peers interface {
	// TunnelPeer returns the SNI listener address of the other replica that serves seed's agent, "" when no other
	// replica does.
	TunnelPeer(ctx context.Context, seed string) (string, error)
	// IsPeer reports whether host (an IP address) is the host of a replica's SNI listener address.
	IsPeer(ctx context.Context, host string) bool
	// ServeForwardedData serves a data connection that another replica forwarded (it begins with the data preface),
	// as the agent port serves one, and owns c.
	ServeForwardedData(ctx context.Context, c net.Conn)
}

// ReplicaTLS is the TLS of the replicas among themselves, for seed API tunnels forwarded between them: the hub's CA
// authenticates both sides, and the forwarding side presents a client certificate of ReplicaIdentity.
type ReplicaTLS interface {
	// Server is the configuration of the receiving side: the replica's serving certificate, client certificates of
	// the CA required.
	Server() *tls.Config
	// Client returns the configuration of the forwarding side: a fresh client certificate of ReplicaIdentity, the
	// CA's bundle to verify the other's serving certificate.
	Client() (*tls.Config, error)
}

// ReplicaIdentity is the common name of the client certificates replicas present to each other.
const ReplicaIdentity = "trellis:hub-replica"

// forwardPreface starts a connection that a replica forwards to the replica serving the seed's agent, before the
// client's ClientHello. Its first byte starts neither a ClientHello (a TLS record begins with its content type, 0x16)
// nor a data preface ('T'). It is honoured only from a replica's own host, and it says: do not forward again, and the
// forwarding replica has counted the client's tunnels.
const forwardPreface = "FORWARDED TRELLIS-TUNNEL/1\n"

// seedAPIForwardPreface starts a seed API tunnel that a replica forwards to the replica serving the seed's agent; as
// long as forwardPreface. TLS between the replicas follows it (ReplicaTLS), then the seed's name and a newline, and
// the receiving replica answers "OK\n" once the tunnel is open; then it carries the seed API's requests (plain HTTP
// with the hub's impersonation headers, inside that TLS).
const seedAPIForwardPreface = "FORWARDED TRELLIS-SEED-API\n"

// seedAPIForwardTimeout bounds a seed API forward's handshake, the seed's name and the answer.
const seedAPIForwardTimeout = 15 * time.Second

// forwardTimeout bounds the connect to the other replica and the write of its preface.
const forwardTimeout = 5 * time.Second

// connKind is what a connection on the SNI listener begins with.
type connKind int

const (
	clientHello      connKind = iota // a client's, or anything else: the ClientHello parser decides
	forwardedHello                   // forwardPreface, then a client's ClientHello
	forwardedData                    // a data preface (tunnelwire), forwarded by the replica the agent opened it to
	forwardedSeedAPI                 // seedAPIForwardPreface, then TLS between the replicas
)

// sniff reads the forward preface if c begins with one and returns what c begins with and the connection to read the
// rest from. A connection that begins with the preface's first byte but not with the whole preface, or whose preface
// or data preface comes from a host that is no replica's, is an error.
func (t *Tunnels) sniff(ctx context.Context, c net.Conn) (connKind, net.Conn, error) {
	first, c, err := tunnelwire.PeekByte(c)
	switch {
	case err != nil:
		return clientHello, c, err
	case first == tunnelwire.DataPrefaceMagic[0]:
		if !t.fromPeer(ctx, c) {
			return clientHello, c, fmt.Errorf("a data connection from %s, which is no hub replica's host", c.RemoteAddr())
		}
		return forwardedData, c, nil
	case first != forwardPreface[0]:
		return clientHello, c, nil
	}
	b := make([]byte, len(forwardPreface))
	if _, err := io.ReadFull(c, b); err != nil {
		return clientHello, c, fmt.Errorf("forward preface: %w", err)
	}
	kind := forwardedHello
	switch string(b) {
	case forwardPreface:
	case seedAPIForwardPreface:
		kind = forwardedSeedAPI
	default:
		return clientHello, c, errors.New("neither a TLS ClientHello nor a replica's forward preface")
	}
	if !t.fromPeer(ctx, c) {
		return clientHello, c, fmt.Errorf("a forward preface from %s, which is no hub replica's host", c.RemoteAddr())
	}
	return kind, c, nil
}

// fromPeer reports whether c comes from the host of a replica's SNI listener address.
func (t *Tunnels) fromPeer(ctx context.Context, c net.Conn) bool {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return t.cfg.Peers != nil && t.cfg.Peers.IsPeer(ctx, host)
}

// dialReplica connects to the replica that serves seed's agent, if another one does, and writes preface: nil when no
// other replica serves the seed.
func (t *Tunnels) dialReplica(ctx context.Context, seed, preface string) (net.Conn, error) {
	if t.cfg.Peers == nil {
		return nil, nil
	}
	addr, err := t.cfg.Peers.TunnelPeer(ctx, seed)
	if err != nil || addr == "" {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		if _, err = io.WriteString(up, preface); err != nil {
			_ = up.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("forward to the replica at %s: %w", addr, err)
	}
	return up, nil
}

// forwardSeedAPI opens a seed API tunnel through the replica that serves seed's agent, if another one does: TLS
// between the replicas, the seed's name, the other's "OK". It returns nil when no other replica serves the seed.
func (t *Tunnels) forwardSeedAPI(ctx context.Context, seed string) (net.Conn, error) {
	if t.cfg.Replicas == nil {
		return nil, nil
	}
	raw, err := t.dialReplica(ctx, seed, seedAPIForwardPreface)
	if err != nil || raw == nil {
		return nil, err
	}
	cfg, err := t.cfg.Replicas.Client()
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, seedAPIForwardTimeout)
	defer cancel()
	c := tls.Client(raw, cfg)
	dl, _ := ctx.Deadline()
	_ = raw.SetDeadline(dl)
	answer := make([]byte, 3)
	if err = c.HandshakeContext(ctx); err == nil {
		if _, err = c.Write([]byte(seed + "\n")); err == nil {
			_, err = io.ReadFull(c, answer)
		}
	}
	if err == nil && string(answer) != "OK\n" {
		err = fmt.Errorf("answered %q", answer)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("forward to the replica at %s: %w", raw.RemoteAddr(), err)
	}
	_ = raw.SetDeadline(time.Time{})
	return c, nil
}

// serveSeedAPIForward serves a seed API tunnel that another replica forwards (after its preface): TLS with the
// replica's client certificate, the seed's name, then the tunnel to the seed's kube-apiserver through its agent,
// which must have its session here (it is never forwarded again).
func (t *Tunnels) serveSeedAPIForward(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	log := t.cfg.Log.With("forwardedBy", raw.RemoteAddr().String())
	if t.cfg.Replicas == nil {
		log.Info("seed API forward refused: no TLS between replicas here")
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	_ = raw.SetDeadline(time.Now().Add(seedAPIForwardTimeout))
	c := tls.Server(raw, t.cfg.Replicas.Server())
	seed, err := readSeedLine(c)
	if err != nil {
		t.metrics.failures.WithLabelValues(kindSeedAPI, "bad-hello").Inc()
		log.Info("seed API forward refused", "err", err)
		return
	}
	t.metrics.forwards.WithLabelValues(kindSeedAPI, "in").Inc()
	release, err := t.limits.acquire("seed-api/"+seed, "") // the forwarding replica counted the user
	if err != nil {
		t.metrics.failures.WithLabelValues(kindSeedAPI, "limit").Inc()
		log.Warn("seed API forward refused", "seed", seed, "err", err)
		return
	}
	defer release()
	up, err := t.cfg.Dialer.DialTunnel(ctx, seed, &agentv1.TunnelTarget{Kind: agentv1.TunnelTarget_KIND_SEED_API_SERVER})
	if err != nil {
		t.metrics.failures.WithLabelValues(kindSeedAPI, failureReason(err)).Inc()
		log.Warn("seed API forward failed", "seed", seed, "err", err)
		return
	}
	defer up.Close()
	if _, err := c.Write([]byte("OK\n")); err != nil {
		return
	}
	_ = raw.SetDeadline(time.Time{})
	t.pipe(ctx, c, up, kindSeedAPI)
}

// readSeedLine completes the TLS handshake of a seed API forward and reads the seed's name and its newline, byte by
// byte (nothing follows before the answer), checking the name.
func readSeedLine(c *tls.Conn) (string, error) {
	if err := c.Handshake(); err != nil {
		return "", err
	}
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := io.ReadFull(c, b); err != nil {
			return "", fmt.Errorf("seed name: %w", err)
		}
		if b[0] == '\n' {
			break
		}
		if line = append(line, b[0]); len(line) > validation.DNS1123SubdomainMaxLength {
			return "", errors.New("seed name: too long")
		}
	}
	if errs := validation.IsDNS1123Subdomain(string(line)); len(errs) > 0 {
		return "", fmt.Errorf("seed name %q: %s", line, strings.Join(errs, "; "))
	}
	return string(line), nil
}
