package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Controllers configures the agent's seed-side controllers (gardenlet: controllers).
type Controllers struct {
	// Disabled turns every seed-side controller off, leaving only the agent link (and the CRDs unmanaged). For
	// agents that only relay, and for tests of the link alone.
	Disabled bool `json:"disabled,omitzero"`
	// Shoot configures the shoot controller.
	Shoot ShootControllerConfiguration `json:"shoot,omitzero"`
	// ShootCare configures how often the shoots' conditions are refreshed (gardenlet: controllers.shootCare).
	ShootCare ShootCareControllerConfiguration `json:"shootCare,omitzero"`
	// SeedCare configures the seed care controller.
	SeedCare SeedCareControllerConfiguration `json:"seedCare,omitzero"`
}

// ShootCareControllerConfiguration configures the shoot care (gardenlet: controllers.shootCare).
type ShootCareControllerConfiguration struct {
	// SyncPeriod is how often the conditions of up-to-date shoots are recomputed (default 1m).
	SyncPeriod *metav1.Duration `json:"syncPeriod,omitzero"`
}

// ShootControllerConfiguration configures the shoot controller (gardenlet: controllers.shoot).
type ShootControllerConfiguration struct {
	// ConcurrentSyncs is how many shoots are reconciled at once (default 20, as in Gardener's example configuration).
	ConcurrentSyncs *int32 `json:"concurrentSyncs,omitzero"`
	// SyncPeriod is how often an up-to-date shoot is reconciled anyway (default 1h).
	SyncPeriod *metav1.Duration `json:"syncPeriod,omitzero"`
	// RetryMinDelay and RetryMaxDelay bound the backoff between retries of a shoot whose last operation ended in
	// Error (defaults 5s and 5m).
	RetryMinDelay *metav1.Duration `json:"retryMinDelay,omitzero"`
	RetryMaxDelay *metav1.Duration `json:"retryMaxDelay,omitzero"`
	// ExtensionErrorThreshold is how long an extension may report an error for a request before the flow fails with
	// it (Gardener's severe threshold; default 30s).
	ExtensionErrorThreshold *metav1.Duration `json:"extensionErrorThreshold,omitzero"`
	// TaskTimeout bounds each step of a shoot flow, waits included (default 10m).
	TaskTimeout *metav1.Duration `json:"taskTimeout,omitzero"`
	// ControlPlane configures the shoots' control planes (etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler) that the agent runs in the seed (docs/shoots.md).
	ControlPlane ShootControlPlaneConfiguration `json:"controlPlane,omitzero"`
}

// Modes of ShootControlPlaneConfiguration.
const (
	// ControlPlaneAuto deploys the shoots' control planes when the seed has Nodes to run them, else a stand-in.
	ControlPlaneAuto = "Auto"
	// ControlPlaneDeploy always deploys them.
	ControlPlaneDeploy = "Deploy"
	// ControlPlaneStandIn deploys only the kube-apiserver Service, with nothing behind it (seeds that run no pods).
	ControlPlaneStandIn = "StandIn"
)

// ShootControlPlaneConfiguration configures the shoots' control planes.
type ShootControlPlaneConfiguration struct {
	// Mode is Auto (default), Deploy or StandIn.
	Mode string `json:"mode,omitzero"`
	// ImageVector is a file of images (the form of agent/shoot/imagevector's images.yaml) whose entries win over the
	// embedded upstream defaults; empty: the defaults alone.
	ImageVector string `json:"imageVector,omitzero"`
	// ETCDSnapshotInterval is the time between the scheduled full snapshots of each shoot's etcd into its
	// BackupEntry, on seeds with spec.backup (default 1h; migrations take one more on demand).
	ETCDSnapshotInterval *metav1.Duration `json:"etcdSnapshotInterval,omitzero"`
}

// SeedCareControllerConfiguration configures the seed care controller (gardenlet: controllers.seedCare).
type SeedCareControllerConfiguration struct {
	// SyncPeriod is how often the seed's conditions are checked (default 30s).
	SyncPeriod *metav1.Duration `json:"syncPeriod,omitzero"`
}

