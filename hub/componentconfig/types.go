package componentconfig

import (
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds and API versions of the documents.
const (
	ControllerManagerAPIVersion = "controllermanager.config.gardener.cloud/v1alpha1"
	ControllerManagerKind       = "ControllerManagerConfiguration"
	SchedulerAPIVersion         = "scheduler.config.gardener.cloud/v1alpha1"
	SchedulerKind               = "SchedulerConfiguration"
)

// Config is the hub's control-plane configuration: both documents, defaulted.
type Config struct {
	ControllerManager ControllerManagerConfiguration
	Scheduler         SchedulerConfiguration
}

// ControllerManagerConfiguration is gardener-controller-manager's component configuration.
type ControllerManagerConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// GardenClientConnection is accepted and has no effect: the hub's loops use its store directly.
	GardenClientConnection *ClientConnection `json:"gardenClientConnection,omitempty"`
	// Controllers configures the controllers.
	Controllers ControllerManagerControllers `json:"controllers"`
	// LeaderElection is accepted and has no effect: the hub's replicas elect their leader in etcd.
	LeaderElection *LeaderElection `json:"leaderElection,omitempty"`
	// LogLevel and LogFormat are accepted and have no effect: the hub's --log-level and --log-format apply.
	LogLevel  string `json:"logLevel,omitempty"`
	LogFormat string `json:"logFormat,omitempty"`
	// Server is accepted and has no effect: the hub serves health and metrics on its own port.
	Server *ServerConfiguration `json:"server,omitempty"`
	// Debugging is accepted and has no effect: the hub's /debug/pprof applies.
	Debugging *Debugging `json:"debugging,omitempty"`
	// FeatureGates are accepted and have no effect: no feature gates exist yet.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

// ClientConnection is component-base's ClientConnectionConfiguration.
type ClientConnection struct {
	Kubeconfig         string  `json:"kubeconfig,omitempty"`
	AcceptContentTypes string  `json:"acceptContentTypes,omitempty"`
	ContentType        string  `json:"contentType,omitempty"`
	QPS                float32 `json:"qps,omitempty"`
	Burst              int32   `json:"burst,omitempty"`
}

// LeaderElection is component-base's LeaderElectionConfiguration.
type LeaderElection struct {
	LeaderElect       *bool             `json:"leaderElect,omitempty"`
	LeaseDuration     *kmetav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline     *kmetav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod       *kmetav1.Duration `json:"retryPeriod,omitempty"`
	ResourceLock      string            `json:"resourceLock,omitempty"`
	ResourceName      string            `json:"resourceName,omitempty"`
	ResourceNamespace string            `json:"resourceNamespace,omitempty"`
}

// ServerConfiguration holds the HTTP servers of a Gardener component.
type ServerConfiguration struct {
	HealthProbes *Server `json:"healthProbes,omitempty"`
	Metrics      *Server `json:"metrics,omitempty"`
}

// Server is one HTTP server of a Gardener component.
type Server struct {
	BindAddress string `json:"bindAddress,omitempty"`
	Port        int    `json:"port,omitempty"`
}

// Debugging is component-base's DebuggingConfiguration.
type Debugging struct {
	EnableProfiling           *bool `json:"enableProfiling,omitempty"`
	EnableContentionProfiling *bool `json:"enableContentionProfiling,omitempty"`
}

// Workers is the concurrentSyncs of a controller: how many objects it reconciles at once.
type Workers struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
}

