package agent

import (
	"fmt"
	"os"

	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/managedseed"
)

// newManagedSeeds builds the ManagedSeed controller (package managedseed): the agents it deploys into shoots reach
// the hub as this agent does, at its address and verified by its CA bundle, and run the shoot control planes of
// their seeds from this agent's image vector (controllers.shoot.controlPlane.imageVector), when it has one.
func (a *Agent) newManagedSeeds(base controller.Base) (*managedseed.Controller, error) {
	var vector []byte
	if path := a.cfg.Controllers.Shoot.ControlPlane.ImageVector; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("managedSeed controller: the image vector for the new agents: %w", err)
		}
		vector = b
	}
	return managedseed.New(managedseed.Config{Base: base, Dial: a.dialService, HubAddress: a.cfg.HubClientConnection.Address, HubCA: a.hubCA,
		ImageVector: vector})
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
