package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/proto/kjson"
)

const header = "apiVersion: agent.trellis.dev/v1alpha1\nkind: AgentConfiguration\n"

// minimal is the smallest valid configuration.
const minimal = header + `hubClientConnection:
  address: hub.example.com:8443
seedConfig:
  metadata:
    name: local
  spec:
    provider:
      type: local
      region: local
`

func TestLoadExample(t *testing.T) {
	c, err := config.Load("testdata/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := c.HubClientConnection
	if h.Address != "hub.example.com:8443" || h.CAFile != "/etc/trellis-agent/hub-ca.crt" || h.BootstrapTokenFile != "/etc/trellis-agent/bootstrap-token" {
		t.Fatalf("hubClientConnection = %+v", h)
	}
	if c.SeedName() != "local" || c.SeedConfig.Seed.GetSpec().GetProvider().GetType() != "local" ||
		c.SeedConfig.Seed.GetSpec().GetNetworks().GetPods() != "10.1.0.0/16" || c.SeedConfig.Seed.GetMetadata().GetLabels()["base"] != "kind" {
		t.Fatalf("seedConfig = %v", c.SeedConfig.Seed)
	}
	if c.HubClientConnection.KubeconfigValidity.Validity.Duration != 720*time.Hour || c.HeartbeatInterval() != 2*time.Second {
		t.Fatalf("validity %v, heartbeat %v", c.HubClientConnection.KubeconfigValidity.Validity, c.HeartbeatInterval())
	}
}

func TestDefaults(t *testing.T) {
	c, err := config.Decode([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	i := func(v int32) *int32 { return &v }
	want := config.HubClientConnection{
		Address:          "hub.example.com:8443",
		KubeconfigSecret: config.SecretReference{Namespace: "garden", Name: "gardenlet-kubeconfig"},
		KubeconfigValidity: config.KubeconfigValidity{
			Validity: d(30 * 24 * time.Hour), AutoRotationJitterPercentageMin: i(70), AutoRotationJitterPercentageMax: i(90),
		},
	}
	if diff := cmp.Diff(want, c.HubClientConnection); diff != "" {
		t.Fatalf("hubClientConnection (-want +got):\n%s", diff)
	}
	wantB := config.ReconnectBackoff{InitialDelay: d(200 * time.Millisecond), MaxDelay: d(30 * time.Second), ResetAfter: d(time.Minute)}
	if diff := cmp.Diff(wantB, c.ReconnectBackoff); diff != "" {
		t.Fatalf("reconnectBackoff (-want +got):\n%s", diff)
	}
	if c.HeartbeatIntervalSeconds != 2 || c.LogLevel != "info" || c.LogFormat != "json" || c.SeedClientConnection.Kubeconfig != "" {
		t.Fatalf("defaults: heartbeat %d, log %s/%s", c.HeartbeatIntervalSeconds, c.LogLevel, c.LogFormat)
	}
	// Defaulting twice changes nothing; set fields are kept.
	before := *c
	c.Default()
	if diff := cmp.Diff(before.HubClientConnection, c.HubClientConnection); diff != "" {
		t.Fatalf("second Default changed (-first +second):\n%s", diff)
	}
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, path, msg string
	}{
		{"unknown field", header + "hubClientConnection:\n  adress: x\n", "hubClientConnection.adress", `unknown field "adress"`},
		{"unknown top-level", header + "seedClientConection: {}\n", "seedClientConection", "unknown field"},
		{"case matters", header + "HeartbeatIntervalSeconds: 3\n", "HeartbeatIntervalSeconds", "unknown field"},
		{"bad duration", header + "hubClientConnection:\n  kubeconfigValidity:\n    validity: 3x\n", "hubClientConnection.kubeconfigValidity.validity", "3x"},
		{"type mismatch", header + "heartbeatIntervalSeconds: abc\n", "heartbeatIntervalSeconds", "cannot decode JSON string"},
		{"seed unknown field", header + "seedConfig:\n  spec:\n    provider:\n      tpye: x\n", "seedConfig.spec.provider.tpye", "unknown field"},
		{"seed list element", header + "seedConfig:\n  spec:\n    provider:\n      zones: [1]\n", "seedConfig.spec.provider.zones[0]", "string"},
		{"wrong kind", "apiVersion: agent.trellis.dev/v1alpha1\nkind: GardenletConfiguration\n", "kind", "AgentConfiguration"},
		{"no apiVersion", "kind: AgentConfiguration\n", "apiVersion", "agent.trellis.dev/v1alpha1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Decode([]byte(tc.yaml))
			var fe *kjson.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want a *kjson.FieldError", err, err)
			}
			if fe.Path != tc.path || !strings.Contains(fe.Error(), tc.msg) {
				t.Fatalf("error %q at %q, want %q mentioning %q", fe.Error(), fe.Path, tc.path, tc.msg)
			}
		})
	}
	if _, err := config.Decode([]byte(header + "kind: AgentConfiguration\n")); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Fatalf("duplicate key: %v", err)
	}
	if _, err := config.Decode([]byte("[]")); err == nil {
		t.Fatal("a list decoded")
	}
	if !errors.Is(mustErr(t, header+"x: 1\n"), kjson.ErrUnknownField) {
		t.Fatal("unknown field error does not wrap kjson.ErrUnknownField")
	}
}

