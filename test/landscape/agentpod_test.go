package landscape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
)

// TestAgentPodConfiguration renders the trellis-agent chart with the landscape's values for a seed's agent pod: the
// configuration in the chart's ConfigMap is the one the agent process gets (agentConfiguration with AgentMutate),
// except for what belongs to the pod: the hub at the forwarded address with the CA inline, the bootstrap token from
// the chart's Secret, the in-cluster seed client and the pod's listen addresses.
func TestAgentPodConfiguration(t *testing.T) {
	dir := t.TempDir()
	ca := testCAFile(t, dir)
	l := &Landscape{Dir: dir, LogDir: dir, GRPCAddr: "127.0.0.1:8444", CAFile: ca, cfg: Config{
		BinDir: dir, TestBinDir: dir, ExtensionErrorThreshold: 3 * time.Second, Node: true,
		AgentMutate: func(seed string, c *config.AgentConfiguration) { c.LogLevel = "debug" },
	}}
	s := l.newSeed(SeedConfig{Name: "s1", Region: "r1"}, false)
	if err := os.MkdirAll(filepath.Dir(s.tokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.tokenFile, []byte("abcdef.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	values, err := l.agentPodValues(s, "local.trellis.dev/trellis-agent", "dev-0123", "10.226.3.1:8444")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := charts.Archive(charts.TrellisAgent)
	if err != nil {
		t.Fatal(err)
	}
	// Rendering needs no cluster: the address is never dialled.
	m, err := helmrelease.New(helmrelease.Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := m.Render(archive, AgentRelease, AgentNamespace, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got, err := configFromManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := l.agentConfiguration(s)
	l.cfg.AgentMutate(s.Name, want)
	want.HubClientConnection.Address = "10.226.3.1:8444"
	want.HubClientConnection.CAFile = ""
	caPEM, _ := os.ReadFile(ca)
	want.HubClientConnection.CABundle = string(caPEM)
	want.HubClientConnection.BootstrapTokenFile = "/etc/trellis-agent/bootstrap/token"
	want.HubClientConnection.KubeconfigSecret = config.SecretReference{Namespace: AgentNamespace, Name: "gardenlet-kubeconfig"}
	want.SeedClientConnection = got.SeedClientConnection // the chart's qps and burst, in-cluster
	want.Server = config.Server{}
	want.Default()
	got.Default()
	wj, _ := jsonv2.Marshal(want)
	gj, _ := jsonv2.Marshal(got)
	if string(wj) != string(gj) {
		t.Errorf("the pod's configuration differs from the process's:\n got %s\nwant %s", gj, wj)
	}
	if got.SeedClientConnection.Kubeconfig != "" || got.LogLevel != "debug" {
		t.Errorf("seed kubeconfig %q (want in-cluster), log level %q", got.SeedClientConnection.Kubeconfig, got.LogLevel)
	}
}

// configFromManifest returns the AgentConfiguration of the rendered ConfigMap, decoded as the agent decodes it.
func configFromManifest(manifest string) (*config.AgentConfiguration, error) {
	for _, doc := range strings.Split(manifest, "\n---") {
		if !strings.Contains(doc, "kind: ConfigMap") {
			continue
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
			return nil, err
		}
		return config.Decode([]byte(cm.Data["config.yaml"]))
	}
	return nil, os.ErrNotExist
}

func testCAFile(t *testing.T, dir string) string {
	t.Helper()
	const pemCA = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAZMRcwFQYDVQQDEw50cmVsbGlz\n-----END CERTIFICATE-----\n"
	f := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(f, []byte(pemCA), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
