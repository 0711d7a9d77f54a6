package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the configuration (Gardener's where it has one).
const (
	DefaultKubeconfigSecretNamespace = "garden"
	DefaultKubeconfigSecretName      = "gardenlet-kubeconfig"
	DefaultValidity                  = 30 * 24 * time.Hour
	DefaultJitterPercentageMin       = 70
	DefaultJitterPercentageMax       = 90
	DefaultHeartbeatIntervalSeconds  = 2
	DefaultInitialDelay              = 200 * time.Millisecond
	DefaultMaxDelay                  = 30 * time.Second
	DefaultResetAfter                = time.Minute
	DefaultSeedQPS                   = 100
	DefaultSeedBurst                 = 130
	DefaultHealthProbesAddress       = "127.0.0.1:2728"
	DefaultMetricsAddress            = "127.0.0.1:2729"
	DefaultLogLevel                  = "info"
	DefaultLogFormat                 = "json"
)

// Default fills unset fields. It leaves set fields alone, so it can run more than once.
func (c *AgentConfiguration) Default() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	h := &c.HubClientConnection
	if h.KubeconfigSecret.Namespace == "" {
		h.KubeconfigSecret.Namespace = DefaultKubeconfigSecretNamespace
	}
	if h.KubeconfigSecret.Name == "" {
		h.KubeconfigSecret.Name = DefaultKubeconfigSecretName
	}
	v := &h.KubeconfigValidity
	if v.Validity == nil {
		v.Validity = &metav1.Duration{Duration: DefaultValidity}
	}
	if v.AutoRotationJitterPercentageMin == nil {
		v.AutoRotationJitterPercentageMin = ptr[int32](DefaultJitterPercentageMin)
	}
	if v.AutoRotationJitterPercentageMax == nil {
		v.AutoRotationJitterPercentageMax = ptr[int32](DefaultJitterPercentageMax)
	}
	if c.HeartbeatIntervalSeconds == 0 {
		c.HeartbeatIntervalSeconds = DefaultHeartbeatIntervalSeconds
	}
	b := &c.ReconnectBackoff
	if b.InitialDelay == nil {
		b.InitialDelay = &metav1.Duration{Duration: DefaultInitialDelay}
	}
	if b.MaxDelay == nil {
		b.MaxDelay = &metav1.Duration{Duration: DefaultMaxDelay}
	}
	if b.ResetAfter == nil {
		b.ResetAfter = &metav1.Duration{Duration: DefaultResetAfter}
	}
	if c.SeedClientConnection.QPS == nil {
		c.SeedClientConnection.QPS = ptr[float32](DefaultSeedQPS)
	}
	if c.SeedClientConnection.Burst == nil {
		c.SeedClientConnection.Burst = ptr[int32](DefaultSeedBurst)
	}
	c.Controllers.defaults()
	if c.Server.HealthProbes == "" {
		c.Server.HealthProbes = DefaultHealthProbesAddress
	}
	if c.Server.Metrics == "" {
		c.Server.Metrics = DefaultMetricsAddress
	}
	if c.Tracing.SamplingRatio == nil {
		c.Tracing.SamplingRatio = ptr(1.0)
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.LogFormat == "" {
		c.LogFormat = DefaultLogFormat
	}
}

// HeartbeatInterval is HeartbeatIntervalSeconds as a duration.
func (c *AgentConfiguration) HeartbeatInterval() time.Duration {
	return time.Duration(c.HeartbeatIntervalSeconds) * time.Second
}

func ptr[T any](v T) *T { return &v }

// duration returns d's value, 0 for nil.
func duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
