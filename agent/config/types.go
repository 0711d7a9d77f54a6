package config

import (
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// APIVersion and Kind identify an agent configuration file.
const (
	APIVersion = "agent.trellis.dev/v1alpha1"
	Kind       = "AgentConfiguration"
)

// AgentConfiguration configures a seed agent (trellis-agent).
type AgentConfiguration struct {
	// APIVersion is "agent.trellis.dev/v1alpha1".
	APIVersion string `json:"apiVersion"`
	// Kind is "AgentConfiguration".
	Kind string `json:"kind"`
	// HubClientConnection says how the agent reaches the hub and where it keeps its credentials.
	HubClientConnection HubClientConnection `json:"hubClientConnection,omitzero"`
	// SeedClientConnection says how the agent reaches its seed cluster.
	SeedClientConnection SeedClientConnection `json:"seedClientConnection,omitzero"`
	// SeedConfig is the Seed the agent registers at the hub (metadata and spec, in Gardener's JSON). Its name is the
	// agent's seed name.
	SeedConfig SeedTemplate `json:"seedConfig,omitzero"`
	// HeartbeatIntervalSeconds is the interval of heartbeats to the hub (default 2, Gardener's leaseResyncSeconds).
	// The agent drops a session that got no heartbeat acknowledgement for three intervals.
	HeartbeatIntervalSeconds int32 `json:"heartbeatIntervalSeconds,omitzero"`
	// ReconnectBackoff is the delay between connection attempts.
	ReconnectBackoff ReconnectBackoff `json:"reconnectBackoff,omitzero"`
	// Controllers configures the seed-side controllers: shoots, backups, bastions, seed care.
	Controllers Controllers `json:"controllers,omitzero"`
	// Server configures the agent's HTTP endpoints (gardenlet: server): /healthz and /readyz, and Prometheus
	// /metrics.
	Server Server `json:"server,omitzero"`
	// Tracing configures OpenTelemetry tracing (off by default).
	Tracing Tracing `json:"tracing,omitzero"`
	// LogLevel is debug, info (default), warn or error.
	LogLevel string `json:"logLevel,omitzero"`
	// LogFormat is json (default) or text.
	LogFormat string `json:"logFormat,omitzero"`
}

// HubClientConnection configures the connection to the hub (gardenlet: gardenClientConnection).
type HubClientConnection struct {
	// Address is the hub's host:port.
	Address string `json:"address"`
	// CAFile is a file holding the PEM bundle that verifies the hub's serving certificate.
	CAFile string `json:"caFile,omitzero"`
	// CABundle is that PEM bundle inline. Without CAFile and CABundle the system roots verify the hub until the agent
	// holds a kubeconfig, whose CA is trusted as well.
	CABundle string `json:"caBundle,omitzero"`
	// BootstrapToken ("<id>.<secret>") authenticates the agent's first certificate request when the kubeconfig
	// secret does not exist yet.
	BootstrapToken string `json:"bootstrapToken,omitzero"`
	// BootstrapTokenFile is a file holding the bootstrap token; it is read at every bootstrap attempt, so an operator
	// can replace an expired token without restarting the agent.
	BootstrapTokenFile string `json:"bootstrapTokenFile,omitzero"`
	// KubeconfigSecret is the Secret in the seed that holds the agent's client certificate, key and the hub's CA as
	// a kubeconfig (data key "kubeconfig"; default garden/gardenlet-kubeconfig).
	KubeconfigSecret SecretReference `json:"kubeconfigSecret,omitzero"`
	// KubeconfigValidity controls the validity and rotation of the client certificate.
	KubeconfigValidity KubeconfigValidity `json:"kubeconfigValidity,omitzero"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Namespace of the Secret.
	Namespace string `json:"namespace,omitzero"`
	// Name of the Secret.
	Name string `json:"name,omitzero"`
}

// String returns "namespace/name".
func (r SecretReference) String() string { return r.Namespace + "/" + r.Name }

// KubeconfigValidity controls the client certificate's validity and when it is rotated.
type KubeconfigValidity struct {
	// Validity is the validity requested for the client certificate (default 720h; at least 10m). The hub's maximum
	// applies. Gardener leaves it unset, so that the signer's --cluster-signing-duration (1 year) applies; the agent
	// asks for 30 days so that rotation is exercised regularly.
	Validity *metav1.Duration `json:"validity,omitzero"`
	// AutoRotationJitterPercentageMin is the earliest point of rotation, in percent of the certificate's lifetime
	// (default 70).
	AutoRotationJitterPercentageMin *int32 `json:"autoRotationJitterPercentageMin,omitzero"`
	// AutoRotationJitterPercentageMax is the latest point of rotation, in percent of the certificate's lifetime
	// (default 90).
	AutoRotationJitterPercentageMax *int32 `json:"autoRotationJitterPercentageMax,omitzero"`
}

// SeedClientConnection configures the connection to the seed cluster.
type SeedClientConnection struct {
	// Kubeconfig is the path of a kubeconfig for the seed cluster; empty means in-cluster configuration.
	Kubeconfig string `json:"kubeconfig,omitzero"`
	// QPS and Burst limit the agent's requests to the seed's API server (client-go's rate limiter; defaults 100 and
	// 130, gardenlet's seedClientConnection in Gardener's example configuration).
	QPS   *float32 `json:"qps,omitzero"`
	Burst *int32   `json:"burst,omitzero"`
}

// ReconnectBackoff is a full-jitter exponential backoff: before attempt n the agent waits a random time in
// [0, min(MaxDelay, InitialDelay·2ⁿ)). After a connection stayed up for ResetAfter, the next failure starts over.
type ReconnectBackoff struct {
	// InitialDelay bounds the first wait (default 200ms).
	InitialDelay *metav1.Duration `json:"initialDelay,omitzero"`
	// MaxDelay bounds every wait (default 30s).
	MaxDelay *metav1.Duration `json:"maxDelay,omitzero"`
	// ResetAfter is the quiet period after which the backoff starts over (default 1m).
	ResetAfter *metav1.Duration `json:"resetAfter,omitzero"`
}

// SeedTemplate is a Seed manifest (Gardener's JSON), decoded with the hub's codec.
type SeedTemplate struct {
	// Seed is the decoded manifest; nil when seedConfig is absent.
	Seed *corev1beta1.Seed
}

// UnmarshalJSON decodes a Seed manifest strictly; errors are *kjson.FieldError relative to seedConfig.
func (t *SeedTemplate) UnmarshalJSON(b []byte) error {
	if strings.TrimSpace(string(b)) == "null" {
		t.Seed = nil
		return nil
	}
	s := &corev1beta1.Seed{}
	if err := kjson.Unmarshal(b, s); err != nil {
		return err
	}
	t.Seed = s
	return nil
}

// MarshalJSON encodes the Seed in Gardener's JSON.
func (t SeedTemplate) MarshalJSON() ([]byte, error) {
	if t.Seed == nil {
		return []byte("null"), nil
	}
	return kjson.Marshal(t.Seed)
}

// IsZero reports whether no seed is configured (for omitzero).
func (t SeedTemplate) IsZero() bool { return t.Seed == nil }

// SeedName is the name of the agent's seed (seedConfig.metadata.name).
func (c *AgentConfiguration) SeedName() string {
	if c.SeedConfig.Seed == nil {
		return ""
	}
	return c.SeedConfig.Seed.GetMetadata().GetName()
}

// CAPEM returns the configured CA bundle (CABundle, or CAFile's content); nil when neither is set.
func (h *HubClientConnection) CAPEM() ([]byte, error) {
	if h.CABundle != "" {
		return []byte(h.CABundle), nil
	}
	if h.CAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(h.CAFile)
	if err != nil {
		return nil, fmt.Errorf("hubClientConnection.caFile: %w", err)
	}
	return b, nil
}

// Token returns the bootstrap token: BootstrapToken, or BootstrapTokenFile's content (read now, trimmed); "" when
// neither is set.
func (h *HubClientConnection) Token() (string, error) {
	if h.BootstrapToken != "" {
		return h.BootstrapToken, nil
	}
	if h.BootstrapTokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(h.BootstrapTokenFile)
	if err != nil {
		return "", fmt.Errorf("hubClientConnection.bootstrapTokenFile: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("hubClientConnection.bootstrapTokenFile %s: %w", h.BootstrapTokenFile, err)
	}
	return tok, nil
}

// Server configures the agent's HTTP endpoints, as gardenlet's server.healthProbes and server.metrics do. Both are
// plain HTTP without authentication, so they default to loopback; a port of 0 picks a free one (the agent logs it).
type Server struct {
	// HealthProbes is the host:port of /healthz and /readyz (default 127.0.0.1:2728, gardenlet's health port).
	HealthProbes string `json:"healthProbes,omitzero"`
	// Metrics is the host:port of /metrics (default 127.0.0.1:2729, gardenlet's metrics port). It may equal
	// HealthProbes; then one listener serves all three paths.
	Metrics string `json:"metrics,omitzero"`
}

// Tracing configures OpenTelemetry tracing. The OTEL_* environment variables of the OTLP exporter (endpoint,
// headers, TLS) apply as well; fields set here win.
type Tracing struct {
	// Enabled turns tracing on; off by default.
	Enabled bool `json:"enabled,omitzero"`
	// Endpoint is the OTLP gRPC collector's host:port; empty uses OTEL_EXPORTER_OTLP_ENDPOINT (else localhost:4317).
	Endpoint string `json:"endpoint,omitzero"`
	// Insecure sends spans without TLS.
	Insecure bool `json:"insecure,omitzero"`
	// SamplingRatio is the share of new traces sampled, in [0, 1] (default 1); spans whose parent was sampled are
	// always sampled (parent-based sampling), so one trace stays whole across the hub, the agent and extensions.
	SamplingRatio *float64 `json:"samplingRatio,omitzero"`
}
