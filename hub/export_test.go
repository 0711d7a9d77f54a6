package hub

import (
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
)

// Accessors of a running replica's parts for the package's tests (after Ready); not part of the hub's API.

func (h *Hub) parts() *replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// Registry is the replica's registry of kinds.
func (h *Hub) Registry() *api.Registry { return h.parts().Registry }

// Store is the replica's store.
func (h *Hub) Store() *store.Store { return h.parts().Store }

// CA is the hub's certificate authority.
func (h *Hub) CA() *pki.CA { return h.parts().CA }

// AgentLink is the replica's agent link.
func (h *Hub) AgentLink() *agentlink.Server { return h.parts().AgentLink }

// IsLeader reports whether the replica leads the control-plane loops now (false before Ready).
func (h *Hub) IsLeader() bool {
	p := h.parts()
	return p != nil && p.elector.IsLeader()
}

// Authority returns the replica's CA with its rotation.
func (h *Hub) Authority() *pki.Authority { return h.parts().Authority }
