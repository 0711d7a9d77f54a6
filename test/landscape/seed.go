package landscape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/identity"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"

	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// What the seeds are configured with.
const (
	// ProviderType is the provider, backup and DNS type of every seed and of the examples.
	ProviderType = "local"
	// InternalDomain is the seeds' internal DNS domain (spec.dns.internal), under which shoots get their internal
	// API server names.
	InternalDomain = "internal.local.trellis.dev"
	// BackupSecretName is the Secret in the hub's namespace garden that the seeds' spec.backup references; Start
	// creates it.
	BackupSecretName = "backup-local"
	// DNSSecretName is the Secret in the hub's namespace garden that the seeds' spec.dns references; Start creates it.
	DNSSecretName = "dns-local"
	// GardenletReady is the Seed condition the hub keeps from the agent's heartbeats.
	GardenletReady = "GardenletReady"

	// bootstrapTokenValidity is how long a bootstrap token made for a first start may be used.
	bootstrapTokenValidity = time.Hour
)

// Seed is one seed of a landscape: a localseed process (etcd, kube-apiserver, kube-controller-manager), its agent and
// its provider-local.
type Seed struct {
	// Name is the Seed's name on the hub.
	Name string
	// Region is the seed's provider region.
	Region string
	// Dir holds the seed's data (localseed --dir).
	Dir string
	// Kubeconfig is the path of the seed's admin kubeconfig.
	Kubeconfig string
	// Config reaches the seed as its admin.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// AgentConfig is the path of the agent's configuration file.
	AgentConfig string
	// SeedLog, AgentLog and ProviderLocalLog are the logs of the seed's processes.
	SeedLog, AgentLog, ProviderLocalLog string
	// Networks are the seed's networks: its node's (Config.Node), else Gardener's local setup's, which no process
	// here uses.
	Networks SeedNetworks
	// ProviderLocalNamespace is the namespace provider-local last ran in (extension-<its ControllerInstallation>),
	// "" before it ran.
	ProviderLocalNamespace string
	// AgentPod reports whether the agent runs as the pod of its chart (Deployment AgentRelease in AgentNamespace)
	// rather than as a process of the landscape (AgentLog).
	AgentPod bool
	// AuditLog is the seed's kube-apiserver audit log with Config.SeedAuditLog (seedtest.ReadAuditLog reads it),
	// "" otherwise.
	AuditLog string

	seed, agent, provider *binproc.Process
	providerArgs          []string // provider-local's flags besides --namespace
	tokenFile             string
	hubForwarder          *localnode.Forwarder // the hub's agent port at the node's HostIP, with agent pods
}

// SeedNetworks are a seed's networks (Seed spec.networks).
type SeedNetworks struct {
	Nodes    string `json:"nodes"`
	Pods     string `json:"pods"`
	Services string `json:"services"`
}

// gardenerLocalNetworks are the networks of Gardener's local seed (a kind cluster), for seeds without a node.
var gardenerLocalNetworks = SeedNetworks{Nodes: "172.18.0.0/16", Pods: "10.1.0.0/16", Services: "10.2.0.0/16"}

// Gardener's local seed's defaults for shoots that leave their networks unset; disjoint from every seed's networks.
const (
	ShootDefaultPods     = "10.3.0.0/16"
	ShootDefaultServices = "10.4.0.0/16"
)

// seedTemplate is the Seed every agent registers, in Gardener's terms (its local setup's seed): provider, backup and
// DNS of type local, with the backup and DNS credentials in the hub's namespace garden, zone "0", the networks of
// the seed's node with Gardener's local shoot defaults.
func seedTemplate(name, region string, nets SeedNetworks) *corev1beta1.Seed {
	str := func(s string) *string { return &s }
	secret := func(name string) *metav1.ObjectReference {
		return &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Namespace: "garden", Name: name}
	}
	visible := true
	return &corev1beta1.Seed{
		ApiVersion: "core.gardener.cloud/v1beta1",
		Kind:       "Seed",
		Metadata:   &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: ProviderType, Region: region, Zones: []string{"0"}},
			Backup:   &corev1beta1.Backup{Provider: ProviderType, Region: str(region), CredentialsRef: secret(BackupSecretName)},
			Dns: &corev1beta1.SeedDNS{
				Provider: &corev1beta1.SeedDNSProvider{Type: ProviderType, CredentialsRef: secret(DNSSecretName)},
				Internal: &corev1beta1.SeedDNSProviderConfig{Type: ProviderType, Domain: InternalDomain, CredentialsRef: secret(DNSSecretName)},
			},
			Ingress: &corev1beta1.Ingress{
				Domain:     "ingress." + name + ".seed.local.trellis.dev",
				Controller: &corev1beta1.IngressController{Kind: "nginx"},
			},
			// The shoots' networks (see examples/) must not overlap these.
			Networks: &corev1beta1.SeedNetworks{Nodes: str(nets.Nodes), Pods: nets.Pods, Services: nets.Services,
				ShootDefaults: &corev1beta1.ShootNetworks{Pods: str(ShootDefaultPods), Services: str(ShootDefaultServices)}},
			Settings: &corev1beta1.SeedSettings{Scheduling: &corev1beta1.SeedSettingScheduling{Visible: &visible}},
		},
	}
}

