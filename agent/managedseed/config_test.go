package managedseed

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/agent/config"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func managedSeed(cfg string) *seedmanagementv1alpha1.ManagedSeed {
	ms := &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "soil"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "soil"},
			Gardenlet: &seedmanagementv1alpha1.GardenletConfig{}}}
	if cfg != "" {
		ms.Spec.Gardenlet.Config = &metav1.RawExtension{Raw: []byte(cfg)}
	}
	return ms
}

const seedSpecJSON = `{"provider":{"type":"local","region":"local"},"ingress":{"domain":"ingress.example.com","controller":{"kind":"nginx"}},` +
	`"dns":{"provider":{"type":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","namespace":"garden","name":"dns"}}},` +
	`"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"}}`

// TestAgentConfig: the new agent's configuration is the Seed template named as the ManagedSeed, with labels,
// annotations and log settings; fields the Seed API does not have are dropped, and the agent's own decoder accepts
// the result. A configuration without a Seed template is refused with the field named.
func TestAgentConfig(t *testing.T) {
	cfg, err := agentConfig(managedSeed(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",` +
		`"seedConfig":{"metadata":{"name":"ignored","labels":{"a":"b"},"annotations":{"c":"d"}},"spec":` +
		strings.Replace(seedSpecJSON, `"provider":{`, `"gone":true,"provider":{`, 1) + `},` +
		`"logLevel":"DEBUG","logFormat":"text","featureGates":{"X":true},"resources":{"capacity":{"shoots":"250"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := config.Decode(append([]byte(`{"apiVersion":"agent.trellis.dev/v1alpha1","kind":"AgentConfiguration","hubClientConnection":{"address":"hub:1"},`),
		b[1:]...))
	if err != nil {
		t.Fatalf("the agent refuses %s: %v", b, err)
	}
	s := ac.SeedConfig.Seed
	if s.GetMetadata().GetName() != "soil" || s.GetMetadata().GetLabels()["a"] != "b" || s.GetMetadata().GetAnnotations()["c"] != "d" ||
		s.GetSpec().GetIngress().GetDomain() != "ingress.example.com" || ac.LogLevel != "debug" || ac.LogFormat != "text" {
		t.Fatalf("configuration %s", b)
	}

	for _, tc := range []struct{ name, cfg, want string }{
		{"no config", "", "spec.gardenlet.config is required"},
		{"no seed template", `{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration"}`, "seedConfig.spec is required"},
		{"not JSON", `{`, "spec.gardenlet.config:"},
		{"bad seed spec", `{"seedConfig":{"spec":{"provider":"local"}}}`, "spec.gardenlet.config.seedConfig.spec:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentConfig(managedSeed(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// FuzzAgentConfig feeds arbitrary gardenlet configurations (a ManagedSeed's, written by users): agentConfig never
// panics, and what it accepts names the seed and holds a spec.
func FuzzAgentConfig(f *testing.F) {
	f.Add(`{"seedConfig":{"spec":` + seedSpecJSON + `}}`)
	f.Add(`{"seedConfig":{"metadata":{"labels":{"a":"b"}},"spec":{}},"logLevel":"info"}`)
	f.Add(`{"seedConfig":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := agentConfig(managedSeed(raw))
		if err != nil {
			return
		}
		sc, _ := cfg["seedConfig"].(map[string]any)
		md, _ := sc["metadata"].(map[string]any)
		if md["name"] != "soil" || sc["spec"] == nil {
			t.Fatalf("accepted %q as %v", raw, cfg)
		}
	})
}

// TestValuesImageVector: with mergeWithParent (Gardener's default) the new agent gets this agent's image vector as
// the chart's imageVector value; without it, or when this agent has none, the chart's default stays.
func TestValuesImageVector(t *testing.T) {
	const vector = "images:\n- name: etcd\n  repository: local.trellis.dev/etcd\n  tag: v3\n"
	cfg := `{"seedConfig":{"spec":` + seedSpecJSON + `}}`
	for _, tc := range []struct {
		name   string
		merge  bool
		parent string
		want   any
	}{
		{"merged", true, vector, vector},
		{"not merged", false, vector, nil},
		{"parent without a vector", true, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{cfg: Config{HubAddress: "hub:1", HubCA: func() []byte { return []byte("ca") }}}
			if tc.parent != "" {
				c.cfg.ImageVector = []byte(tc.parent)
			}
			ms := managedSeed(cfg)
			ms.Spec.Gardenlet.MergeWithParent = &tc.merge
			v, err := c.values(ms)
			if err != nil {
				t.Fatal(err)
			}
			if got := v["imageVector"]; got != tc.want {
				t.Errorf("imageVector %v, want %v", got, tc.want)
			}
		})
	}
}