// ControllerManagerControllers configures each controller, as Gardener's ControllerManagerControllerConfiguration.
type ControllerManagerControllers struct {
	Bastion                       *BastionController         `json:"bastion,omitempty"`
	CertificateSigningRequest     *Workers                   `json:"certificateSigningRequest,omitempty"`
	CloudProfile                  *Workers                   `json:"cloudProfile,omitempty"`
	NamespacedCloudProfile        *Workers                   `json:"namespacedCloudProfile,omitempty"`
	ControllerDeployment          *Workers                   `json:"controllerDeployment,omitempty"`
	ControllerRegistration        *Workers                   `json:"controllerRegistration,omitempty"`
	ControllerDeploymentReference *Workers                   `json:"controllerDeploymentReference,omitempty"`
	Event                         *EventController           `json:"event,omitempty"`
	ExposureClass                 *Workers                   `json:"exposureClass,omitempty"`
	Project                       *ProjectController         `json:"project,omitempty"`
	Quota                         *Workers                   `json:"quota,omitempty"`
	SecretBinding                 *Workers                   `json:"secretBinding,omitempty"`
	CredentialsBinding            *Workers                   `json:"credentialsBinding,omitempty"`
	Seed                          *SeedController            `json:"seed,omitempty"`
	SeedExtensionsCheck           *SeedCheckController       `json:"seedExtensionsCheck,omitempty"`
	SeedBackupBucketsCheck        *SeedCheckController       `json:"seedBackupBucketsCheck,omitempty"`
	SeedReference                 *Workers                   `json:"seedReference,omitempty"`
	ShootMaintenance              ShootMaintenanceController `json:"shootMaintenance"`
	ShootQuota                    *ShootQuotaController      `json:"shootQuota,omitempty"`
	ShootHibernation              ShootHibernationController `json:"shootHibernation"`
	ShootReference                *Workers                   `json:"shootReference,omitempty"`
	ShootRetry                    *ShootRetryController      `json:"shootRetry,omitempty"`
	ShootConditions               *Workers                   `json:"shootConditions,omitempty"`
	ShootStatusLabel              *Workers                   `json:"shootStatusLabel,omitempty"`
	ShootMigration                *Workers                   `json:"shootMigration,omitempty"`
	ManagedSeedSet                *ManagedSeedSetController  `json:"managedSeedSet,omitempty"`
	ShootState                    *Workers                   `json:"shootState,omitempty"`
}

// BastionController configures the Bastion controller.
type BastionController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// MaxLifetime is how long a Bastion may exist before it is deleted, whatever its expiration (default 24h).
	MaxLifetime *kmetav1.Duration `json:"maxLifetime,omitempty"`
}

// EventController configures the Event controller.
type EventController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// TTLNonShootEvents is how long Events about objects other than Shoots are kept (default 1h).
	TTLNonShootEvents *kmetav1.Duration `json:"ttlNonShootEvents,omitempty"`
}

// ProjectController configures the Project controllers.
type ProjectController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// MinimumLifetimeDays is how old a Project must be before it may count as stale (default 30).
	MinimumLifetimeDays *int `json:"minimumLifetimeDays,omitempty"`
	// Quotas are the default quotas of the Projects they select.
	Quotas []QuotaConfiguration `json:"quotas,omitempty"`
	// StaleGracePeriodDays is how long a Project may be unused before it is stale (default 14).
	StaleGracePeriodDays *int `json:"staleGracePeriodDays,omitempty"`
	// StaleExpirationTimeDays is how long a stale Project lives before it is deleted automatically (default 90).
	StaleExpirationTimeDays *int `json:"staleExpirationTimeDays,omitempty"`
	// StaleSyncPeriod is how often staleness is checked (default 12h).
	StaleSyncPeriod *kmetav1.Duration `json:"staleSyncPeriod,omitempty"`
}

// QuotaConfiguration is a default quota: a ResourceQuota for the Projects the selector selects.
type QuotaConfiguration struct {
	// Config is a v1 ResourceQuota; only spec.hard is read.
	Config ResourceQuota `json:"config"`
	// ProjectSelector selects the Projects (default: all).
	ProjectSelector *kmetav1.LabelSelector `json:"projectSelector,omitempty"`
}

// ResourceQuota is the part of a v1 ResourceQuota a default quota uses.
type ResourceQuota struct {
	APIVersion string              `json:"apiVersion,omitempty"`
	Kind       string              `json:"kind,omitempty"`
	Metadata   *kmetav1.ObjectMeta `json:"metadata,omitempty"`
	Spec       ResourceQuotaSpec   `json:"spec"`
}

// ResourceQuotaSpec holds the hard limits, as quantities by resource name (count/shoots.core.gardener.cloud, ...).
type ResourceQuotaSpec struct {
	Hard map[string]string `json:"hard,omitempty"`
}

// SeedController configures the Seed lifecycle and main controllers.
type SeedController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// MonitorPeriod is how long a seed's agent may be silent before GardenletReady turns Unknown (default 40s).
	MonitorPeriod *kmetav1.Duration `json:"monitorPeriod,omitempty"`
	// ShootMonitorPeriod is how long before the seed's shoots' conditions turn Unknown (default 5 × MonitorPeriod).
	ShootMonitorPeriod *kmetav1.Duration `json:"shootMonitorPeriod,omitempty"`
	// SyncPeriod is how often seeds are looked at (default 10s).
	SyncPeriod *kmetav1.Duration `json:"syncPeriod,omitempty"`
}