// agentConfiguration is the configuration of the agent of s, before Config.AgentMutate.
func (l *Landscape) agentConfiguration(s *Seed) *config.AgentConfiguration {
	d := func(v time.Duration) *kmetav1.Duration { return &kmetav1.Duration{Duration: v} }
	return &config.AgentConfiguration{
		APIVersion: config.APIVersion,
		Kind:       config.Kind,
		HubClientConnection: config.HubClientConnection{
			Address:            l.GRPCAddr,
			CAFile:             l.CAFile,
			BootstrapTokenFile: s.tokenFile,
		},
		SeedClientConnection:     config.SeedClientConnection{Kubeconfig: s.Kubeconfig},
		SeedConfig:               config.SeedTemplate{Seed: seedTemplate(s.Name, s.Region, s.Networks)},
		HeartbeatIntervalSeconds: 2,
		// The landscape's agents share the machine: their endpoints listen on free ports.
		Server: config.Server{HealthProbes: "127.0.0.1:0", Metrics: "127.0.0.1:0"},
		Controllers: config.Controllers{Shoot: config.ShootControllerConfiguration{
			RetryMinDelay:           d(time.Second),
			RetryMaxDelay:           d(10 * time.Second),
			ExtensionErrorThreshold: d(l.cfg.ExtensionErrorThreshold),
			ControlPlane:            config.ShootControlPlaneConfiguration{ImageVector: l.imageVector},
		}},
		LogFormat: "text",
	}
}

// writeAgentConfig writes the agent's configuration file, after checking that the agent will accept it.
func (l *Landscape) writeAgentConfig(s *Seed) (*config.AgentConfiguration, error) {
	c := l.agentConfiguration(s)
	if l.cfg.AgentMutate != nil {
		l.cfg.AgentMutate(s.Name, c)
	}
	js, err := jsonv2.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("agent configuration of seed %s: %w", s.Name, err)
	}
	checked, err := config.Decode(js)
	if err == nil {
		checked.Default()
		err = checked.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("agent configuration of seed %s: %w", s.Name, err)
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return nil, err
	}
	head := "# Written by the local landscape (test/landscape) at each start; edits are overwritten.\n"
	if err := os.WriteFile(s.AgentConfig, append([]byte(head), y...), 0o600); err != nil {
		return nil, err
	}
	return checked, nil
}

