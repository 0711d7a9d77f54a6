package hub

import (
	"context"
	"log/slog"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/controller/bastion"
	"github.com/trellis-dev/trellis/hub/controller/controllerregistration"
	"github.com/trellis-dev/trellis/hub/controller/event"
	"github.com/trellis-dev/trellis/hub/controller/protection"
	"github.com/trellis-dev/trellis/hub/controller/seed"
)

// runner is a leader-only control loop.
type runner interface {
	Run(ctx context.Context) error
}

// controllerManager builds the controller-manager's loops (Gardener's gardener-controller-manager) from the
// component configuration; the leader runs them.
func controllerManager(reg *api.Registry, cfg componentconfig.ControllerManagerConfiguration, log *slog.Logger) ([]runner, error) {
	ctrl := cfg.Controllers
	log = log.With("component", "controller-manager")
	registrations, err := controllerregistration.New(controllerregistration.Config{Source: reg,
		Workers: *ctrl.ControllerRegistration.ConcurrentSyncs, Log: log})
	if err != nil {
		return nil, err
	}
	protections, err := protection.New(protection.Config{Source: reg, Log: log, Workers: protection.Workers{
		CloudProfile: *ctrl.CloudProfile.ConcurrentSyncs, NamespacedCloudProfile: *ctrl.NamespacedCloudProfile.ConcurrentSyncs,
		ExposureClass: *ctrl.ExposureClass.ConcurrentSyncs, Quota: *ctrl.Quota.ConcurrentSyncs,
		SecretBinding: *ctrl.SecretBinding.ConcurrentSyncs, CredentialsBinding: *ctrl.CredentialsBinding.ConcurrentSyncs,
		ShootReference: *ctrl.ShootReference.ConcurrentSyncs,
	}})
	if err != nil {
		return nil, err
	}
	bastions, err := bastion.New(bastion.Config{Source: reg, Workers: *ctrl.Bastion.ConcurrentSyncs,
		MaxLifetime: ctrl.Bastion.MaxLifetime.Duration, Log: log})
	if err != nil {
		return nil, err
	}
	seeds, err := seed.New(seed.Config{Source: reg, Workers: *ctrl.Seed.ConcurrentSyncs, Log: log,
		BackupBuckets: seedCheck(ctrl.SeedBackupBucketsCheck, seed.ConditionBackupBucketsReady),
		Extensions:    seedCheck(ctrl.SeedExtensionsCheck, seed.ConditionExtensionsReady)})
	if err != nil {
		return nil, err
	}
	loops := []runner{registrations, protections, bastions, seeds}
	if e := ctrl.Event; e != nil { // Gardener runs the event controller only when configured
		events, err := event.New(event.Config{Source: reg, Workers: *e.ConcurrentSyncs, TTL: e.TTLNonShootEvents.Duration, Log: log})
		if err != nil {
			return nil, err
		}
		loops = append(loops, events)
	}
	return loops, nil
}

// seedCheck is the configuration of a seed check controller keeping condition typ.
func seedCheck(c *componentconfig.SeedCheckController, typ string) seed.Check {
	check := seed.Check{Workers: *c.ConcurrentSyncs, SyncPeriod: c.SyncPeriod.Duration}
	for _, t := range c.ConditionThresholds {
		if t.Type == typ {
			check.Threshold = t.Duration.Duration
		}
	}
	return check
}
