package charts_test

import (
	"encoding/base64"
	"flag"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/seedtest"
)

const (
	hubRelease   = "trellis-hub"
	hubNamespace = "trellis-system"
)

// hubHAValues: an external etcd with TLS, three replicas, the serving certificate and the admin token from the
// operator's Secrets, extra names, the ServiceMonitor, agents admitted from anywhere but the API only from one
// namespace.
func hubHAValues() map[string]any {
	return map[string]any{
		"replicaCount": 3,
		"etcd": map[string]any{"external": map[string]any{
			"endpoints": []any{"https://etcd-0.etcd:2379", "https://etcd-1.etcd:2379", "https://etcd-2.etcd:2379"},
			"tls":       map[string]any{"secretName": "etcd-client"},
		}},
		"tls":            map[string]any{"existingSecret": "hub-tls"},
		"adminToken":     map[string]any{"existingSecret": "hub-admin", "existingSecretKey": "token"},
		"hosts":          []any{"hub.example.com"},
		"serviceMonitor": map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true, "mainFrom": []any{
			map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ops"}}},
		}},
		"components": "apiVersion: controllermanager.config.gardener.cloud/v1alpha1\nkind: ControllerManagerConfiguration\n",
		"extraArgs":  []any{"--max-token-lifetime=2160h"},
	}
}

func TestHubChartLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"default": nil, "ha": hubHAValues()} {
		t.Run(name, func(t *testing.T) { lintChart(t, charts.TrellisHub, hubNamespace, vals) })
	}
}

func TestHubChartRender(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		objs := mustRenderChart(t, charts.TrellisHub, hubRelease, hubNamespace, nil)
		want := []string{"NetworkPolicy/trellis-hub", "PodDisruptionBudget/trellis-hub", "Secret/trellis-hub-admin-token",
			"Secret/trellis-hub-encryption", "Service/trellis-hub", "Service/trellis-hub-headless", "ServiceAccount/trellis-hub",
			"StatefulSet/trellis-hub"}
		if got := kinds(objs); !slices.Equal(got, want) {
			t.Errorf("rendered %v\nwant     %v", got, want)
		}
		sts := find[*appsv1.StatefulSet](t, objs, "")
		if *sts.Spec.Replicas != 1 || len(sts.Spec.VolumeClaimTemplates) != 1 ||
			sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "10Gi" {
			t.Errorf("statefulset: replicas %d, claims %+v", *sts.Spec.Replicas, sts.Spec.VolumeClaimTemplates)
		}
		pod := sts.Spec.Template.Spec
		checkPodSecurity(t, "hub", pod)
		args := strings.Join(pod.Containers[0].Args, " ")
		for _, a := range []string{"--data-dir=/var/lib/trellis-hub", "--admin-token-file=", "--encryption-key-file=",
			"--host=trellis-hub.trellis-system.svc", "--grpc-listen=0.0.0.0:8444", "--tunnel-listen=0.0.0.0:8445"} {
			if !strings.Contains(args, a) {
				t.Errorf("args %q lack %s", args, a)
			}
		}
		if strings.Contains(args, "--etcd-endpoints") || strings.Contains(args, "--tls-cert-file") {
			t.Errorf("args %q: the default is the embedded etcd and a certificate of the hub's CA", args)
		}
		svc := find[*corev1.Service](t, objs, "trellis-hub")
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Name)
		}
		if !slices.Equal(ports, []string{"main", "agent", "tunnel"}) {
			t.Errorf("service ports %v, want main, agent and tunnel", ports)
		}
		// The generated Secrets hold what the hub accepts: a token of 48 characters, one 32-byte key.
		tok := find[*corev1.Secret](t, objs, "trellis-hub-admin-token").Data["token"]
		keys := string(find[*corev1.Secret](t, objs, "trellis-hub-encryption").Data["encryption-keys"])
		name, b64, _ := strings.Cut(strings.TrimSpace(keys), ":")
		key, err := base64.StdEncoding.DecodeString(b64)
		if len(tok) != 48 || name != "key1" || err != nil || len(key) != 32 {
			t.Errorf("generated token of %d bytes, encryption keys %q (%v)", len(tok), keys, err)
		}
	})
	t.Run("ha", func(t *testing.T) {
		objs := mustRenderChart(t, charts.TrellisHub, hubRelease, hubNamespace, hubHAValues())
		want := []string{"ConfigMap/trellis-hub-components", "Deployment/trellis-hub", "NetworkPolicy/trellis-hub",
			"PodDisruptionBudget/trellis-hub", "Secret/trellis-hub-encryption", "Service/trellis-hub", "ServiceAccount/trellis-hub",
			"ServiceMonitor/trellis-hub"}
		if got := kinds(objs); !slices.Equal(got, want) {
			t.Errorf("rendered %v\nwant     %v", got, want)
		}
		d := find[*appsv1.Deployment](t, objs, "")
		if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Affinity == nil || d.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
			t.Errorf("deployment: replicas %d, affinity %+v: want 3 spread over nodes", *d.Spec.Replicas, d.Spec.Template.Spec.Affinity)
		}
		pod := d.Spec.Template.Spec
		checkPodSecurity(t, "hub", pod)
		args := strings.Join(pod.Containers[0].Args, " ")
		for _, a := range []string{"--etcd-endpoints=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379,https://etcd-2.etcd:2379",
			"--etcd-ca=/etc/trellis-hub/etcd/ca.crt", "--etcd-cert=", "--etcd-key=", "--tls-cert-file=", "--tls-key-file=",
			"--host=hub.example.com", "--config=/etc/trellis-hub/config/components.yaml", "--max-token-lifetime=2160h"} {
			if !strings.Contains(args, a) {
				t.Errorf("args %q lack %s", args, a)
			}
		}
		for _, v := range pod.Volumes {
			if v.Name == "data" && v.EmptyDir == nil {
				t.Errorf("with an external etcd the data directory is an emptyDir, got %+v", v)
			}
			if v.Name == "admin-token" && v.Secret.SecretName != "hub-admin" {
				t.Errorf("admin token from %s, want the existing Secret", v.Secret.SecretName)
			}
		}
	})
}