// SeedCheckController configures a seed check controller (extensions, backup buckets).
type SeedCheckController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// SyncPeriod is how often the check runs (default 30s).
	SyncPeriod *kmetav1.Duration `json:"syncPeriod,omitempty"`
	// ConditionThresholds say how long a failing condition stays Progressing before it turns False.
	ConditionThresholds []ConditionThreshold `json:"conditionThresholds,omitempty"`
}

// ConditionThreshold is how long a condition of a type may stay Progressing.
type ConditionThreshold struct {
	Type     string           `json:"type"`
	Duration kmetav1.Duration `json:"duration"`
}

// ShootMaintenanceController configures the shoot maintenance controller.
type ShootMaintenanceController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// EnableShootControlPlaneRestarter and EnableShootCoreAddonRestarter are accepted; Trellis seeds run no shoot
	// control plane to restart.
	EnableShootControlPlaneRestarter *bool `json:"enableShootControlPlaneRestarter,omitempty"`
	EnableShootCoreAddonRestarter    *bool `json:"enableShootCoreAddonRestarter,omitempty"`
}

// ShootQuotaController configures the shoot quota (cluster lifetime) controller.
type ShootQuotaController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// SyncPeriod is how often shoots' quotas are checked (default 60m).
	SyncPeriod *kmetav1.Duration `json:"syncPeriod,omitempty"`
}

// ShootHibernationController configures the hibernation schedule controller.
type ShootHibernationController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// TriggerDeadlineDuration is how late a missed schedule may still be acted on (default 2h).
	TriggerDeadlineDuration *kmetav1.Duration `json:"triggerDeadlineDuration,omitempty"`
}

// ShootRetryController configures the shoot retry controller.
type ShootRetryController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// RetryPeriod is how long after a rate-limit failure a shoot is retried (default 10m).
	RetryPeriod *kmetav1.Duration `json:"retryPeriod,omitempty"`
	// RetryJitterPeriod spreads the retries over up to this much more (default 5m).
	RetryJitterPeriod *kmetav1.Duration `json:"retryJitterPeriod,omitempty"`
}

// ManagedSeedSetController configures the ManagedSeedSet controller.
type ManagedSeedSetController struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// MaxShootRetries is how often a replica's failed shoot is retried before giving up (default 3).
	MaxShootRetries *int `json:"maxShootRetries,omitempty"`
	// SyncPeriod is how often the sets are reconciled (default 30m).
	SyncPeriod kmetav1.Duration `json:"syncPeriod"`
}

// SchedulerConfiguration is gardener-scheduler's component configuration.
type SchedulerConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ClientConnection, LeaderElection, LogLevel, LogFormat, Server and Debugging are accepted and have no effect
	// (see ControllerManagerConfiguration).
	ClientConnection *ClientConnection    `json:"clientConnection,omitempty"`
	LeaderElection   *LeaderElection      `json:"leaderElection,omitempty"`
	LogLevel         string               `json:"logLevel,omitempty"`
	LogFormat        string               `json:"logFormat,omitempty"`
	Server           *ServerConfiguration `json:"server,omitempty"`
	Debugging        *Debugging           `json:"debugging,omitempty"`
	FeatureGates     map[string]bool      `json:"featureGates,omitempty"`
	// Schedulers configures the schedulers.
	Schedulers SchedulerControllers `json:"schedulers"`
}

// SchedulerControllers configures the schedulers.
type SchedulerControllers struct {
	// BackupBucket is accepted; BackupBuckets are placed with their seeds.
	BackupBucket *Workers `json:"backupBucket,omitempty"`
	// Shoot configures the shoot scheduler.
	Shoot *ShootScheduler `json:"shoot,omitempty"`
}

// Candidate determination strategies of the shoot scheduler.
const (
	StrategySameRegion      = "SameRegion"
	StrategyMinimalDistance = "MinimalDistance"
)

// ShootScheduler configures the shoot scheduler.
type ShootScheduler struct {
	ConcurrentSyncs *int `json:"concurrentSyncs,omitempty"`
	// RetrySyncPeriod is accepted for compatibility with older files.
	RetrySyncPeriod *kmetav1.Duration `json:"retrySyncPeriod,omitempty"`
	// CandidateDeterminationStrategy is SameRegion (default) or MinimalDistance.
	CandidateDeterminationStrategy string `json:"candidateDeterminationStrategy,omitempty"`
}
