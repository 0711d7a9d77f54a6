package hub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/tunnel"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// newTunnels builds the tunnel endpoints (package tunnel) over the agent link.
func (h *Hub) newTunnels(reg *api.Registry, link *agentlink.Server, authority *pki.Authority, promReg prometheus.Registerer) (*tunnel.Tunnels, error) {
	return tunnel.New(tunnel.Config{
		Dialer: link, Shoots: shootSeeds{reg}, Peers: link, Replicas: replicaTLS{authority}, Domain: h.tunnelDomain(),
		MaxPerSeed: h.cfg.TunnelMaxPerSeed, MaxPerClient: h.cfg.TunnelMaxPerClient, IdleTimeout: h.cfg.TunnelIdleTimeout,
		Registerer: promReg, Log: h.log.With("component", "tunnel"),
	})
}

// tunnelPeerAddress is where the other replicas reach the SNI listener at lis: Config.TunnelPeerAddress, else lis'
// address unless it is unspecified (0.0.0.0, ::), when it is "" (no forwarding to this replica).
func (h *Hub) tunnelPeerAddress(lis net.Addr) string {
	if h.cfg.TunnelPeerAddress != "" {
		return h.cfg.TunnelPeerAddress
	}
	if a, ok := lis.(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
		return a.String()
	}
	return ""
}

// seedAPIAuthorizer lets cluster admins, and nobody else, use a seed's API through the hub.
func seedAPIAuthorizer(authn *auth.Authenticator) tunnel.Authorize {
	return func(r *http.Request) (auth.User, error) {
		ctx, err := authenticateHTTP(authn, r)
		if err != nil {
			return auth.User{}, err
		}
		u, _ := auth.UserFrom(ctx)
		if err := authz.AuthorizePath(u, strings.ToLower(r.Method), r.URL.Path, false); err != nil {
			return auth.User{}, err
		}
		return u, nil
	}
}

// shootSeeds finds shoots' seeds in the registry: the project's namespace, the shoot there, its seed.
type shootSeeds struct{ reg *api.Registry }

func (s shootSeeds) SeedOf(ctx context.Context, project, name string) (string, error) {
	projects, _ := s.reg.Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"})
	shoots, _ := s.reg.Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"})
	p, err := projects.Get(ctx, "", project)
	if err != nil {
		return "", fmt.Errorf("project %q: %w", project, err)
	}
	ns := p.(*corev1beta1.Project).GetSpec().GetNamespace()
	if ns == "" {
		return "", fmt.Errorf("project %q has no namespace", project)
	}
	o, err := shoots.Get(ctx, ns, name)
	if err != nil {
		return "", fmt.Errorf("shoot %s/%s: %w", ns, name, err)
	}
	sh := o.(*corev1beta1.Shoot)
	seed := sh.GetStatus().GetSeedName()
	if seed == "" {
		seed = sh.GetSpec().GetSeedName()
	}
	if seed == "" {
		return "", fmt.Errorf("shoot %s/%s is not scheduled on a seed", ns, name)
	}
	return seed, nil
}

// tunnelDomain is the domain of shoot API names on the passthrough listener, as agents learn it in Welcome.
func (h *Hub) tunnelDomain() string {
	if h.cfg.TunnelDomain == "" {
		return tunnel.DefaultDomain
	}
	return h.cfg.TunnelDomain
}

// replicaTLS is the TLS between this replica and the others for seed API tunnels forwarded among them
// (tunnel.ReplicaTLS): both sides present certificates the hub's CA issues for the handshake, whatever serving
// certificate the listeners have (an operator's --tls-cert-file among them).
type replicaTLS struct{ authority *pki.Authority }

// replicaServerName is the name in the certificates that replicas serve each other.
const replicaServerName = "hub-replica.trellis.internal"

// replicaCertValidity is how long the certificates of one handshake are valid.
const replicaCertValidity = time.Hour

func (r replicaTLS) Server() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, err := r.authority.Current().ServingCert([]string{replicaServerName}, replicaCertValidity)
		if err != nil {
			return nil, err
		}
		return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: r.authority.Pool(),
			VerifyConnection: func(cs tls.ConnectionState) error {
				if cn := cs.PeerCertificates[0].Subject.CommonName; cn != tunnel.ReplicaIdentity {
					return fmt.Errorf("client certificate of %q, not of a hub replica", cn)
				}
				return nil
			}}, nil
	}}
}

func (r replicaTLS) Client() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	certPEM, err := r.authority.SignClientCert(&x509.CertificateRequest{Subject: pkix.Name{CommonName: tunnel.ReplicaIdentity}, PublicKey: &key.PublicKey}, replicaCertValidity)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("replica client certificate: no PEM")
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: r.authority.Pool(), ServerName: replicaServerName,
		Certificates: []tls.Certificate{{Certificate: [][]byte{block.Bytes}, PrivateKey: key}}}, nil
}