// Defaults of the controllers.
const (
	DefaultShootConcurrentSyncs         = 20
	DefaultShootSyncPeriod              = time.Hour
	DefaultShootRetryMinDelay           = 5 * time.Second
	DefaultShootRetryMaxDelay           = 5 * time.Minute
	DefaultShootExtensionErrorThreshold = 30 * time.Second
	DefaultShootTaskTimeout             = 10 * time.Minute
	// DefaultETCDSnapshotInterval is controllers.shoot.controlPlane.etcdSnapshotInterval's default.
	DefaultETCDSnapshotInterval = time.Hour
	DefaultSeedCareSyncPeriod   = 30 * time.Second
	DefaultShootCareSyncPeriod  = time.Minute
)

func (c *Controllers) defaults() {
	s := &c.Shoot
	if s.ConcurrentSyncs == nil {
		s.ConcurrentSyncs = ptr[int32](DefaultShootConcurrentSyncs)
	}
	setDuration(&s.SyncPeriod, DefaultShootSyncPeriod)
	setDuration(&s.RetryMinDelay, DefaultShootRetryMinDelay)
	setDuration(&s.RetryMaxDelay, DefaultShootRetryMaxDelay)
	setDuration(&s.ExtensionErrorThreshold, DefaultShootExtensionErrorThreshold)
	setDuration(&s.TaskTimeout, DefaultShootTaskTimeout)
	if s.ControlPlane.Mode == "" {
		s.ControlPlane.Mode = ControlPlaneAuto
	}
	setDuration(&s.ControlPlane.ETCDSnapshotInterval, DefaultETCDSnapshotInterval)
	setDuration(&c.SeedCare.SyncPeriod, DefaultSeedCareSyncPeriod)
	setDuration(&c.ShootCare.SyncPeriod, DefaultShootCareSyncPeriod)
}

func setDuration(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

func (c *Controllers) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	s, sp := &c.Shoot, p.Child("shoot")
	if n := s.ConcurrentSyncs; n != nil && (*n < 1 || *n > 100) {
		errs = append(errs, field.Invalid(sp.Child("concurrentSyncs"), *n, "must be between 1 and 100"))
	}
	for name, d := range map[string]*metav1.Duration{"syncPeriod": s.SyncPeriod, "retryMinDelay": s.RetryMinDelay,
		"retryMaxDelay": s.RetryMaxDelay, "extensionErrorThreshold": s.ExtensionErrorThreshold, "taskTimeout": s.TaskTimeout} {
		if d != nil && d.Duration <= 0 {
			errs = append(errs, field.Invalid(sp.Child(name), d.Duration.String(), "must be positive"))
		}
	}
	if duration(s.RetryMaxDelay) < duration(s.RetryMinDelay) {
		errs = append(errs, field.Invalid(sp.Child("retryMaxDelay"), duration(s.RetryMaxDelay).String(), "must not be less than retryMinDelay"))
	}
	if m := s.ControlPlane.Mode; m != "" && m != ControlPlaneAuto && m != ControlPlaneDeploy && m != ControlPlaneStandIn {
		errs = append(errs, field.NotSupported(sp.Child("controlPlane", "mode"), m, []string{ControlPlaneAuto, ControlPlaneDeploy, ControlPlaneStandIn}))
	}
	if d := s.ControlPlane.ETCDSnapshotInterval; d != nil && d.Duration < time.Minute {
		errs = append(errs, field.Invalid(sp.Child("controlPlane", "etcdSnapshotInterval"), d.Duration.String(), "must be at least 1m"))
	}
	if d := c.ShootCare.SyncPeriod; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("shootCare", "syncPeriod"), d.Duration.String(), "must be positive"))
	}
	if d := c.SeedCare.SyncPeriod; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("seedCare", "syncPeriod"), d.Duration.String(), "must be positive"))
	}
	return errs
}
