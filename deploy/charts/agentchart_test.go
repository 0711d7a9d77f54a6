package charts_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/charts"
)

const (
	agentRelease   = "trellis-agent"
	agentNamespace = "garden"
)

// testCA is a CA certificate for hub.caBundle (the agent validates the bundle).
var testCA = func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "trellis-hub-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}()

// agentValues are the least an agent needs: the hub, the seed's name and a bootstrap token.
func agentValues() map[string]any {
	return map[string]any{
		"hub":       map[string]any{"address": "hub.garden.svc:8444", "caBundle": testCA},
		"bootstrap": map[string]any{"token": "abcdef.0123456789abcdef"},
		"config": map[string]any{"seedConfig": map[string]any{
			"metadata": map[string]any{"name": "local"},
			"spec": map[string]any{
				"provider": map[string]any{"type": "local", "region": "local"},
				"ingress":  map[string]any{"domain": "ingress.local.seed.example.com", "controller": map[string]any{"kind": "nginx"}},
				"networks": map[string]any{"nodes": "10.0.0.0/16", "pods": "10.1.0.0/16", "services": "10.2.0.0/16"},
			},
		}},
	}
}

// agentHAValues use every option: the hub's CA and the token from existing Secrets, a priority class, the
// ServiceMonitor, metrics scraped from a monitoring namespace only, tuned client and controllers.
func agentHAValues() map[string]any {
	v := agentValues()
	v["hub"] = map[string]any{"address": "hub.example.com:8444", "caSecret": map[string]any{"name": "hub-ca", "key": "ca.crt"}}
	v["bootstrap"] = map[string]any{"existingSecret": "agent-bootstrap", "existingSecretKey": "token"}
	v["kubeconfigSecret"] = map[string]any{"namespace": "garden", "name": "agent-kubeconfig"}
	v["priorityClassName"] = "system-cluster-critical"
	v["serviceMonitor"] = map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}}
	v["networkPolicy"] = map[string]any{"enabled": true, "metricsFrom": []any{
		map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}},
	}}
	cfg := v["config"].(map[string]any)
	cfg["seedClientConnection"] = map[string]any{"qps": 200, "burst": 300}
	cfg["controllers"] = map[string]any{"shoot": map[string]any{"concurrentSyncs": 40}}
	cfg["hubClientConnection"] = map[string]any{"kubeconfigValidity": map[string]any{"validity": "240h"}}
	cfg["logLevel"] = "debug"
	return v
}

func TestAgentChartLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"default": agentValues(), "ha": agentHAValues()} {
		t.Run(name, func(t *testing.T) { lintChart(t, charts.TrellisAgent, agentNamespace, vals) })
	}
}

// TestAgentChartRender checks the rendered release: the objects, the agent's configuration (which the agent itself
// must accept), the pod's hardening, probes and listen addresses.
func TestAgentChartRender(t *testing.T) {
	for name, vals := range map[string]map[string]any{"default": agentValues(), "ha": agentHAValues()} {
		t.Run(name, func(t *testing.T) {
			objs := mustRenderChart(t, charts.TrellisAgent, agentRelease, agentNamespace, vals)
			want := []string{"ClusterRole/trellis.dev:system:trellis-agent:garden", "ClusterRoleBinding/trellis.dev:system:trellis-agent:garden",
				"ConfigMap/trellis-agent-config", "Deployment/trellis-agent", "NetworkPolicy/trellis-agent",
				"PodDisruptionBudget/trellis-agent", "Service/trellis-agent", "ServiceAccount/trellis-agent"}
			if name == "default" {
				want = append(want, "Secret/trellis-agent-bootstrap-token")
			} else {
				want = append(want, "ServiceMonitor/trellis-agent")
			}
			slices.Sort(want)
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Errorf("rendered %v\nwant     %v", got, want)
			}

			cm := find[*corev1.ConfigMap](t, objs, "trellis-agent-config")
			cfg, err := config.Decode([]byte(cm.Data["config.yaml"]))
			if err != nil {
				t.Fatalf("the agent refuses the chart's configuration: %v\n%s", err, cm.Data["config.yaml"])
			}
			cfg.Default()
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the chart's configuration is invalid: %v", err)
			}
			h := cfg.HubClientConnection
			if cfg.SeedName() != "local" || h.Address == "" || h.BootstrapTokenFile != "/etc/trellis-agent/bootstrap/token" ||
				cfg.SeedClientConnection.Kubeconfig != "" {
				t.Errorf("configuration: seed %q, hub %+v, seed kubeconfig %q", cfg.SeedName(), h, cfg.SeedClientConnection.Kubeconfig)
			}
			if name == "ha" && (h.CAFile != "/etc/trellis-agent/hub-ca/ca.crt" || h.KubeconfigSecret.Name != "agent-kubeconfig" ||
				*cfg.SeedClientConnection.QPS != 200 || *cfg.Controllers.Shoot.ConcurrentSyncs != 40 || cfg.LogLevel != "debug" ||
				h.KubeconfigValidity.Validity.Hours() != 240) {
				t.Errorf("configuration does not carry the values: %+v %+v", h, cfg.Controllers.Shoot)
			}
			if name == "default" && (h.CABundle == "" || h.KubeconfigSecret.String() != "garden/gardenlet-kubeconfig") {
				t.Errorf("configuration: CA bundle %q, kubeconfig secret %s", h.CABundle, h.KubeconfigSecret)
			}

			d := find[*appsv1.Deployment](t, objs, "trellis-agent")
			if *d.Spec.Replicas != 1 || d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
				t.Errorf("deployment: replicas %d, strategy %+v: want 1 and the new pod first", *d.Spec.Replicas, d.Spec.Strategy)
			}
			pod := d.Spec.Template.Spec
			checkPodSecurity(t, "agent", pod)
			c := pod.Containers[0]
			if c.Image != "local.trellis.dev/trellis-agent:dev" {
				t.Errorf("image %s", c.Image)
			}
			args := strings.Join(c.Args, " ")
			for _, a := range []string{"--health-probes-address=$(POD_IP):2728", "--metrics-address=$(POD_IP):2729"} {
				if !strings.Contains(args, a) {
					t.Errorf("args %q lack %s: the probes reach the pod's IP", args, a)
				}
			}
			if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("probes %s, %s", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
			}
			if pod.ServiceAccountName != "trellis-agent" {
				t.Errorf("service account %q", pod.ServiceAccountName)
			}
			pdb := find[*policyv1.PodDisruptionBudget](t, objs, "")
			if pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != agentRelease {
				t.Errorf("PDB selector %+v", pdb.Spec.Selector)
			}
			np := find[*networkingv1.NetworkPolicy](t, objs, "")
			if len(np.Spec.Ingress) != 2 || (name == "ha") != (len(np.Spec.Ingress[1].From) == 1) {
				t.Errorf("network policy ingress %+v", np.Spec.Ingress)
			}
		})
	}
}

