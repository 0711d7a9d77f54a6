package landscape

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestHubAcceptsSeedAndExamples sends what the landscape sends to a real hub: the seeds' Secrets, the Seed as agents
// register it, and the examples, first without the shoot (ExamplesWithoutShoot), then all of them twice (the second
// time everything exists and is left alone).
func TestHubAcceptsSeedAndExamples(t *testing.T) {
	h := hubtest.Start(t)
	c := &hubClient{url: h.URL, token: h.Token, http: h.HTTP}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, b := range seedSecrets() {
		if _, err := c.create(ctx, "/api/v1/namespaces/garden/secrets", b); err != nil {
			t.Fatal(err)
		}
	}
	// The seed's and the examples' types, registered as the landscape registers provider-local before its agents.
	if _, err := c.create(ctx, "/apis/core.gardener.cloud/v1beta1/controllerregistrations", []byte(`{"metadata":{"name":"provider-local"},"spec":{"resources":[`+
		`{"kind":"ControlPlane","type":"local"},{"kind":"Infrastructure","type":"local"},{"kind":"Worker","type":"local"},{"kind":"BackupBucket","type":"local"},`+
		`{"kind":"BackupEntry","type":"local"},{"kind":"DNSRecord","type":"local"},{"kind":"Network","type":"local"},{"kind":"OperatingSystemConfig","type":"local"},`+
		`{"kind":"ContainerRuntime","type":"local"},{"kind":"Extension","type":"local"}]}}`)); err != nil {
		t.Fatal(err)
	}
	seed, err := kjson.Marshal(seedTemplate("local", "local", gardenerLocalNetworks))
	if err != nil {
		t.Fatal(err)
	}
	if created, err := c.create(ctx, "/apis/core.gardener.cloud/v1beta1/seeds", seed); err != nil || !created {
		t.Fatalf("create seed: created=%v err=%v", created, err)
	}

	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	// Without the shoot first (ExamplesWithoutShoot), then all: only the shoot is new.
	if err := applyExamples(ctx, c, logf, false); err != nil {
		t.Fatalf("apply without the shoot: %v", err)
	}
	exs, err := Examples()
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(exs)-1 || len(exs) != 6 {
		t.Fatalf("applied %d of %d examples without the shoot (want 5 of 6): %q", len(lines), len(exs), lines)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " created") || strings.Contains(l, "Shoot") {
			t.Errorf("apply without the shoot: %s", l)
		}
	}
	if code, body, err := c.do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local", nil); err != nil || code != http.StatusNotFound {
		t.Fatalf("the example shoot applied without the shoot: %d %s %v", code, body, err)
	}
	lines = nil
	if err := applyExamples(ctx, c, logf, true); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if len(lines) != len(exs) {
		t.Fatalf("applied %d of %d examples: %q", len(lines), len(exs), lines)
	}
	for _, l := range lines {
		if strings.Contains(l, "Shoot") != strings.HasSuffix(l, " created") {
			t.Errorf("first apply (only the shoot new): %s", l)
		}
	}
	lines = nil
	if err := applyExamples(ctx, c, logf, true); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " exists") {
			t.Errorf("second apply: %s", l)
		}
	}

	// ExampleShoot finds it among the examples.
	if ex, err := ExampleShoot(); err != nil || ex.Path()+"/"+ex.Name != "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local" {
		t.Errorf("ExampleShoot: %s/%s %v", ex.Path(), ex.Name, err)
	}
	// The shoot is what provider-local is asked for.
	code, body, err := c.do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("get shoot: %d %s %v", code, body, err)
	}
	var shoot struct {
		Spec struct {
			Provider struct {
				Type    string `json:"type"`
				Workers []struct {
					Machine struct {
						Image struct{ Name, Version string } `json:"image"`
					} `json:"machine"`
				} `json:"workers"`
			} `json:"provider"`
			Networking struct{ Type string }    `json:"networking"`
			Kubernetes struct{ Version string } `json:"kubernetes"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &shoot); err != nil {
		t.Fatal(err)
	}
	sp := shoot.Spec
	if sp.Provider.Type != "local" || sp.Networking.Type != "local" || sp.Kubernetes.Version != "1.35.0" ||
		len(sp.Provider.Workers) != 1 || sp.Provider.Workers[0].Machine.Image.Name != "local" {
		t.Errorf("shoot spec: %+v", sp)
	}
}

// TestAgentConfiguration checks that the agent's configuration file loads as the agent loads it, with the landscape's
// settings and the changes of AgentMutate.
func TestAgentConfiguration(t *testing.T) {
	dir := t.TempDir()
	l := &Landscape{Dir: dir, LogDir: dir, GRPCAddr: "127.0.0.1:8444", CAFile: "/ca.crt", cfg: Config{
		BinDir: dir, TestBinDir: dir, ExtensionErrorThreshold: 3 * time.Second,
		AgentMutate: func(seed string, c *config.AgentConfiguration) { c.LogLevel = "debug" },
	}}
	s := l.newSeed(SeedConfig{Name: "s1", Region: "r1"}, false)
	s.AgentConfig = filepath.Join(dir, "agent.yaml")
	if _, err := l.writeAgentConfig(s); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(s.AgentConfig)
	if err != nil {
		t.Fatal(err)
	}
	sh := c.Controllers.Shoot
	checks := []struct {
		name      string
		got, want any
	}{
		{"address", c.HubClientConnection.Address, "127.0.0.1:8444"},
		{"caFile", c.HubClientConnection.CAFile, "/ca.crt"},
		{"bootstrapTokenFile", c.HubClientConnection.BootstrapTokenFile, s.tokenFile},
		{"kubeconfig", c.SeedClientConnection.Kubeconfig, s.Kubeconfig},
		{"seed name", c.SeedName(), "s1"},
		{"region", c.SeedConfig.Seed.GetSpec().GetProvider().GetRegion(), "r1"},
		{"backup secret", c.SeedConfig.Seed.GetSpec().GetBackup().GetCredentialsRef().GetName(), BackupSecretName},
		{"internal domain", c.SeedConfig.Seed.GetSpec().GetDns().GetInternal().GetDomain(), InternalDomain},
		{"heartbeat", c.HeartbeatIntervalSeconds, int32(2)},
		{"retryMinDelay", sh.RetryMinDelay.Duration, time.Second},
		{"retryMaxDelay", sh.RetryMaxDelay.Duration, 10 * time.Second},
		{"extensionErrorThreshold", sh.ExtensionErrorThreshold.Duration, 3 * time.Second},
		{"logLevel (AgentMutate)", c.LogLevel, "debug"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}

	// An invalid result of AgentMutate is refused before the agent would see it.
	l.cfg.AgentMutate = func(_ string, c *config.AgentConfiguration) { c.HeartbeatIntervalSeconds = 1000 }
	if _, err := l.writeAgentConfig(s); err == nil || !strings.Contains(err.Error(), "heartbeatIntervalSeconds") {
		t.Errorf("invalid configuration: got %v", err)
	}
}

func TestLoopbackAddr(t *testing.T) {
	for _, tc := range []struct{ in, listenHost, dialHost string }{
		{"", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:0", "127.0.0.1", "127.0.0.1"},
		{"0.0.0.0:0", "0.0.0.0", "127.0.0.1"},
	} {
		listen, dial, err := loopbackAddr(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if !strings.HasPrefix(listen, tc.listenHost+":") || strings.HasSuffix(listen, ":0") ||
			dial != tc.dialHost+listen[strings.LastIndex(listen, ":"):] {
			t.Errorf("%q: listen %s, dial %s", tc.in, listen, dial)
		}
	}
	if listen, dial, err := loopbackAddr("127.0.0.1:8443"); err != nil || listen != "127.0.0.1:8443" || dial != listen {
		t.Errorf("fixed port: %s %s %v", listen, dial, err)
	}
}
