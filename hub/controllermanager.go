package hub

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/accesstoken"
	"github.com/trellis-dev/trellis/hub/controller/bastion"
	"github.com/trellis-dev/trellis/hub/controller/controllerregistration"
	"github.com/trellis-dev/trellis/hub/controller/event"
	"github.com/trellis-dev/trellis/hub/controller/garbagecollector"
	"github.com/trellis-dev/trellis/hub/controller/managedseedset"
	"github.com/trellis-dev/trellis/hub/controller/project"
	"github.com/trellis-dev/trellis/hub/controller/protection"
	"github.com/trellis-dev/trellis/hub/controller/seed"
	"github.com/trellis-dev/trellis/hub/controller/shoot"
)

// controllerManager builds the controller-manager's loops (Gardener's gardener-controller-manager) from the
// component configuration, keeping those enabled selects (see Config.Controllers); the leader runs them. Loops that
// create or change objects as the API would run the API's admission plugins.
//
// shootExternal is the URL of a shoot's kube-apiserver through the hub's tunnel listener (nil without one): the
// shoot-addresses controller advertises it in the shoots' status.
func controllerManager(reg *api.Registry, plugins admission.Plugins, cfg componentconfig.ControllerManagerConfiguration, enabled []string, shootExternal func(project, shoot string) string, log *slog.Logger) (controller.Group, error) {
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
	pc := ctrl.Project
	projects, err := project.New(project.Config{Source: reg, Workers: *pc.ConcurrentSyncs, MinimumLifetimeDays: *pc.MinimumLifetimeDays,
		StaleGracePeriodDays: *pc.StaleGracePeriodDays, StaleExpirationTimeDays: *pc.StaleExpirationTimeDays,
		StaleSyncPeriod: pc.StaleSyncPeriod.Duration, Log: log})
	if err != nil {
		return nil, err
	}
	shoots, err := shoot.New(shoot.Config{Source: reg, Log: log,
		Hibernation: shoot.HibernationConfig{Workers: *ctrl.ShootHibernation.ConcurrentSyncs, TriggerDeadline: ctrl.ShootHibernation.TriggerDeadlineDuration.Duration},
		Maintenance: shoot.MaintenanceConfig{Workers: *ctrl.ShootMaintenance.ConcurrentSyncs, Admission: plugins,
			RestartControlPlane: ptr.Deref(ctrl.ShootMaintenance.EnableShootControlPlaneRestarter, false),
			RestartCoreAddons:   ptr.Deref(ctrl.ShootMaintenance.EnableShootCoreAddonRestarter, false)},
		Quota: shoot.QuotaConfig{Workers: *ctrl.ShootQuota.ConcurrentSyncs, SyncPeriod: ctrl.ShootQuota.SyncPeriod.Duration},
		Retry: shoot.RetryConfig{Workers: *ctrl.ShootRetry.ConcurrentSyncs, Period: ctrl.ShootRetry.RetryPeriod.Duration,
			JitterPeriod: ctrl.ShootRetry.RetryJitterPeriod.Duration},
		StatusLabel: shoot.WorkersConfig{Workers: *ctrl.ShootStatusLabel.ConcurrentSyncs},
		Conditions:  shoot.WorkersConfig{Workers: *ctrl.ShootConditions.ConcurrentSyncs},
		Addresses:   shoot.AddressesConfig{External: shootExternal},
	})
	if err != nil {
		return nil, err
	}
	mss := ctrl.ManagedSeedSet
	managedSeedSets, err := managedseedset.New(managedseedset.Config{Source: reg, Admission: plugins, Workers: *mss.ConcurrentSyncs,
		MaxShootRetries: mss.MaxShootRetries, SyncPeriod: mss.SyncPeriod.Duration, Log: log})
	if err != nil {
		return nil, err
	}
	// Trellis's own: Gardener has no AccessTokens (kube-controller-manager's token controller does this for the token
	// Secrets of ServiceAccounts); it has no configuration section, one worker is plenty.
	tokens, err := accesstoken.New(accesstoken.Config{Source: reg, Log: log})
	if err != nil {
		return nil, err
	}
	// kube-controller-manager's garbage collector, for the hub's kinds (Gardener has it from the garden cluster).
	var kinds []garbagecollector.Kind
	for _, k := range api.Kinds {
		kinds = append(kinds, garbagecollector.Kind{GroupKind: k.GroupKind(), GroupResource: k.GroupResource(), Namespaced: k.Namespaced})
	}
	gc, err := garbagecollector.New(garbagecollector.Config{Source: reg, Kinds: kinds, OwnerIndex: api.IndexOwnerUID, Workers: 2, Log: log})
	if err != nil {
		return nil, err
	}
	var all controller.Group
	for _, g := range []controller.Group{registrations, protections, {bastions}, seeds, projects, shoots, managedSeedSets, {tokens, gc}} {
		all = append(all, g...)
	}
	if e := ctrl.Event; e != nil { // Gardener runs the event controller only when configured
		events, err := event.New(event.Config{Source: reg, Workers: *e.ConcurrentSyncs, TTL: e.TTLNonShootEvents.Duration, Log: log})
		if err != nil {
			return nil, err
		}
		all = append(all, events)
	}
	// The event controller may be off by configuration, shoot-addresses without a tunnel listener, but both are known.
	known := map[string]bool{"event": true, "shoot-addresses": true}
	for _, c := range all {
		known[c.Name()] = true
	}
	for _, e := range enabled {
		if name := strings.TrimPrefix(e, "-"); e != "*" && !known[name] {
			return nil, fmt.Errorf("controllers: unknown controller %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	selected := all.Select(func(name string) bool { return controllerEnabled(enabled, name) })
	if len(selected) < len(all) {
		var off []string
		for _, c := range all {
			if !slices.Contains(selected, c) {
				off = append(off, c.Name())
			}
		}
		log.Info("controllers disabled", "controllers", off)
	}
	return selected, nil
}

// controllerEnabled says whether the list of --controllers enables name, as kube-controller-manager reads its
// --controllers: "name" enables, "-name" disables, "*" enables every controller not named; an empty list is "*".
func controllerEnabled(list []string, name string) bool {
	star := len(list) == 0
	for _, e := range list {
		switch e {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star
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
