package local

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/extsdk/healthcheck"
	"github.com/trellis-dev/trellis/extsdk/heartbeat"
)

// Type is the extension type provider-local serves for every kind.
const Type = "local"

// ExtensionName is provider-local's name: the heartbeat's holderIdentity.
const ExtensionName = "provider-local"

// Kinds returns the kinds provider-local serves, as Gardener spells them (the keys of Config.ExtraTypes).
func Kinds() []string {
	return []string{"BackupBucket", "BackupEntry", "Bastion", "ContainerRuntime", "ControlPlane", "DNSRecord",
		"Extension", "Infrastructure", "Network", "OperatingSystemConfig", "Worker"}
}

// Config configures provider-local.
type Config struct {
	// BackupDir is the root directory of the backup buckets. Required; made absolute.
	BackupDir string
	// Namespace is the extension's namespace, where the heartbeat Lease is renewed; empty: no heartbeat.
	Namespace string
	// DNSNamespace is where the CoreDNS entries of DNSRecords go; defaults to DefaultDNSNamespace.
	DNSNamespace string
	// HealthCheckInterval defaults to healthcheck.DefaultSyncPeriod.
	HealthCheckInterval time.Duration
	// HeartbeatInterval defaults to heartbeat.DefaultRenewInterval.
	HeartbeatInterval time.Duration
	// MaxConcurrentReconciles per kind and type; defaults to controller.DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// ExtraTypes are spec.type values served besides Type, per kind: an OperatingSystemConfig's type is its machine
	// image's name, a Network's the shoot's networking type, e.g. {"OperatingSystemConfig": {"gardenlinux"}}.
	ExtraTypes map[string][]string
	// MachineProvider, when set, makes the Worker's machines real (worker.go): a client of the local machine
	// provider's API. Nil: Services stand in for machines.
	MachineProvider *MachineProvider
}

// Validate checks cfg and applies the defaults.
func (c *Config) Validate() error {
	if c.BackupDir == "" {
		return errors.New("provider-local: BackupDir is required")
	}
	dir, err := filepath.Abs(c.BackupDir)
	if err != nil {
		return fmt.Errorf("provider-local: BackupDir: %w", err)
	}
	c.BackupDir = dir
	if c.DNSNamespace == "" {
		c.DNSNamespace = DefaultDNSNamespace
	}
	if c.HealthCheckInterval <= 0 {
		c.HealthCheckInterval = healthcheck.DefaultSyncPeriod
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = heartbeat.DefaultRenewInterval
	}
	if c.MaxConcurrentReconciles <= 0 {
		c.MaxConcurrentReconciles = controller.DefaultMaxConcurrentReconciles
	}
	if p := c.MachineProvider; p != nil {
		if u, err := url.Parse(p.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("provider-local: MachineProvider.URL %q: want http(s)://host:port", p.URL)
		}
		if p.Token == "" {
			return errors.New("provider-local: MachineProvider.Token: empty")
		}
	}
	for kind := range c.ExtraTypes {
		if !slices.Contains(Kinds(), kind) {
			return fmt.Errorf("provider-local: extra types for unknown kind %q (known: %s)", kind, strings.Join(Kinds(), ", "))
		}
	}
	return nil
}