// TestAgentChartRefusesBadValues: the schema and the templates' required values name what is wrong.
func TestAgentChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"no hub address", func(v map[string]any) { v["hub"] = map[string]any{} }, "address"},
		{"two replicas", func(v map[string]any) { v["replicaCount"] = 2 }, "replicaCount"},
		{"no seed name", func(v map[string]any) { v["config"] = map[string]any{"seedConfig": map[string]any{}} }, "config.seedConfig.metadata.name is required"},
		{"bad token", func(v map[string]any) { v["bootstrap"] = map[string]any{"token": "secret"} }, "/bootstrap/token"},
		{"server in config", func(v map[string]any) {
			v["config"].(map[string]any)["server"] = map[string]any{"metrics": ":1"}
		}, "/config/server"},
		{"misspelt value", func(v map[string]any) { v["serviceMonitr"] = map[string]any{} }, "serviceMonitr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := agentValues()
			tc.change(v)
			_, err := renderChart(t, charts.TrellisAgent, agentRelease, agentNamespace, v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// grant is one verb on one resource of one group.
type grant struct{ group, resource, verb string }

func (g grant) String() string { return fmt.Sprintf("%s %s/%s", g.verb, g.group, g.resource) }

func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[grant{g, res, v}] = true
				}
			}
		}
	}
	return out
}

// TestAgentRBACMatchesSeedAccess fails when the chart's ClusterRole grants a verb that agent.SeedAccess (the
// requests the agent's code makes, kept next to the code) does not list, or lacks one it lists. No rule may use a
// wildcard or name resources: the list is exact. With rbac.seedAPIProxy off the impersonation goes.
func TestAgentRBACMatchesSeedAccess(t *testing.T) {
	objs := mustRenderChart(t, charts.TrellisAgent, agentRelease, agentNamespace, agentValues())
	role := find[*rbacv1.ClusterRole](t, objs, "")
	for _, r := range role.Rules {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
			if s == "*" {
				t.Errorf("rule %+v uses a wildcard", r)
			}
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v names resources or URLs: agent.SeedAccess has no such rule", r)
		}
	}
	granted, used := grants(role.Rules), grants(agent.SeedRules())
	for g := range granted {
		if !used[g] {
			t.Errorf("the chart grants %s, which the agent never does (agent.SeedAccess)", g)
		}
	}
	for g := range used {
		if !granted[g] {
			t.Errorf("the chart lacks %s, which the agent does (agent.SeedAccess)", g)
		}
	}
	for _, r := range agent.SeedAccess {
		if r.Why == "" || len(r.Verbs) == 0 || len(r.Resources) == 0 {
			t.Errorf("agent.SeedAccess rule %+v: every rule says why", r)
		}
	}

	v := agentValues()
	v["rbac"] = map[string]any{"seedAPIProxy": false}
	role = find[*rbacv1.ClusterRole](t, mustRenderChart(t, charts.TrellisAgent, agentRelease, agentNamespace, v), "")
	for g := range grants(role.Rules) {
		if g.verb == "impersonate" {
			t.Errorf("rbac.seedAPIProxy=false still grants %s", g)
		}
	}
}
