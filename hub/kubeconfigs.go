package hub

import (
	"net"

	"google.golang.org/grpc"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/kubeconfig"
	"github.com/trellis-dev/trellis/hub/tunnel"
)

// newKubeconfigs builds the shoots' kubeconfig subresources (package kubeconfig) and registers their service in
// services; their REST routes are the returned server's Routes. The kubeconfigs point at the tunnel listener.
func (h *Hub) newKubeconfigs(reg *api.Registry, services grpc.ServiceRegistrar) (*kubeconfig.Server, error) {
	s, err := kubeconfig.New(kubeconfig.Config{
		Reader: reg, Authorizer: reg.Authorizer(), Address: h.tunnelAdvertiseAddress, Domain: h.tunnelDomain(),
		MaxExpiration: h.cfg.ShootKubeconfigMaxExpiration, Now: h.cfg.Now, Log: h.log.With("component", "kubeconfig"),
	})
	if err != nil {
		return nil, err
	}
	s.Register(services)
	return s, nil
}

// tunnelAdvertiseAddress is where clients reach the tunnel listener: Config.TunnelAdvertiseAddress, else the
// listener's address ("" without a listener, or before it listens).
func (h *Hub) tunnelAdvertiseAddress() string {
	if h.cfg.TunnelAdvertiseAddress != "" {
		return h.cfg.TunnelAdvertiseAddress
	}
	return h.TunnelAddr()
}

// shootExternalURL returns the URL of shoots' kube-apiservers through the tunnel listener, for their
// status.advertisedAddresses: https://api.<shoot>.<project>.<tunnel domain>, with the advertised address's port
// unless it is 443 (the name resolves where a wildcard DNS record points the tunnel domain at the listener). Nil
// when the hub serves no tunnel listener and advertises none.
func (h *Hub) shootExternalURL() func(project, shoot string) string {
	if h.cfg.TunnelListen == "" && h.cfg.TunnelListener == nil && h.cfg.TunnelAdvertiseAddress == "" {
		return nil
	}
	domain := h.tunnelDomain()
	return func(project, shoot string) string {
		addr := h.tunnelAdvertiseAddress()
		if addr == "" {
			return ""
		}
		host := tunnel.ShootServerName(shoot, project, domain)
		if _, port, err := net.SplitHostPort(addr); err == nil && port != "443" {
			host = net.JoinHostPort(host, port)
		}
		return "https://" + host
	}
}