// TestHubChartArgsAreTheHubs parses the container's arguments, with default and HA values, with trellis-hub's own flag
// set (hub.Config.AddFlags, plus the command's --log-level and --log-format) and validates the result: a flag the hub
// does not know, or a combination it refuses, fails here rather than in a crash-looping pod.
func TestHubChartArgsAreTheHubs(t *testing.T) {
	for name, vals := range map[string]map[string]any{"default": nil, "ha": hubHAValues()} {
		t.Run(name, func(t *testing.T) {
			var pod corev1.PodSpec
			objs := mustRenderChart(t, charts.TrellisHub, hubRelease, hubNamespace, vals)
			if name == "default" {
				pod = find[*appsv1.StatefulSet](t, objs, "").Spec.Template.Spec
			} else {
				pod = find[*appsv1.Deployment](t, objs, "").Spec.Template.Spec
			}
			fs := flag.NewFlagSet("trellis-hub", flag.ContinueOnError)
			var cfg hub.Config
			cfg.AddFlags(fs)
			fs.String("log-level", "", "")
			fs.String("log-format", "", "")
			var args []string
			for _, a := range pod.Containers[0].Args {
				args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "10.1.2.3"))
			}
			if err := fs.Parse(args); err != nil {
				t.Fatalf("trellis-hub refuses the chart's arguments %q: %v", args, err)
			}
			if fs.NArg() != 0 {
				t.Errorf("arguments left over: %q", fs.Args())
			}
			cfg.Default()
			if err := cfg.Validate(); err != nil {
				t.Errorf("trellis-hub refuses the chart's configuration: %v", err)
			}
			if name == "ha" && (len(cfg.EtcdEndpoints) != 3 || cfg.TLSCertFile == "" || cfg.TunnelListen == "" || cfg.TunnelPeerAddress != "10.1.2.3:8445") {
				t.Errorf("parsed %+v", cfg)
			}
		})
	}
}

func TestHubChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"replicas on the embedded etcd", map[string]any{"replicaCount": 2}, "replicaCount > 1 needs an external etcd"},
		{"endpoint without scheme", map[string]any{"etcd": map[string]any{"external": map[string]any{"endpoints": []any{"etcd:2379"}}}}, "/etcd/external/endpoints/0"},
		{"port out of range", map[string]any{"service": map[string]any{"ports": map[string]any{"main": 0, "agent": 8444, "tunnel": 8445}}}, "/service/ports/main"},
		{"misspelt value", map[string]any{"replicas": 2}, "replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, charts.TrellisHub, hubRelease, hubNamespace, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestChartsAcceptedBySeed creates every object the hub's and the agent's charts render, with default and HA values,
// in a real kube-apiserver with a server-side dry run: schema validation, defaulting and admission of the API server
// itself, not only of client-go's types. ServiceMonitors are skipped: the seed does not serve their CRD.
func TestChartsAcceptedBySeed(t *testing.T) {
	seed := seedtest.Start(t)
	for _, tc := range []struct {
		name, chart, release, ns string
		vals                     map[string]any
	}{
		{"hub default", charts.TrellisHub, hubRelease, hubNamespace, nil},
		{"hub ha", charts.TrellisHub, hubRelease, hubNamespace + "-ha", hubHAValues()},
		{"agent default", charts.TrellisAgent, agentRelease, agentNamespace, agentValues()},
		{"agent ha", charts.TrellisAgent, agentRelease, agentNamespace + "-ha", agentHAValues()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRenderChart(t, tc.chart, tc.release, tc.ns, tc.vals)
			skipped := dryRunAll(t, seed, tc.ns, objs)
			for _, s := range skipped {
				if !strings.HasPrefix(s, "ServiceMonitor/") {
					t.Errorf("%s was not tried: the seed does not serve its kind", s)
				}
			}
			t.Logf("%d objects accepted, skipped %v", len(objs)-len(skipped), skipped)
		})
	}
}
