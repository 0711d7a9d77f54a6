package componentconfig

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted Config: positive workers, periods and days, known strategies, well-formed quota
// selectors and quantities. Errors name the document and the field.
func (c *Config) Validate() error {
	var errs field.ErrorList
	cm := field.NewPath(ControllerManagerKind, "controllers")
	ctrl := c.ControllerManager.Controllers
	positive := func(p *field.Path, v *int) {
		if v != nil && *v <= 0 {
			errs = append(errs, field.Invalid(p, *v, "must be positive"))
		}
	}
	positiveDuration := func(p *field.Path, d *kmetav1.Duration) {
		if d != nil && d.Duration <= 0 {
			errs = append(errs, field.Invalid(p, d.Duration.String(), "must be positive"))
		}
	}
	for name, w := range map[string]*int{
		"bastion": ctrl.Bastion.ConcurrentSyncs, "certificateSigningRequest": ctrl.CertificateSigningRequest.ConcurrentSyncs,
		"cloudProfile": ctrl.CloudProfile.ConcurrentSyncs, "namespacedCloudProfile": ctrl.NamespacedCloudProfile.ConcurrentSyncs,
		"controllerDeployment": ctrl.ControllerDeployment.ConcurrentSyncs, "controllerRegistration": ctrl.ControllerRegistration.ConcurrentSyncs,
		"exposureClass": ctrl.ExposureClass.ConcurrentSyncs, "project": ctrl.Project.ConcurrentSyncs, "quota": ctrl.Quota.ConcurrentSyncs,
		"secretBinding": ctrl.SecretBinding.ConcurrentSyncs, "credentialsBinding": ctrl.CredentialsBinding.ConcurrentSyncs,
		"seed": ctrl.Seed.ConcurrentSyncs, "seedExtensionsCheck": ctrl.SeedExtensionsCheck.ConcurrentSyncs,
		"seedBackupBucketsCheck": ctrl.SeedBackupBucketsCheck.ConcurrentSyncs, "seedReference": ctrl.SeedReference.ConcurrentSyncs,
		"shootMaintenance": ctrl.ShootMaintenance.ConcurrentSyncs, "shootQuota": ctrl.ShootQuota.ConcurrentSyncs,
		"shootHibernation": ctrl.ShootHibernation.ConcurrentSyncs, "shootReference": ctrl.ShootReference.ConcurrentSyncs,
		"shootRetry": ctrl.ShootRetry.ConcurrentSyncs, "shootConditions": ctrl.ShootConditions.ConcurrentSyncs,
		"shootStatusLabel": ctrl.ShootStatusLabel.ConcurrentSyncs, "shootMigration": ctrl.ShootMigration.ConcurrentSyncs,
		"managedSeedSet": ctrl.ManagedSeedSet.ConcurrentSyncs, "shootState": ctrl.ShootState.ConcurrentSyncs,
	} {
		positive(cm.Child(name, "concurrentSyncs"), w)
	}
	if ctrl.Event != nil {
		positive(cm.Child("event", "concurrentSyncs"), ctrl.Event.ConcurrentSyncs)
		positiveDuration(cm.Child("event", "ttlNonShootEvents"), ctrl.Event.TTLNonShootEvents)
	}
	positiveDuration(cm.Child("bastion", "maxLifetime"), ctrl.Bastion.MaxLifetime)
	pp := cm.Child("project")
	positive(pp.Child("minimumLifetimeDays"), ctrl.Project.MinimumLifetimeDays)
	positive(pp.Child("staleGracePeriodDays"), ctrl.Project.StaleGracePeriodDays)
	positive(pp.Child("staleExpirationTimeDays"), ctrl.Project.StaleExpirationTimeDays)
	positiveDuration(pp.Child("staleSyncPeriod"), ctrl.Project.StaleSyncPeriod)
	for i, q := range ctrl.Project.Quotas {
		qp := pp.Child("quotas").Index(i)
		if len(q.Config.Spec.Hard) == 0 {
			errs = append(errs, field.Required(qp.Child("config", "spec", "hard"), "a default quota needs limits"))
		}
		for _, name := range sortedKeys(q.Config.Spec.Hard) {
			if _, err := resource.ParseQuantity(q.Config.Spec.Hard[name]); err != nil {
				errs = append(errs, field.Invalid(qp.Child("config", "spec", "hard").Key(name), q.Config.Spec.Hard[name], err.Error()))
			}
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(q.ProjectSelector, metav1validation.LabelSelectorValidationOptions{}, qp.Child("projectSelector"))...)
	}
	sp := cm.Child("seed")
	positiveDuration(sp.Child("syncPeriod"), ctrl.Seed.SyncPeriod)
	positiveDuration(sp.Child("monitorPeriod"), ctrl.Seed.MonitorPeriod)
	positiveDuration(sp.Child("shootMonitorPeriod"), ctrl.Seed.ShootMonitorPeriod)
	for name, s := range map[string]*SeedCheckController{"seedExtensionsCheck": ctrl.SeedExtensionsCheck, "seedBackupBucketsCheck": ctrl.SeedBackupBucketsCheck} {
		positiveDuration(cm.Child(name, "syncPeriod"), s.SyncPeriod)
		for i, t := range s.ConditionThresholds {
			if t.Type == "" {
				errs = append(errs, field.Required(cm.Child(name, "conditionThresholds").Index(i).Child("type"), "a condition type is required"))
			}
			if t.Duration.Duration < 0 {
				errs = append(errs, field.Invalid(cm.Child(name, "conditionThresholds").Index(i).Child("duration"), t.Duration.String(), "must not be negative"))
			}
		}
	}
	positiveDuration(cm.Child("shootQuota", "syncPeriod"), ctrl.ShootQuota.SyncPeriod)
	positiveDuration(cm.Child("shootHibernation", "triggerDeadlineDuration"), ctrl.ShootHibernation.TriggerDeadlineDuration)
	positiveDuration(cm.Child("shootRetry", "retryPeriod"), ctrl.ShootRetry.RetryPeriod)
	if d := ctrl.ShootRetry.RetryJitterPeriod; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(cm.Child("shootRetry", "retryJitterPeriod"), d.Duration.String(), "must not be negative"))
	}
	if d := ctrl.ManagedSeedSet.SyncPeriod; d.Duration <= 0 {
		errs = append(errs, field.Invalid(cm.Child("managedSeedSet", "syncPeriod"), d.Duration.String(), "must be positive"))
	}
	if m := ctrl.ManagedSeedSet.MaxShootRetries; m != nil && *m < 0 {
		errs = append(errs, field.Invalid(cm.Child("managedSeedSet", "maxShootRetries"), *m, "must not be negative"))
	}

	sch := field.NewPath(SchedulerKind, "schedulers", "shoot")
	positive(sch.Child("concurrentSyncs"), c.Scheduler.Schedulers.Shoot.ConcurrentSyncs)
	if s := c.Scheduler.Schedulers.Shoot.CandidateDeterminationStrategy; !slices.Contains([]string{StrategySameRegion, StrategyMinimalDistance}, s) {
		errs = append(errs, field.NotSupported(sch.Child("candidateDeterminationStrategy"), s, []string{StrategySameRegion, StrategyMinimalDistance}))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