// types returns Type and the extra types of kind, each once.
func (c *Config) types(kind string) []string {
	out := []string{Type}
	for _, t := range c.ExtraTypes[kind] {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Add registers provider-local with mgr: a controller per kind and type, the health checks of ControlPlane, Worker
// and Network, and, with cfg.Namespace, the heartbeat. mgr's scheme must hold client-go's kinds and the extension
// kinds.
func Add(mgr manager.Manager, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s := seed{c: mgr.GetClient(), r: mgr.GetAPIReader()}
	errs := []error{
		register(mgr, cfg, "Infrastructure", &infrastructure{s}, nil, nil, nil),
		register(mgr, cfg, "ControlPlane", &controlPlane{s}, nil, nil, controlPlaneChecks()),
		register(mgr, cfg, "Worker", &worker{seed: s, machines: cfg.MachineProvider}, nil, nil, workerChecks()),
		register(mgr, cfg, "OperatingSystemConfig", &operatingSystemConfig{s}, nil, nil, nil),
		register(mgr, cfg, "DNSRecord", &dnsRecord{seed: s, namespace: cfg.DNSNamespace}, nil, nil, nil),
		register(mgr, cfg, "Network", newNetwork(s), nil, nil, networkChecks()),
		register(mgr, cfg, "ContainerRuntime", newContainerRuntime(s), nil, nil, nil),
		register(mgr, cfg, "Extension", newExtension(s), nil, nil, nil),
		registerBackup(mgr, cfg, s),
		register(mgr, cfg, "Bastion", &bastion{s}, nil, nil, nil),
	}
	if cfg.Namespace != "" {
		errs = append(errs, heartbeat.Add(mgr, heartbeat.Config{Namespace: cfg.Namespace, ExtensionName: ExtensionName,
			RenewInterval: cfg.HeartbeatInterval}))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("provider-local: %w", err)
	}
	return nil
}

// AddBackup registers only provider-local's BackupBucket and BackupEntry controllers with mgr: for a seed whose
// other extension kinds are served by someone else (tests that run shoot control planes with stand-in
// infrastructure, and keep etcd's snapshots in local buckets).
func AddBackup(mgr manager.Manager, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := registerBackup(mgr, cfg, seed{c: mgr.GetClient(), r: mgr.GetAPIReader()}); err != nil {
		return fmt.Errorf("provider-local: %w", err)
	}
	return nil
}

// registerBackup adds the BackupBucket and BackupEntry controllers, on the buckets under cfg.BackupDir.
func registerBackup(mgr manager.Manager, cfg Config, s seed) error {
	entries := &backupEntry{seed: s, root: cfg.BackupDir}
	buckets := &backupBucket{seed: s, root: cfg.BackupDir}
	return errors.Join(register(mgr, cfg, "BackupBucket", buckets, buckets, nil, nil),
		register(mgr, cfg, "BackupEntry", entries, entries, entries.cluster, nil))
}

// register adds the controller, and the health checks if any, of one kind for each of its types. The actuator is
// wrapped with failure injection (guarded); cluster finds the Cluster of objects the reconciler has none for.
func register[T extensionsv1alpha1.Object](mgr manager.Manager, cfg Config, kind string, act controller.Actuator[T],
	validator controller.ConfigValidator[T], cluster func(context.Context, T) *extsdk.Cluster, checks []healthcheck.ConditionCheck) error {
	for _, typ := range cfg.types(kind) {
		if err := controller.Add(mgr, controller.AddArgs[T]{
			Actuator:                &guarded[T]{inner: act, kind: strings.ToLower(kind), cluster: cluster},
			Type:                    typ,
			NewObject:               newObjectOf[T](),
			ConfigValidator:         validator,
			MaxConcurrentReconciles: cfg.MaxConcurrentReconciles,
		}); err != nil {
			return fmt.Errorf("%s %s: %w", kind, typ, err)
		}
		if len(checks) == 0 {
			continue
		}
		if err := healthcheck.Add(mgr, healthcheck.Args[T]{Type: typ, NewObject: newObjectOf[T](), Checks: checks,
			SyncPeriod: cfg.HealthCheckInterval}); err != nil {
			return fmt.Errorf("%s %s health checks: %w", kind, typ, err)
		}
	}
	return nil
}

// newObjectOf returns a function making an empty object of T, a pointer to a kind's struct.
func newObjectOf[T extensionsv1alpha1.Object]() func() T {
	t := reflect.TypeFor[T]().Elem()
	return func() T { return reflect.New(t).Interface().(T) }
}
