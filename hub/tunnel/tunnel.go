package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// Dialer opens tunnels through the agent of a seed (hub/agentlink's Server).
type Dialer interface {
	DialTunnel(ctx context.Context, seed string, target *agentv1.TunnelTarget) (net.Conn, error)
}

// Shoots finds the seed a shoot runs on.
type Shoots interface {
	// SeedOf returns the seed of shoot name in project (status.seedName, else spec.seedName), or an error when the
	// shoot does not exist or is not scheduled.
	SeedOf(ctx context.Context, project, name string) (string, error)
}

// Config configures the hub's tunnel endpoints.
type Config struct {
	Dialer Dialer
	Shoots Shoots
	// Peers finds the replica that serves a seed's agent, for shoot API connections that reach another replica
	// (optional: without it, they are refused as when the agent is not connected).
	Peers Peers
	// Replicas is the TLS between replicas for seed API tunnels forwarded among them (optional: without it, a seed
	// API request on another replica than the agent's is a 503).
	Replicas ReplicaTLS
	// Domain is the domain of shoot API names: api.<shoot>.<project>.<Domain> (--tunnel-domain).
	Domain string
	// MaxPerSeed bounds the open tunnels (and seed API requests in flight) per seed (default 1000).
	MaxPerSeed int
	// MaxPerClient bounds them per client: per source IP on the SNI listener, per user on the seed API (default 100).
	MaxPerClient int
	// IdleTimeout ends a passthrough tunnel without traffic in either direction for this long (default 30 min) and
	// closes idle seed API connections (default 90 s).
	IdleTimeout time.Duration
	// HelloTimeout bounds the wait for a client's ClientHello (default 10 s).
	HelloTimeout time.Duration
	// Registerer receives the metrics (optional).
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// DefaultDomain is the default of --tunnel-domain.
const DefaultDomain = "tunnel.trellis.local"

func (c *Config) defaults() {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.MaxPerSeed == 0 {
		c.MaxPerSeed = 1000
	}
	if c.MaxPerClient == 0 {
		c.MaxPerClient = 100
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
	if c.HelloTimeout == 0 {
		c.HelloTimeout = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Tunnels are the hub's tunnel endpoints.
type Tunnels struct {
	cfg     Config
	metrics *metrics
	limits  *limits
}

// New returns the tunnel endpoints.
func New(cfg Config) (*Tunnels, error) {
	cfg.defaults()
	if cfg.Dialer == nil {
		return nil, errors.New("tunnel: Dialer is required")
	}
	if errs := validation.IsDNS1123Subdomain(cfg.Domain); len(errs) > 0 {
		return nil, fmt.Errorf("tunnel-domain: %q: %s", cfg.Domain, strings.Join(errs, "; "))
	}
	return &Tunnels{cfg: cfg, metrics: newMetrics(cfg.Registerer), limits: newLimits(cfg.MaxPerSeed, cfg.MaxPerClient)}, nil
}

// ShootServerName is the name of a shoot's API server on the SNI listener: api.<shoot>.<project>.<domain>.
func ShootServerName(shoot, project, domain string) string {
	return "api." + shoot + "." + project + "." + domain
}

// ShootOfServerName maps a server name to a shoot: the inverse of ShootServerName, case-insensitive (DNS names are).
func ShootOfServerName(serverName, domain string) (project, shoot string, err error) {
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	rest, ok := strings.CutSuffix(name, "."+strings.ToLower(domain))
	if !ok {
		return "", "", fmt.Errorf("server name %q is not in the tunnel domain %q", serverName, domain)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[0] != "api" {
		return "", "", fmt.Errorf("server name %q is not api.<shoot>.<project>.%s", serverName, domain)
	}
	for _, p := range parts[1:] {
		if errs := validation.IsDNS1123Label(p); len(errs) > 0 {
			return "", "", fmt.Errorf("server name %q: %q: %s", serverName, p, strings.Join(errs, "; "))
		}
	}
	return parts[2], parts[1], nil
}

// ShootNamespace is a shoot's namespace in its seed, Gardener's technical id: shoot--<project>--<name>.
func ShootNamespace(project, shoot string) string { return "shoot--" + project + "--" + shoot }

// limits counts open tunnels per seed and per client.
type limits struct {
	perSeed, perClient int
	mu                 sync.Mutex
	seeds, clients     map[string]int
}

func newLimits(perSeed, perClient int) *limits {
	return &limits{perSeed: perSeed, perClient: perClient, seeds: map[string]int{}, clients: map[string]int{}}
}

// errLimit is returned when a limit is reached.
type errLimit struct{ what string }

func (e errLimit) Error() string { return e.what }

// acquire counts a tunnel of seed for client, or says which limit it would exceed; release undoes it. A client ""
// is not counted (a connection another replica forwarded, which counted its client).
func (l *limits) acquire(seed, client string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seeds[seed] >= l.perSeed {
		return nil, errLimit{fmt.Sprintf("seed %q has %d open tunnels, the most allowed", seed, l.perSeed)}
	}
	if client != "" && l.clients[client] >= l.perClient {
		return nil, errLimit{fmt.Sprintf("client %q has %d open tunnels, the most allowed", client, l.perClient)}
	}
	l.seeds[seed]++
	if client != "" {
		l.clients[client]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.seeds[seed]--; l.seeds[seed] == 0 {
				delete(l.seeds, seed)
			}
			if client == "" {
				return
			}
			if l.clients[client]--; l.clients[client] == 0 {
				delete(l.clients, client)
			}
		})
	}, nil
}
