package landscape

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trellis-dev/trellis/agent/config"

	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/timescale"
)

// Defaults of a Config.
const (
	// DefaultSeedName is the seed of a Config without seeds.
	DefaultSeedName = "local"
	// DefaultRegion is the seeds' provider region and the examples' region.
	DefaultRegion = "local"
	// DefaultExtensionErrorThreshold is the agents' controllers.shoot.extensionErrorThreshold: short, so that a
	// failing extension fails the shoot's flow (and the retry follows) within seconds, not the 30 s of a real seed.
	DefaultExtensionErrorThreshold = 2 * time.Second
	// DefaultReadyTimeout bounds each wait for a process to become ready; a seed's first start on a loaded 2-core
	// machine takes most of a minute. Scaled by test/timescale's factor.
	DefaultReadyTimeout = 3 * time.Minute
	// DefaultStopTimeout bounds a process's graceful stop before it is killed; a seed stops etcd and kube-apiserver
	// gracefully, which can take a while. Scaled by test/timescale's factor.
	DefaultStopTimeout = 30 * time.Second
)

// Config configures a landscape. The zero value plus Dir runs one seed "local" on free loopback ports with the
// binaries of <module root>/bin.
type Config struct {
	// Dir holds everything of the landscape: hub data, seeds, agent configurations, backups, logs. Required; created
	// when missing, reused by a later Start.
	Dir string
	// BinDir holds trellis-hub, trellis-agent, localseed and provider-local (default: bin of the module root, the
	// first directory holding go.mod at or above the working directory).
	BinDir string
	// TestBinDir holds etcd, kube-apiserver and kube-controller-manager for the seeds (default: $KUBEBUILDER_ASSETS,
	// else <BinDir>/testbin).
	TestBinDir string
	// HubListen is the hub's REST and gRPC address; "" or port 0 takes a free port (on 127.0.0.1 for "").
	HubListen string
	// HubGRPCListen is the hub's gRPC-only address, where agents connect; "" or port 0 takes a free port.
	HubGRPCListen string
	// TunnelListen is the hub's TLS-passthrough address of shoot API servers (docs/tunnels.md); "" leaves it off,
	// so that several landscapes (tests) run side by side. `make up` serves it on 127.0.0.1:8445.
	TunnelListen string
	// Seeds are the seeds to run, each with its agent and provider-local (default: one seed DefaultSeedName).
	Seeds []SeedConfig
	// Examples applies the example resources (namespace garden-local, project local, cloud profile local, a
	// provider secret, credentials binding local and shoot local) once everything runs; objects that exist already
	// are left alone.
	Examples bool
	// ExamplesWithoutShoot, with Examples, leaves the example shoot out: for tests that run shoots of their own, to
	// which its control plane and machine would only be load.
	ExamplesWithoutShoot bool
	// ExtensionErrorThreshold is the agents' controllers.shoot.extensionErrorThreshold (default
	// DefaultExtensionErrorThreshold).
	ExtensionErrorThreshold time.Duration
	// HubArgs are extra flags for trellis-hub, after the landscape's own.
	HubArgs []string
	// ProviderLocalArgs are extra flags for provider-local, after the landscape's own.
	ProviderLocalArgs []string
	// AgentMutate, when set, adjusts each agent's configuration before it is written (the result must still be
	// valid).
	AgentMutate func(seed string, c *config.AgentConfiguration)
	// Registrations are further ControllerRegistrations the landscape creates, without a deployment, before the agents
	// start, by name: the "Kind/type" pairs each registers (RegisterExtensions), e.g. a seed provider type other than
	// local, which the hub refuses unregistered.
	Registrations map[string][]string
	// ManualProviderLocal leaves provider-local to the caller: Start neither registers it (RegisterProviderLocal) nor
	// runs it (StartProviderLocalIn). By default Start registers it and runs it in each seed's installation namespace.
	ManualProviderLocal bool
	// RequireProviderLocal makes Start fail when BinDir has no provider-local; otherwise the seeds run without their
	// extension (shoots do not progress) and Start says so on Log.
	RequireProviderLocal bool
	// Node runs a real node in every seed (localseed --node, test/localnode): pods run, and the Seed's networks are
	// the node's. Needs root and `make testbin`. NodeImages are further image archives its node imports.
	Node       bool
	NodeImages []string
	// MachinesHostNoSeeds keeps the shoots' machines to the images their workers run. Without it every machine also
	// imports the control plane's images (about 290 MB, minutes on a loaded machine), which the agent of a ManagedSeed
	// on that shoot runs there; for tests whose shoots with workers never become seeds.
	MachinesHostNoSeeds bool
	// SeedAuditLog makes every seed's kube-apiserver write an audit log of every request (localseed --audit-log),
	// Seed.AuditLog, for tests that check what the agent and the extensions do in the seed.
	SeedAuditLog bool
	// AgentProcess runs the agents as processes of the landscape even with Node; by default a seed with a node runs
	// its agent as the pod of the trellis-agent chart (agentpod.go). Seeds without a node always run the process.
	AgentProcess bool
	// Log receives one line per step, for people watching (default: discarded).
	Log io.Writer
	// ReadyTimeout bounds each wait for a process to become ready (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopTimeout bounds each process's graceful stop before it is killed (default DefaultStopTimeout).
	StopTimeout time.Duration
}

