package agent

import (
	"os"

	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/managedseed"
)

// newManagedSeeds builds the ManagedSeed controller (package managedseed): the agents it deploys into shoots reach
// the hub as this agent does, at its address and verified by its CA bundle.
func (a *Agent) newManagedSeeds(base controller.Base) (*managedseed.Controller, error) {
	return managedseed.New(managedseed.Config{Base: base, Dial: a.dialService, HubAddress: a.cfg.HubClientConnection.Address, HubCA: a.hubCA})
}

// hubCA is the PEM bundle that verifies the hub: the one of the agent's credentials (the hub's current CA, kept up
// to date through rotations), else the configured one.
func (a *Agent) hubCA() []byte {
	if c := a.creds.Get(); c != nil && len(c.CAPEM) > 0 {
		return c.CAPEM
	}
	h := a.cfg.HubClientConnection
	if h.CABundle != "" {
		return []byte(h.CABundle)
	}
	if h.CAFile != "" {
		if b, err := os.ReadFile(h.CAFile); err == nil {
			return b
		}
	}
	return nil
}