// startSeedProcess starts localseed; its old kubeconfig goes first, so that waitSeed sees the new one.
func (l *Landscape) startSeedProcess(s *Seed) error {
	if err := os.Remove(s.Kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return s.seed.Start()
}

// waitSeed waits until localseed reports the seed ready, then connects to it.
func (l *Landscape) waitSeed(ctx context.Context, s *Seed) error {
	err := l.waitFor(ctx, s.seed, "ready", func(context.Context) (bool, error) {
		out, err := s.seed.LogSinceStart()
		if err != nil || !strings.Contains(out, "ready in") {
			return false, err
		}
		_, err = os.Stat(s.Kubeconfig)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	kc, err := os.ReadFile(s.Kubeconfig)
	if err != nil {
		return err
	}
	if s.Config, err = clientcmd.RESTConfigFromKubeConfig(kc); err != nil {
		return fmt.Errorf("seed %s: kubeconfig: %w", s.Name, err)
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return fmt.Errorf("seed %s: %w", s.Name, err)
	}
	s.Networks = gardenerLocalNetworks
	if l.cfg.Node {
		b, err := os.ReadFile(filepath.Join(s.Dir, "node.json"))
		if err != nil {
			return fmt.Errorf("seed %s: the node's networks: %w", s.Name, err)
		}
		if err := json.Unmarshal(b, &s.Networks); err != nil {
			return fmt.Errorf("seed %s: node.json: %w", s.Name, err)
		}
	}
	return nil
}

// prepareAgent writes the agent's configuration and, unless the seed holds valid credentials of the agent, a fresh
// bootstrap token. Credentials that a hub with new data cannot know (freshHub) are deleted first, so that the agent
// bootstraps again instead of failing against a CA that no longer exists.
func (l *Landscape) prepareAgent(ctx context.Context, s *Seed, freshHub bool) error {
	c, err := l.writeAgentConfig(s)
	if err != nil {
		return err
	}
	ref := c.HubClientConnection.KubeconfigSecret
	secrets := s.Client.CoreV1().Secrets(ref.Namespace)
	secret, err := secrets.Get(ctx, ref.Name, kmetav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("seed %s: read the agent's credentials %s: %w", s.Name, ref, err)
	}
	stored := err == nil
	if stored && freshHub {
		l.logf("seed %s: deleting the agent's credentials %s: they are from a hub whose data is gone", s.Name, ref)
		if err := secrets.Delete(ctx, ref.Name, kmetav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("seed %s: delete %s: %w", s.Name, ref, err)
		}
		stored = false
	}
	// Expired or unreadable credentials make the agent bootstrap again (or ignore them): it needs a token then too.
	if stored {
		creds, err := identity.ParseKubeconfig(secret.Data[identity.KubeconfigKey])
		stored = err == nil && time.Until(creds.NotAfter()) > time.Minute
	}
	if stored || c.HubClientConnection.BootstrapToken != "" || c.HubClientConnection.BootstrapTokenFile != s.tokenFile {
		return nil
	}
	tok, err := l.hubc.createBootstrapToken(ctx, s.Name, bootstrapTokenValidity)
	if err != nil {
		return err
	}
	return os.WriteFile(s.tokenFile, []byte(tok+"\n"), 0o600)
}

// agentReady reports whether the agent's current run has a session with the hub and the hub considers the Seed
// ready. The condition alone is not enough: the hub keeps it True from an earlier run until the monitor period ends.
func (l *Landscape) agentReady(ctx context.Context, s *Seed) (bool, error) {
	out, err := s.agent.LogSinceStart()
	if err != nil || !strings.Contains(out, "session established") {
		return false, err
	}
	c, err := l.hubc.seedCondition(ctx, s.Name, GardenletReady)
	if err != nil || c == nil {
		return false, err
	}
	return c.Status == "True", nil
}

// startAgent starts the agent and waits until it is ready.
func (l *Landscape) startAgent(ctx context.Context, s *Seed, freshHub bool) error {
	if s.agent.Running() {
		return fmt.Errorf("%s: already running (pid %d)", s.agent.Name(), s.agent.PID())
	}
	if err := l.prepareAgent(ctx, s, freshHub); err != nil {
		return err
	}
	if err := s.agent.Start(); err != nil {
		return err
	}
	return l.waitFor(ctx, s.agent, "ready (session established, Seed "+GardenletReady+")", func(ctx context.Context) (bool, error) {
		return l.agentReady(ctx, s)
	})
}

// startProviderLocal starts provider-local in namespace ns of the seed once the agent has installed the extension
// CRDs, and waits for its first heartbeat there.
func (l *Landscape) startProviderLocal(ctx context.Context, s *Seed, ns string) error {
	if s.provider == nil {
		return ErrNoProviderLocal
	}
	if s.provider.Running() {
		return fmt.Errorf("%s: already running (pid %d)", s.provider.Name(), s.provider.PID())
	}
	// The agent creates the namespace when it installs the chart; a namespace made here first gets its labels then.
	nsObj := &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: ns}}
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, nsObj, kmetav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("seed %s: namespace %s: %w", s.Name, ns, err)
	}
	// The agent installs the CRDs when it starts; provider-local's controllers need them served.
	if err := l.waitFor(ctx, s.agent, "installing the extension CRDs", func(context.Context) (bool, error) {
		rl, err := s.Client.Discovery().ServerResourcesForGroupVersion(extensionsv1alpha1.SchemeGroupVersion.String())
		return err == nil && len(rl.APIResources) > 0, nil
	}); err != nil {
		return err
	}
	leases := s.Client.CoordinationV1().Leases(ns)
	renewTime := func(ctx context.Context) (*kmetav1.MicroTime, error) {
		lease, err := leases.Get(ctx, extensionsv1alpha1.HeartbeatLeaseName, kmetav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return lease.Spec.RenewTime, nil
	}
	// A renewal of this run is one after the last run's (renewTime has microseconds) and not long before the start.
	before, err := renewTime(ctx)
	if err != nil {
		return fmt.Errorf("seed %s: heartbeat Lease: %w", s.Name, err)
	}
	s.provider.SetArgs(append([]string{"--namespace", ns}, s.providerArgs...)...)
	s.ProviderLocalNamespace = ns
	if err := s.provider.Start(); err != nil {
		return err
	}
	_, started := s.provider.Done()
	return l.waitFor(ctx, s.provider, "renewing its heartbeat Lease", func(ctx context.Context) (bool, error) {
		rt, err := renewTime(ctx)
		if err != nil || rt == nil {
			return false, err
		}
		return (before == nil || rt.After(before.Time)) && !rt.Time.Before(started.Add(-time.Second)), nil
	})
}

// ErrNoProviderLocal is returned by the provider-local methods of a landscape whose BinDir has no provider-local.
var ErrNoProviderLocal = errors.New("provider-local is not built (no provider-local in the landscape's BinDir)")

// seedSecrets are the hub's Secrets the seeds' spec references.
func seedSecrets() [][]byte {
	var out [][]byte
	for _, name := range []string{BackupSecretName, DNSSecretName} {
		b, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": name, "namespace": "garden"},
		})
		out = append(out, b)
	}
	return out
}

