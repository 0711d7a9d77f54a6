package componentconfig

import (
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultConcurrentSyncs is Gardener's default number of workers of a controller.
const DefaultConcurrentSyncs = 5

func intPtr(v int) *int { return &v }

func duration(d time.Duration) *kmetav1.Duration { return &kmetav1.Duration{Duration: d} }

func workers(p **int) {
	if *p == nil {
		*p = intPtr(DefaultConcurrentSyncs)
	}
}

func durationDefault(p **kmetav1.Duration, d time.Duration) {
	if *p == nil {
		*p = duration(d)
	}
}

func workersOf(p **Workers) {
	if *p == nil {
		*p = &Workers{}
	}
	workers(&(*p).ConcurrentSyncs)
}

// Default applies Gardener's defaults to both documents (SetDefaults_ControllerManagerConfiguration and
// SetDefaults_SchedulerConfiguration with everything they call).
func (c *Config) Default() {
	c.ControllerManager.Default()
	c.Scheduler.Default()
}

// Default applies gardener-controller-manager's defaults.
func (c *ControllerManagerConfiguration) Default() {
	if c.APIVersion == "" {
		c.APIVersion, c.Kind = ControllerManagerAPIVersion, ControllerManagerKind
	}
	ctrl := &c.Controllers
	if ctrl.Bastion == nil {
		ctrl.Bastion = &BastionController{}
	}
	workers(&ctrl.Bastion.ConcurrentSyncs)
	durationDefault(&ctrl.Bastion.MaxLifetime, 24*time.Hour)
	for _, w := range []**Workers{&ctrl.CertificateSigningRequest, &ctrl.CloudProfile, &ctrl.NamespacedCloudProfile,
		&ctrl.ControllerDeployment, &ctrl.ControllerRegistration, &ctrl.ControllerDeploymentReference, &ctrl.ExposureClass, &ctrl.Quota, &ctrl.SecretBinding,
		&ctrl.CredentialsBinding, &ctrl.SeedReference, &ctrl.ShootReference, &ctrl.ShootConditions, &ctrl.ShootStatusLabel,
		&ctrl.ShootMigration, &ctrl.ShootState} {
		workersOf(w)
	}
	// Gardener disables the event controller when its section is missing; its defaults apply to a section given.
	if ctrl.Event != nil {
		workers(&ctrl.Event.ConcurrentSyncs)
		durationDefault(&ctrl.Event.TTLNonShootEvents, time.Hour)
	}
	if ctrl.Project == nil {
		ctrl.Project = &ProjectController{}
	}
	p := ctrl.Project
	workers(&p.ConcurrentSyncs)
	if p.MinimumLifetimeDays == nil {
		p.MinimumLifetimeDays = intPtr(30)
	}
	if p.StaleGracePeriodDays == nil {
		p.StaleGracePeriodDays = intPtr(14)
	}
	if p.StaleExpirationTimeDays == nil {
		p.StaleExpirationTimeDays = intPtr(90)
	}
	durationDefault(&p.StaleSyncPeriod, 12*time.Hour)
	for i := range p.Quotas {
		if p.Quotas[i].ProjectSelector == nil {
			p.Quotas[i].ProjectSelector = &kmetav1.LabelSelector{}
		}
	}
	if ctrl.Seed == nil {
		ctrl.Seed = &SeedController{}
	}
	workers(&ctrl.Seed.ConcurrentSyncs)
	durationDefault(&ctrl.Seed.SyncPeriod, 10*time.Second)
	durationDefault(&ctrl.Seed.MonitorPeriod, 40*time.Second)
	durationDefault(&ctrl.Seed.ShootMonitorPeriod, 5*ctrl.Seed.MonitorPeriod.Duration)
	for _, s := range []**SeedCheckController{&ctrl.SeedExtensionsCheck, &ctrl.SeedBackupBucketsCheck} {
		if *s == nil {
			*s = &SeedCheckController{}
		}
		workers(&(*s).ConcurrentSyncs)
		durationDefault(&(*s).SyncPeriod, 30*time.Second)
	}
	workers(&ctrl.ShootMaintenance.ConcurrentSyncs)
	if ctrl.ShootMaintenance.EnableShootControlPlaneRestarter == nil {
		t := true
		ctrl.ShootMaintenance.EnableShootControlPlaneRestarter = &t
	}
	if ctrl.ShootQuota == nil {
		ctrl.ShootQuota = &ShootQuotaController{}
	}
	workers(&ctrl.ShootQuota.ConcurrentSyncs)
	durationDefault(&ctrl.ShootQuota.SyncPeriod, 60*time.Minute)
	workers(&ctrl.ShootHibernation.ConcurrentSyncs)
	durationDefault(&ctrl.ShootHibernation.TriggerDeadlineDuration, 2*time.Hour)
	if ctrl.ShootRetry == nil {
		ctrl.ShootRetry = &ShootRetryController{}
	}
	workers(&ctrl.ShootRetry.ConcurrentSyncs)
	durationDefault(&ctrl.ShootRetry.RetryPeriod, 10*time.Minute)
	durationDefault(&ctrl.ShootRetry.RetryJitterPeriod, 5*time.Minute)
	if ctrl.ManagedSeedSet == nil {
		ctrl.ManagedSeedSet = &ManagedSeedSetController{SyncPeriod: kmetav1.Duration{Duration: 30 * time.Minute}}
	}
	workers(&ctrl.ManagedSeedSet.ConcurrentSyncs)
	if ctrl.ManagedSeedSet.MaxShootRetries == nil {
		ctrl.ManagedSeedSet.MaxShootRetries = intPtr(3)
	}
}

// Default applies gardener-scheduler's defaults.
func (c *SchedulerConfiguration) Default() {
	if c.APIVersion == "" {
		c.APIVersion, c.Kind = SchedulerAPIVersion, SchedulerKind
	}
	workersOf(&c.Schedulers.BackupBucket)
	if c.Schedulers.Shoot == nil {
		c.Schedulers.Shoot = &ShootScheduler{}
	}
	workers(&c.Schedulers.Shoot.ConcurrentSyncs)
	if c.Schedulers.Shoot.CandidateDeterminationStrategy == "" {
		c.Schedulers.Shoot.CandidateDeterminationStrategy = StrategySameRegion
	}
}