// SeedConfig configures one seed.
type SeedConfig struct {
	// Name is the Seed's name: a DNS label, unique in the landscape.
	Name string
	// Region is the seed's provider region (default DefaultRegion, the region of the example cloud profile).
	Region string
}

// Default fills unset fields and makes the paths absolute.
func (c *Config) Default() error {
	var err error
	if c.Dir != "" {
		if c.Dir, err = filepath.Abs(c.Dir); err != nil {
			return err
		}
	}
	if c.BinDir == "" {
		root, err := binproc.ModuleRoot()
		if err != nil {
			return fmt.Errorf("BinDir: %w: set BinDir", err)
		}
		c.BinDir = filepath.Join(root, "bin")
	}
	if c.BinDir, err = filepath.Abs(c.BinDir); err != nil {
		return err
	}
	if c.TestBinDir == "" {
		c.TestBinDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if c.TestBinDir == "" {
		c.TestBinDir = filepath.Join(c.BinDir, "testbin")
	}
	if c.TestBinDir, err = filepath.Abs(c.TestBinDir); err != nil {
		return err
	}
	if len(c.Seeds) == 0 {
		c.Seeds = []SeedConfig{{Name: DefaultSeedName}}
	}
	for i := range c.Seeds {
		if c.Seeds[i].Region == "" {
			c.Seeds[i].Region = DefaultRegion
		}
	}
	if c.ExtensionErrorThreshold == 0 {
		c.ExtensionErrorThreshold = DefaultExtensionErrorThreshold
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = timescale.Scale(DefaultReadyTimeout)
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = timescale.Scale(DefaultStopTimeout)
	}
	return nil
}

// Validate reports every problem of a defaulted Config.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir: required"))
	}
	for _, a := range []struct{ name, addr string }{{"HubListen", c.HubListen}, {"HubGRPCListen", c.HubGRPCListen}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.name, err))
		}
	}
	seen := map[string]bool{}
	for i, s := range c.Seeds {
		for _, msg := range validation.IsDNS1123Label(s.Name) {
			errs = append(errs, fmt.Errorf("Seeds[%d].Name %q: %s", i, s.Name, msg))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("Seeds[%d].Name %q: duplicate", i, s.Name))
		}
		seen[s.Name] = true
	}
	if c.ExtensionErrorThreshold < 0 || c.ReadyTimeout < 0 || c.StopTimeout < 0 {
		errs = append(errs, errors.New("ExtensionErrorThreshold, ReadyTimeout and StopTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

// pickFreePort returns a port that was free on host a moment ago (a variable: a test hands out a taken one).
var pickFreePort = func(host string) (string, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer lis.Close()
	_, port, err := net.SplitHostPort(lis.Addr().String())
	return port, err
}

// freePortWanted reports whether addr (a Config listen address) leaves the port to loopbackAddr.
func freePortWanted(addr string) bool {
	if addr == "" {
		return true
	}
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// loopbackAddr returns addr with a free port when its port is 0 or addr is empty (then on 127.0.0.1), and the
// address clients dial: an unspecified host (0.0.0.0, ::, "") is reached on 127.0.0.1. A free port is found by
// listening on it and closing the listener: another process may take it before the hub does; the hub then fails to
// start, saying so in its log, and Start tries other free ports.
func loopbackAddr(addr string) (listen, dial string, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if port == "0" {
		if port, err = pickFreePort(host); err != nil {
			return "", "", fmt.Errorf("find a free port on %q: %w", host, err)
		}
	}
	listen = net.JoinHostPort(host, port)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return listen, net.JoinHostPort(host, port), nil
}
