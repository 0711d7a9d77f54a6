package landscape

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/localnode"
)

// Landscape is a running local landscape. Its methods may be called from several goroutines.
type Landscape struct {
	// Dir holds the landscape's files (Config.Dir, absolute).
	Dir string
	// LogDir holds one log per process: hub.log, seed-<seed>.log, agent-<seed>.log, provider-local-<seed>.log.
	LogDir string
	// HubURL is the hub's REST address, https://<HubAddr>.
	HubURL string
	// HubAddr is the host:port of the hub's REST and gRPC listener.
	HubAddr string
	// GRPCAddr is the host:port of the hub's gRPC-only listener, where agents connect.
	GRPCAddr string
	// CAFile is the hub's CA certificate, which verifies both listeners.
	CAFile string
	// Token is the hub's admin token.
	Token string
	// ProviderLocal reports whether provider-local runs beside each seed (BinDir holds it).
	ProviderLocal bool

	cfg Config
	// imageVector is the agents' image vector of the shoot control plane (the local images of the node), when the
	// seeds have nodes.
	imageVector string
	agentImage  agentImageRef // with agent pods
	// machineImages are the image archives of this build that the shoots' machines import besides their own: the
	// agent's and provider-local's, which a ManagedSeed's agent and its ControllerInstallation run there, and the
	// shoot control plane's, which that agent runs there for the shoots of its seed.
	machineImages []string
	hub           *binproc.Process
	hubc          *hubClient
	seeds         []*Seed
	lock          *os.File
	failures      chan error
	// hubExits orders the reports of hub exits against the hub's replacement during Start (ports taken): a report of
	// a replaced hub process is not a failure of the landscape, whether it came before the replacement (then it is
	// taken back) or after (then it is not made).
	hubExits struct {
		sync.Mutex
		current int // the hub process whose exit is a failure
	}

	stopOnce sync.Once
	stopErr  error
}