func mustErr(t *testing.T, y string) error {
	t.Helper()
	_, err := config.Decode([]byte(y))
	if err == nil {
		t.Fatal("no error")
	}
	return err
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *config.AgentConfiguration)
		want   []string // field paths in the error
	}{
		{"valid", func(*config.AgentConfiguration) {}, nil},
		{"no address", func(c *config.AgentConfiguration) { c.HubClientConnection.Address = "" }, []string{"hubClientConnection.address"}},
		{"address without port", func(c *config.AgentConfiguration) { c.HubClientConnection.Address = "hub.example.com" }, []string{"hubClientConnection.address"}},
		{"address bad port", func(c *config.AgentConfiguration) { c.HubClientConnection.Address = "hub:99999" }, []string{"hubClientConnection.address"}},
		{"both CAs", func(c *config.AgentConfiguration) {
			c.HubClientConnection.CAFile, c.HubClientConnection.CABundle = "/ca", "x"
		}, []string{"hubClientConnection.caBundle"}},
		{"bad CA bundle", func(c *config.AgentConfiguration) { c.HubClientConnection.CABundle = "not pem" }, []string{"hubClientConnection.caBundle"}},
		{"both tokens", func(c *config.AgentConfiguration) {
			c.HubClientConnection.BootstrapToken, c.HubClientConnection.BootstrapTokenFile = "abcdef.0123456789abcdef", "/t"
		}, []string{"hubClientConnection.bootstrapTokenFile"}},
		{"bad token", func(c *config.AgentConfiguration) { c.HubClientConnection.BootstrapToken = "nodot" }, []string{"hubClientConnection.bootstrapToken"}},
		{"bad secret ref", func(c *config.AgentConfiguration) {
			c.HubClientConnection.KubeconfigSecret = config.SecretReference{Namespace: "Garden", Name: "a_b"}
		}, []string{"hubClientConnection.kubeconfigSecret.namespace", "hubClientConnection.kubeconfigSecret.name"}},
		{"short validity", func(c *config.AgentConfiguration) {
			c.HubClientConnection.KubeconfigValidity.Validity = &metav1.Duration{Duration: 5 * time.Minute}
		}, []string{"hubClientConnection.kubeconfigValidity.validity"}},
		{"jitter out of range", func(c *config.AgentConfiguration) {
			lo, hi := int32(0), int32(101)
			c.HubClientConnection.KubeconfigValidity.AutoRotationJitterPercentageMin = &lo
			c.HubClientConnection.KubeconfigValidity.AutoRotationJitterPercentageMax = &hi
		}, []string{"autoRotationJitterPercentageMin", "autoRotationJitterPercentageMax"}},
		{"jitter inverted", func(c *config.AgentConfiguration) {
			lo, hi := int32(90), int32(70)
			c.HubClientConnection.KubeconfigValidity.AutoRotationJitterPercentageMin = &lo
			c.HubClientConnection.KubeconfigValidity.AutoRotationJitterPercentageMax = &hi
		}, []string{"autoRotationJitterPercentageMin: Invalid value: 90: must not exceed"}},
		{"no seed", func(c *config.AgentConfiguration) { c.SeedConfig.Seed = nil }, []string{"seedConfig: Required"}},
		{"seed name", func(c *config.AgentConfiguration) { c.SeedConfig.Seed.Metadata.Name = "Local_1" }, []string{"seedConfig.metadata.name"}},
		{"seed namespace", func(c *config.AgentConfiguration) { c.SeedConfig.Seed.Metadata.Namespace = "garden" }, []string{"seedConfig.metadata.namespace"}},
		{"seed kind", func(c *config.AgentConfiguration) { c.SeedConfig.Seed.Kind = "Shoot" }, []string{"seedConfig.kind"}},
		{"heartbeat", func(c *config.AgentConfiguration) { c.HeartbeatIntervalSeconds = -1 }, []string{"heartbeatIntervalSeconds"}},
		{"backoff", func(c *config.AgentConfiguration) {
			c.ReconnectBackoff.InitialDelay = &metav1.Duration{Duration: time.Minute}
			c.ReconnectBackoff.ResetAfter = &metav1.Duration{}
		}, []string{"reconnectBackoff.maxDelay", "reconnectBackoff.resetAfter"}},
		{"logging", func(c *config.AgentConfiguration) { c.LogLevel, c.LogFormat = "trace", "xml" }, []string{"logLevel", "logFormat"}},
		{"shoot controller", func(c *config.AgentConfiguration) {
			n := int32(0)
			c.Controllers.Shoot.ConcurrentSyncs = &n
			c.Controllers.Shoot.SyncPeriod = &metav1.Duration{Duration: -time.Second}
			c.Controllers.Shoot.RetryMaxDelay = &metav1.Duration{Duration: time.Second}
			c.Controllers.ShootCare.SyncPeriod = &metav1.Duration{}
		}, []string{"controllers.shoot.concurrentSyncs", "controllers.shoot.syncPeriod", "controllers.shoot.retryMaxDelay: Invalid value: \"1s\": must not be less than retryMinDelay", "controllers.shootCare.syncPeriod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Decode([]byte(minimal))
			if err != nil {
				t.Fatal(err)
			}
			c.Default()
			tc.mutate(c)
			err = c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("valid, want errors at %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestTokenAndCAFromFiles(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("abcdef.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := config.HubClientConnection{BootstrapTokenFile: tokenFile, CAFile: filepath.Join(dir, "missing")}
	tok, err := h.Token()
	if err != nil || tok != "abcdef.0123456789abcdef" {
		t.Fatalf("Token() = %q, %v", tok, err)
	}
	if err := os.WriteFile(tokenFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Token(); err == nil || !strings.Contains(err.Error(), "bootstrapTokenFile") {
		t.Fatalf("malformed token file: %v", err)
	}
	if _, err := h.CAPEM(); err == nil || !strings.Contains(err.Error(), "caFile") {
		t.Fatalf("missing CA file: %v", err)
	}
	if tok, err := (&config.HubClientConnection{}).Token(); tok != "" || err != nil {
		t.Fatalf("no token configured: %q, %v", tok, err)
	}
}

func TestLoadReportsPathAndValidation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(header+"heartbeatIntervalSeconds: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "hubClientConnection.address") {
		t.Fatalf("Load: %v", err)
	}
}

// The example in docs/agent.md is a valid configuration.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/agent.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/agent.md has no yaml example")
	}
	c, err := config.Decode([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.SeedName() != "local" || c.HubClientConnection.BootstrapTokenFile == "" {
		t.Fatalf("example decoded to %+v", c.HubClientConnection)
	}
}