// newSeed returns the seed of sc with its processes, not started.
func (l *Landscape) newSeed(sc SeedConfig, hasProviderLocal bool) *Seed {
	dir := filepath.Join(l.Dir, "seeds", sc.Name)
	agentDir := filepath.Join(l.Dir, "agents", sc.Name)
	s := &Seed{
		Name:        sc.Name,
		Region:      sc.Region,
		Dir:         dir,
		Kubeconfig:  filepath.Join(dir, "kubeconfig"),
		AgentConfig: filepath.Join(agentDir, "config.yaml"),
		tokenFile:   filepath.Join(agentDir, "bootstrap-token"),
	}
	seedArgs := []string{"--dir", dir}
	if l.cfg.Node {
		seedArgs = append(seedArgs, "--node", "--node-images", strings.Join(l.cfg.NodeImages, ","),
			"--machine-provider-port", strconv.Itoa(MachineProviderPort))
		if len(l.machineImages) > 0 {
			// The agent a ManagedSeed deploys into a shoot, its provider-local and its shoots' control planes run on
			// the shoot's machines.
			seedArgs = append(seedArgs, "--machine-images", strings.Join(l.machineImages, ","))
		}
	}
	if l.cfg.SeedAuditLog {
		seedArgs = append(seedArgs, "--audit-log")
		s.AuditLog = filepath.Join(dir, seedtest.AuditLogName)
	}
	s.seed = l.newProcess("seed-"+sc.Name, "localseed", []string{"KUBEBUILDER_ASSETS=" + l.cfg.TestBinDir}, seedArgs...)
	s.agent = l.newProcess("agent-"+sc.Name, "trellis-agent", nil, "--config", s.AgentConfig)
	s.SeedLog, s.AgentLog = s.seed.LogPath(), s.agent.LogPath()
	if hasProviderLocal {
		s.providerArgs = append([]string{
			"--kubeconfig", s.Kubeconfig,
			"--backup-dir", filepath.Join(l.Dir, "backups"),
			"--metrics-bind-address", "0",
			"--health-probe-bind-address", "0",
		}, l.cfg.ProviderLocalArgs...)
		// The namespace, the installation's, is known when it starts (startProviderLocal).
		s.provider = l.newProcess("provider-local-"+sc.Name, "provider-local", nil)
		s.ProviderLocalLog = s.provider.LogPath()
	}
	return s
}