// Start brings a landscape up as described in the package documentation and returns once every process is ready
// and the examples are applied. On error, or when ctx ends first, whatever was started is stopped. The landscape runs
// until Stop; ctx only bounds the start.
func Start(ctx context.Context, cfg Config) (_ *Landscape, err error) {
	if err := cfg.Default(); err != nil {
		return nil, fmt.Errorf("landscape: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("landscape: %w", err)
	}
	begin := time.Now()
	l := &Landscape{Dir: cfg.Dir, LogDir: filepath.Join(cfg.Dir, "logs"), cfg: cfg, failures: make(chan error, 16)}
	for _, d := range []string{l.LogDir, filepath.Join(l.Dir, "backups"), filepath.Join(l.Dir, "seeds"), filepath.Join(l.Dir, "agents")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("landscape: %w", err)
		}
	}
	for _, s := range cfg.Seeds {
		if err := os.MkdirAll(filepath.Join(l.Dir, "agents", s.Name), 0o700); err != nil {
			return nil, fmt.Errorf("landscape: %w", err)
		}
	}
	if l.lock, err = lockDir(filepath.Join(l.Dir, "landscape.lock")); err != nil {
		return nil, fmt.Errorf("landscape: %w", err)
	}
	defer func() {
		if err != nil {
			if serr := l.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
			err = fmt.Errorf("landscape: %w", err)
		}
	}()
	if err := l.checkBinaries(); err != nil {
		return nil, err
	}

	hubDir := filepath.Join(l.Dir, "hub")
	l.CAFile = filepath.Join(hubDir, "pki", "ca.crt")
	_, statErr := os.Stat(filepath.Join(hubDir, "admin-token"))
	freshHub := errors.Is(statErr, os.ErrNotExist)
	listen, dial, err := loopbackAddr(cfg.HubListen)
	if err != nil {
		return nil, fmt.Errorf("hub listen address: %w", err)
	}
	grpcListen, grpcDial, err := loopbackAddr(cfg.HubGRPCListen)
	if err != nil {
		return nil, fmt.Errorf("hub gRPC listen address: %w", err)
	}
	l.HubAddr, l.GRPCAddr, l.HubURL = dial, grpcDial, "https://"+dial
	var hostArgs []string
	if l.agentPods() {
		hostArgs = slotHosts()
		archive, repo, tag, err := l.binaryImage("trellis-agent")
		if err != nil {
			return nil, fmt.Errorf("trellis-agent image: %w", err)
		}
		l.cfg.NodeImages = append(l.cfg.NodeImages, archive)
		l.machineImages = append(l.machineImages, archive)
		l.agentImage = agentImageRef{repository: repo, tag: tag}
		l.logf("agents: image %s:%s (%s) runs as the trellis-agent chart's pod in every seed", repo, tag, archive)
	}
	hubProcess := func(listen, grpcListen string) *binproc.Process {
		args := []string{"--data-dir", hubDir, "--listen", listen, "--grpc-listen", grpcListen, "--log-format", "text", "--tunnel-listen", cfg.TunnelListen}
		args = append(append(args, hostArgs...), cfg.HubArgs...)
		l.hubExits.Lock()
		l.hubExits.current++
		gen := l.hubExits.current
		l.hubExits.Unlock()
		return l.newProcessReporting("hub", "trellis-hub", nil, func(err error) {
			l.hubExits.Lock()
			defer l.hubExits.Unlock()
			if gen == l.hubExits.current {
				l.report(hubExit{gen: gen, err: err, log: filepath.Join(l.LogDir, "hub.log")})
			}
		}, args...)
	}
	l.hub = hubProcess(listen, grpcListen)
	// With nodes, provider-local runs as its chart's pod from an image of this build (providerpod.go).
	providerValues := DefaultProviderLocalValues()
	podMode := cfg.Node && l.ProviderLocal && !cfg.ManualProviderLocal
	if podMode {
		archive, repo, tag, err := l.binaryImage("provider-local")
		if err != nil {
			return nil, fmt.Errorf("provider-local image: %w", err)
		}
		l.cfg.NodeImages = append(l.cfg.NodeImages, archive)
		l.machineImages = append(l.machineImages, archive)
		providerValues = providerLocalPodValues(repo, tag)
		l.logf("provider-local: image %s:%s (%s) runs as its chart's pod in every seed", repo, tag, archive)
	}
	if cfg.Node {
		// The agents run the shoots' control planes on the nodes, from the images `make testbin` built.
		vector, err := localnode.ControlPlaneImageVector(l.cfg.TestBinDir)
		if err != nil {
			return nil, fmt.Errorf("shoot control plane images: %w", err)
		}
		l.imageVector = filepath.Join(l.Dir, "images", "control-plane-image-vector.yaml")
		if err := os.MkdirAll(filepath.Dir(l.imageVector), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(l.imageVector, vector, 0o600); err != nil {
			return nil, err
		}
		l.cfg.NodeImages = append(l.cfg.NodeImages, localnode.ControlPlaneArchives(l.cfg.TestBinDir)...)
		// A shoot with machines may become a seed (a ManagedSeed) whose agent, with this vector, runs other shoots'
		// control planes there: the machines import the same images, unless the caller knows none will.
		if !cfg.MachinesHostNoSeeds {
			l.machineImages = append(l.machineImages, localnode.ControlPlaneArchives(l.cfg.TestBinDir)...)
		}
	}
	for _, sc := range cfg.Seeds {
		l.seeds = append(l.seeds, l.newSeed(sc, l.ProviderLocal && !podMode))
	}

	// The seeds take longest: they start first and come up while the hub does.
	for _, s := range l.seeds {
		l.logf("seed %s: starting (log %s)", s.Name, s.SeedLog)
		if err := l.startSeedProcess(s); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		l.logf("hub: starting on %s, agents on %s (log %s)", l.HubURL, l.GRPCAddr, l.hub.LogPath())
		if err := l.hub.Start(); err != nil {
			return nil, err
		}
		err := l.waitHub(ctx)
		if err == nil {
			break
		}
		// A free port found here can be taken by another process before the hub binds it (tests running beside
		// each other): with ports of our choosing, other ones are tried.
		if attempt == 3 || !strings.Contains(l.hub.Tail(2<<10), "address already in use") ||
			!freePortWanted(cfg.HubListen) || !freePortWanted(cfg.HubGRPCListen) {
			return nil, err
		}
		if listen, dial, err = loopbackAddr(cfg.HubListen); err != nil {
			return nil, err
		}
		if grpcListen, grpcDial, err = loopbackAddr(cfg.HubGRPCListen); err != nil {
			return nil, err
		}
		l.HubAddr, l.GRPCAddr, l.HubURL = dial, grpcDial, "https://"+dial
		// The failed hub may have written its admin token before it failed to bind, and the wait then made a
		// client of the old address: the next wait makes one of the new.
		l.hubc = nil
		l.logf("hub: a port was taken before the hub bound it; trying %s and %s", listen, grpcListen)
		l.hub = hubProcess(listen, grpcListen)
		l.takeBackHubExits()
	}
	l.logf("hub: ready")
	for _, b := range seedSecrets() {
		if _, err := l.hubc.create(ctx, "/api/v1/namespaces/garden/secrets", b); err != nil {
			return nil, err
		}
	}
	// The seeds, then the extension types' registrations (with the seeds' machine providers), then each seed's agent
	// and provider-local; the seeds in parallel. The hub refuses Seeds and Shoots whose extension types no
	// ControllerRegistration registers (Gardener's ExtensionValidator), so the types are registered before the agents
	// register their Seeds: provider-local's (also without its binary: its installations then run no process) and the
	// configuration's others.
	errs := make([]error, len(l.seeds))
	var wg sync.WaitGroup
	for i, s := range l.seeds {
		wg.Go(func() { errs[i] = l.waitSeed(ctx, s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !cfg.ManualProviderLocal {
		if l.ProviderLocal && podMode {
			if err := l.addMachineProviders(providerValues); err != nil {
				return nil, err
			}
		}
		l.logf("hub: registering provider-local (ControllerRegistration and ControllerDeployment %s)", ProviderLocalRegistration)
		if err := l.RegisterProviderLocal(ctx, providerValues); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Registrations)) {
		l.logf("hub: registering %s (ControllerRegistration of %v)", name, cfg.Registrations[name])
		if err := l.RegisterExtensions(ctx, name, cfg.Registrations[name]...); err != nil {
			return nil, err
		}
	}
	for i, s := range l.seeds {
		wg.Go(func() { errs[i] = l.bringUp(ctx, s, freshHub) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !l.ProviderLocal {
		l.logf("provider-local: not found in %s (cmd/provider-local not built yet?): the seeds run without their "+
			"extension, so shoots are scheduled but do not progress", cfg.BinDir)
	}

	if cfg.Examples {
		if err := l.applyExamples(ctx); err != nil {
			return nil, err
		}
	}
	l.logf("landscape ready in %s", time.Since(begin).Round(100*time.Millisecond))
	return l, nil
}

// bringUp starts the agent and the provider-local of seed s, which is ready.
func (l *Landscape) bringUp(ctx context.Context, s *Seed, freshHub bool) error {
	l.logf("seed %s: ready (kubeconfig %s)", s.Name, s.Kubeconfig)
	if l.agentPods() {
		l.logf("seed %s: installing its agent's chart (release %s/%s)", s.Name, AgentNamespace, AgentRelease)
		if err := l.startAgentPod(ctx, s, freshHub); err != nil {
			return err
		}
	} else {
		l.logf("seed %s: starting its agent (log %s)", s.Name, s.AgentLog)
		if err := l.startAgent(ctx, s, freshHub); err != nil {
			return err
		}
	}
	l.logf("seed %s: agent connected, Seed %s is %s", s.Name, s.Name, GardenletReady)
	if l.cfg.Node && l.ProviderLocal && !l.cfg.ManualProviderLocal {
		ci, err := l.ProviderLocalInstallation(ctx, s.Name)
		if err != nil {
			return err
		}
		ns := extensionNamespacePrefix + ci
		l.logf("seed %s: waiting for provider-local's pod of ControllerInstallation %s in namespace %s", s.Name, ci, ns)
		if err := l.waitProviderLocalPod(ctx, s, ns); err != nil {
			return err
		}
		l.logf("seed %s: provider-local running as a pod", s.Name)
		return nil
	}
	if s.provider == nil || l.cfg.ManualProviderLocal {
		return nil
	}
	ci, err := l.ProviderLocalInstallation(ctx, s.Name)
	if err != nil {
		return err
	}
	ns := extensionNamespacePrefix + ci
	l.logf("seed %s: starting provider-local for ControllerInstallation %s in namespace %s (log %s)", s.Name, ci, ns, s.ProviderLocalLog)
	if err := l.startProviderLocal(ctx, s, ns); err != nil {
		return err
	}
	l.logf("seed %s: provider-local running", s.Name)
	return nil
}

// checkBinaries fails with a hint when a required binary is missing, and notes whether provider-local exists.
func (l *Landscape) checkBinaries() error {
	var missing []string
	check := func(dir, name string) bool {
		fi, err := os.Stat(filepath.Join(dir, name))
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	for _, b := range []string{"trellis-hub", "trellis-agent", "localseed"} {
		if !check(l.cfg.BinDir, b) {
			missing = append(missing, filepath.Join(l.cfg.BinDir, b))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run `make build` and `go build -o bin/ ./test/localseed` (make up does both)",
			strings.Join(missing, ", "))
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if !check(l.cfg.TestBinDir, b) {
			missing = append(missing, filepath.Join(l.cfg.TestBinDir, b))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run `make testbin`", strings.Join(missing, ", "))
	}
	l.ProviderLocal = check(l.cfg.BinDir, "provider-local")
	if !l.ProviderLocal && l.cfg.RequireProviderLocal {
		return fmt.Errorf("%w: %s", ErrNoProviderLocal, filepath.Join(l.cfg.BinDir, "provider-local"))
	}
	return nil
}

// waitHub waits until the hub has written its CA and admin token and answers /readyz, then connects to it.
func (l *Landscape) waitHub(ctx context.Context) error {
	tokenFile := filepath.Join(l.Dir, "hub", "admin-token")
	return l.waitFor(ctx, l.hub, "ready", func(ctx context.Context) (bool, error) {
		if l.hubc == nil {
			tok, err := os.ReadFile(tokenFile)
			if err != nil || strings.TrimSpace(string(tok)) == "" {
				return false, nil
			}
			c, err := newHubClient(l.HubURL, l.CAFile, strings.TrimSpace(string(tok)))
			if err != nil {
				return false, nil
			}
			l.hubc, l.Token = c, c.token
		}
		code, body, err := l.hubc.do(ctx, "GET", "/readyz", nil)
		if err != nil {
			return false, err
		}
		if code != 200 {
			return false, fmt.Errorf("/readyz: %d %s", code, strings.TrimSpace(string(body)))
		}
		return true, nil
	})
}

// waitFor polls cond until it holds, p's run ends (an error with the end of its log), ctx ends or ReadyTimeout
// passes. Errors of cond are taken as "not yet" and reported if the wait fails.
func (l *Landscape) waitFor(ctx context.Context, p *binproc.Process, what string, cond func(context.Context) (bool, error)) error {
	done, _ := p.Done()
	wctx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(wctx, 10*time.Second)
		ok, err := cond(cctx)
		ccancel()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-done:
			return p.ExitError()
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("%s: waiting until %s: %w", p.Name(), what, ctx.Err())
			}
			msg := fmt.Sprintf("%s: not %s within %s", p.Name(), what, l.cfg.ReadyTimeout)
			if last != nil {
				msg += fmt.Sprintf(" (last: %v)", last)
			}
			return fmt.Errorf("%s; see %s:\n%s", msg, p.LogPath(), p.Tail(2<<10))
		case <-tick.C:
		}
	}
}

// newProcess returns the process of binary bin of BinDir with env added to the landscape's environment, logging to
// <LogDir>/<name>.log.
func (l *Landscape) newProcess(name, bin string, env []string, args ...string) *binproc.Process {
	return l.newProcessReporting(name, bin, env, func(err error) {
		l.report(fmt.Errorf("%s exited unexpectedly (%v); see %s", name, err, filepath.Join(l.LogDir, name+".log")))
	}, args...)
}

// newProcessReporting is newProcess with exited called for a run that ends while nobody stopped it.
func (l *Landscape) newProcessReporting(name, bin string, env []string, exited func(error), args ...string) *binproc.Process {
	return binproc.New(binproc.Config{
		Name:    name,
		Path:    filepath.Join(l.cfg.BinDir, bin),
		Args:    args,
		Env:     env,
		Dir:     l.Dir,
		LogPath: filepath.Join(l.LogDir, name+".log"),
		Exited:  func(_ string, err error) { exited(err) },
	})
}

// report hands a failure to Failures; it is dropped while 16 are unread.
func (l *Landscape) report(err error) {
	select {
	case l.failures <- err:
	default:
	}
}

// hubExit is the failure a hub process' exit reports; gen tells the hub processes of one Start apart.
type hubExit struct {
	gen int
	err error
	log string
}

func (e hubExit) Error() string {
	return fmt.Sprintf("hub exited unexpectedly (%v); see %s", e.err, e.log)
}

// takeBackHubExits removes the reports of hub processes that were replaced (see hubExits) from the failures not yet
// read, keeping the others in their order.
func (l *Landscape) takeBackHubExits() {
	l.hubExits.Lock()
	defer l.hubExits.Unlock()
	var keep []error
	for done := false; !done; {
		select {
		case err := <-l.failures:
			if h := (hubExit{}); !errors.As(err, &h) || h.gen == l.hubExits.current {
				keep = append(keep, err)
			}
		default:
			done = true
		}
	}
	for _, err := range keep {
		l.report(err)
	}
}

func (l *Landscape) logf(format string, args ...any) {
	fmt.Fprintf(l.cfg.Log, "landscape: "+format+"\n", args...)
}

// Failures reports processes that exited while nobody stopped them (a crash, a kill from outside). Reports are
// dropped while 16 are unread.
func (l *Landscape) Failures() <-chan error { return l.failures }

// Seeds returns the landscape's seeds in the order of Config.Seeds.
func (l *Landscape) Seeds() []*Seed { return append([]*Seed(nil), l.seeds...) }

// Seed returns the seed named name, nil if there is none.
func (l *Landscape) Seed(name string) *Seed {
	for _, s := range l.seeds {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (l *Landscape) seed(name string) (*Seed, error) {
	if s := l.Seed(name); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("landscape: no seed %q", name)
}

// Do sends a request to the hub's REST API as the admin; body, when not nil, is JSON. It returns the status code
// and the response body.
func (l *Landscape) Do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return l.hubc.do(ctx, method, path, body)
}

// SeedReady reports whether the Seed's GardenletReady condition on the hub is True.
func (l *Landscape) SeedReady(ctx context.Context, seed string) (bool, error) {
	c, err := l.hubc.seedCondition(ctx, seed, GardenletReady)
	if err != nil || c == nil {
		return false, err
	}
	return c.Status == "True", nil
}

// StartAgent starts the agent of seed (after StopAgent or KillAgent) and waits until it has a session with the hub
// and the Seed is ready. It fails if the agent runs.
func (l *Landscape) StartAgent(ctx context.Context, seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	return l.startAgent(ctx, s, false)
}

// StopAgent stops the agent of seed gracefully (SIGTERM, SIGKILL after Config.StopTimeout).
func (l *Landscape) StopAgent(seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	return s.agent.Stop(l.cfg.StopTimeout)
}

// KillAgent kills the agent of seed with SIGKILL and waits until it has exited.
func (l *Landscape) KillAgent(seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	return s.agent.Kill()
}

// StartProviderLocal starts the provider-local of seed (after StopProviderLocal or KillProviderLocal) in the
// namespace it ran in before, or else in the namespace of the seed's ControllerInstallation of provider-local (waited
// for), and waits until it renews its heartbeat Lease. It returns ErrNoProviderLocal when there is no provider-local
// binary.
func (l *Landscape) StartProviderLocal(ctx context.Context, seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	ns := s.ProviderLocalNamespace
	if ns == "" {
		ci, err := l.ProviderLocalInstallation(ctx, seed)
		if err != nil {
			return err
		}
		ns = extensionNamespacePrefix + ci
	}
	return l.startProviderLocal(ctx, s, ns)
}

// StartProviderLocalIn starts the provider-local of seed in namespace ns and waits until it renews its heartbeat
// Lease there.
func (l *Landscape) StartProviderLocalIn(ctx context.Context, seed, ns string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	return l.startProviderLocal(ctx, s, ns)
}

// StopProviderLocal stops the provider-local of seed gracefully (SIGTERM, SIGKILL after Config.StopTimeout).
func (l *Landscape) StopProviderLocal(seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	if s.provider == nil {
		return ErrNoProviderLocal
	}
	return s.provider.Stop(l.cfg.StopTimeout)
}

// KillProviderLocal kills the provider-local of seed with SIGKILL and waits until it has exited.
func (l *Landscape) KillProviderLocal(seed string) error {
	s, err := l.seed(seed)
	if err != nil {
		return err
	}
	if s.provider == nil {
		return ErrNoProviderLocal
	}
	return s.provider.Kill()
}

// Pids returns the process ids of the running processes by name (hub, seed-<seed>, agent-<seed>,
// provider-local-<seed>).
func (l *Landscape) Pids() map[string]int {
	out := map[string]int{}
	for _, p := range l.processes() {
		if p.Running() {
			out[p.Name()] = p.PID()
		}
	}
	return out
}

// processes returns every process in start order.
func (l *Landscape) processes() []*binproc.Process {
	var ps []*binproc.Process
	if l.hub != nil {
		ps = append(ps, l.hub)
	}
	for _, s := range l.seeds {
		ps = append(ps, s.seed, s.agent)
		if s.provider != nil {
			ps = append(ps, s.provider)
		}
	}
	return ps
}

// Stop stops every process gracefully, in reverse order of their dependencies: the provider-locals, the agents, the
// seeds, the hub (each group in parallel). Each gets SIGTERM and, after Config.StopTimeout, SIGKILL. The data stays
// in Dir for the next Start. Later calls return the first call's result.
func (l *Landscape) Stop() error {
	l.stopOnce.Do(func() {
		var provs, agents, seeds []*binproc.Process
		for _, s := range l.seeds {
			if s.provider != nil {
				provs = append(provs, s.provider)
			}
			agents, seeds = append(agents, s.agent), append(seeds, s.seed)
		}
		var errs []error
		for _, group := range [][]*binproc.Process{provs, agents, seeds, {l.hub}} {
			gerrs := make([]error, len(group))
			var wg sync.WaitGroup
			for i, p := range group {
				if p == nil {
					continue
				}
				wg.Go(func() { gerrs[i] = p.Stop(l.cfg.StopTimeout) })
			}
			wg.Wait()
			errs = append(errs, gerrs...)
		}
		for _, s := range l.seeds {
			if s.hubForwarder != nil {
				s.hubForwarder.Close()
			}
		}
		if l.lock != nil {
			_ = l.lock.Close()
		}
		l.stopErr = errors.Join(errs...)
		if l.stopErr == nil {
			l.logf("stopped")
		}
	})
	return l.stopErr
}
