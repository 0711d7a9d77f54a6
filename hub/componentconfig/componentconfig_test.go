package componentconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// Gardener's own component configuration files decode strictly, together in one file, with their values and
// Gardener's defaults for the rest.
func TestGardenerFiles(t *testing.T) {
	var docs []string
	for _, f := range []string{"20-componentconfig-gardener-controller-manager.yaml", "20-componentconfig-gardener-scheduler.yaml"} {
		b, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(t), f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	c, err := componentconfig.Decode([]byte(strings.Join(docs, "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	ctrl := c.ControllerManager.Controllers
	if got := ctrl.Bastion.MaxLifetime.Duration; got != 24*time.Hour {
		t.Errorf("bastion.maxLifetime %v", got)
	}
	if got := ctrl.Seed.SyncPeriod.Duration; got != 10*time.Second {
		t.Errorf("seed.syncPeriod %v", got)
	}
	if got := ctrl.Seed.ShootMonitorPeriod.Duration; got != 200*time.Second {
		t.Errorf("seed.shootMonitorPeriod %v, want 5 × the default monitor period", got)
	}
	if th := ctrl.SeedExtensionsCheck.ConditionThresholds; len(th) != 1 || th[0].Type != "ExtensionsReady" || th[0].Duration.Duration != time.Minute {
		t.Errorf("seedExtensionsCheck.conditionThresholds %v", th)
	}
	if p := ctrl.Project; *p.MinimumLifetimeDays != 30 || *p.StaleGracePeriodDays != 14 || *p.StaleExpirationTimeDays != 90 || p.StaleSyncPeriod.Duration != 12*time.Hour {
		t.Errorf("project %+v", p)
	}
	if e := ctrl.Event; e == nil || e.TTLNonShootEvents.Duration != time.Hour {
		t.Errorf("event %+v", e)
	}
	if got := ctrl.ShootHibernation.TriggerDeadlineDuration.Duration; got != 2*time.Hour {
		t.Errorf("shootHibernation.triggerDeadlineDuration %v", got)
	}
	if got := ctrl.ShootQuota.SyncPeriod.Duration; got != time.Hour {
		t.Errorf("shootQuota.syncPeriod %v", got)
	}
	if got := *ctrl.ShootRetry.ConcurrentSyncs; got != 5 {
		t.Errorf("shootRetry.concurrentSyncs defaulted to %d", got)
	}
	if got := ctrl.ShootRetry.RetryPeriod.Duration; got != 10*time.Minute {
		t.Errorf("shootRetry.retryPeriod defaulted to %v", got)
	}
	if got := c.Scheduler.Schedulers.Shoot.CandidateDeterminationStrategy; got != componentconfig.StrategySameRegion {
		t.Errorf("scheduler strategy %q", got)
	}
}

func TestDefaultsWithoutFile(t *testing.T) {
	c, err := componentconfig.Load("")
	if err != nil {
		t.Fatal(err)
	}
	ctrl := c.ControllerManager.Controllers
	if ctrl.Event != nil {
		t.Error("the event controller is on without its section (Gardener disables it)")
	}
	if *ctrl.ControllerRegistration.ConcurrentSyncs != 5 || ctrl.ManagedSeedSet.SyncPeriod.Duration != 30*time.Minute || *ctrl.ManagedSeedSet.MaxShootRetries != 3 {
		t.Errorf("defaults: %+v %+v", ctrl.ControllerRegistration, ctrl.ManagedSeedSet)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("the defaults are invalid: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  bastion:\n    maxLifetme: 1h\n", `unknown field "maxLifetme"`},
		{"wrong type", "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  project:\n    minimumLifetimeDays: many\n", "minimumLifetimeDays"},
		{"unknown kind", "apiVersion: v1\nkind: ConfigMap\n", "is not supported"},
		{"twice", "apiVersion: scheduler.config.gardener.cloud/v1alpha1\nkind: SchedulerConfiguration\n---\napiVersion: scheduler.config.gardener.cloud/v1alpha1\nkind: SchedulerConfiguration\n", "a second"},
		{"strategy", "apiVersion: scheduler.config.gardener.cloud/v1alpha1\nkind: SchedulerConfiguration\nschedulers:\n  shoot:\n    candidateDeterminationStrategy: Nearest\n", "SchedulerConfiguration.schedulers.shoot.candidateDeterminationStrategy"},
		{"zero workers", "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  seed:\n    concurrentSyncs: 0\n", "ControllerManagerConfiguration.controllers.seed.concurrentSyncs"},
		{"negative duration", "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  bastion:\n    maxLifetime: -1h\n", "controllers.bastion.maxLifetime"},
		{"bad quota", "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  project:\n    quotas:\n    - config:\n        spec:\n          hard:\n            count/shoots.core.gardener.cloud: lots\n", "count/shoots.core.gardener.cloud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := componentconfig.Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\ncontrollers:\n  bastion:\n    maxLifetime: 2h\n"))
	f.Add([]byte("apiVersion: scheduler.config.gardener.cloud/v1alpha1\nkind: SchedulerConfiguration\nschedulers:\n  shoot:\n    candidateDeterminationStrategy: MinimalDistance\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := componentconfig.Decode(data)
		if err != nil {
			return
		}
		// What decodes is defaulted and valid.
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded but invalid: %v", err)
		}
		if c.ControllerManager.Controllers.Bastion == nil || c.Scheduler.Schedulers.Shoot == nil {
			t.Fatal("decoded without defaults")
		}
	})
}
