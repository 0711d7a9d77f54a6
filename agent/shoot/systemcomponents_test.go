package shoot

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestServiceIP: the cluster DNS is the 10th address of the shoot's service network and Service default/kubernetes
// the first (Gardener's), with the default network when the shoot names none; a network too small is an error.
func TestServiceIP(t *testing.T) {
	op := testOperation(&corev1beta1.ShootSpec{})
	for n, want := range map[int]string{clusterDNSIndex: "100.64.0.10", apiServiceIndex: "100.64.0.1"} {
		if got, err := op.serviceIP(n); err != nil || got.String() != want {
			t.Errorf("serviceIP(%d) of the default network: %v %v, want %s", n, got, err, want)
		}
	}
	op.shoot.Spec.Networking = &corev1beta1.Networking{Services: proto.String("10.4.0.17/16")}
	if got, err := op.serviceIP(clusterDNSIndex); err != nil || got.String() != "10.4.0.10" {
		t.Errorf("serviceIP of 10.4.0.17/16: %v %v, want 10.4.0.10", got, err)
	}
	op.shoot.Spec.Networking.Services = proto.String("10.4.0.0/29")
	if _, err := op.serviceIP(clusterDNSIndex); err == nil || !strings.Contains(err.Error(), "no address number 10") {
		t.Errorf("a /29 has no 10th address: %v", err)
	}
	op.shoot.Spec.Networking.Services = proto.String("nonsense")
	if _, err := op.serviceIP(clusterDNSIndex); err == nil {
		t.Error("a network that is none gave an address")
	}
}

// TestKubeletClusterDNS: the pools' kubelet configuration names the shoot's cluster DNS, which the machines read.
func TestKubeletClusterDNS(t *testing.T) {
	op := testOperation(&corev1beta1.ShootSpec{Kubernetes: &corev1beta1.Kubernetes{Version: "1.31.1"}})
	osc := &extensionsv1alpha1.OperatingSystemConfig{}
	op.oscSpec(osc, &corev1beta1.Worker{Name: "pool", Machine: &corev1beta1.Machine{Image: &corev1beta1.ShootMachineImage{Name: "local"}}},
		extensionsv1alpha1.OperatingSystemConfigPurposeProvision, "", "100.64.0.10")
	var cfg struct {
		Kind          string   `json:"kind"`
		ClusterDNS    []string `json:"clusterDNS"`
		ClusterDomain string   `json:"clusterDomain"`
	}
	for _, f := range osc.Spec.Files {
		if f.Path == extensionsv1alpha1.KubeletConfigPath {
			if err := yaml.Unmarshal([]byte(f.Content.Inline.Data), &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg.Kind != "KubeletConfiguration" || len(cfg.ClusterDNS) != 1 || cfg.ClusterDNS[0] != "100.64.0.10" || cfg.ClusterDomain != "cluster.local" {
		t.Errorf("kubelet configuration: %+v, want clusterDNS [100.64.0.10] and clusterDomain cluster.local", cfg)
	}
}

// TestKubeProxyDaemonSet: a pool's kube-proxy runs on the pool's nodes only, in their network namespace, privileged,
// with the configuration's checksum on its pods; its configuration is iptables mode over the shoot's pod network.
func TestKubeProxyDaemonSet(t *testing.T) {
	ds := kubeProxyDaemonSet("a", "img:v1", "abc", map[string]string{"app": "kubernetes", "role": "proxy"})
	spec := ds.Spec.Template.Spec
	switch {
	case *ds.Name != "kube-proxy-a" || *ds.Namespace != "kube-system":
		t.Errorf("name %s/%s", *ds.Namespace, *ds.Name)
	case spec.NodeSelector[labelWorkerPool] != "a" || ds.Spec.Selector.MatchLabels["pool"] != "a":
		t.Errorf("not bound to pool a: node selector %v, selector %v", spec.NodeSelector, ds.Spec.Selector.MatchLabels)
	case spec.HostNetwork == nil || !*spec.HostNetwork:
		t.Error("not on the host network")
	case len(spec.Containers) != 1 || *spec.Containers[0].Image != "img:v1" || !*spec.Containers[0].SecurityContext.Privileged:
		t.Errorf("container: %+v", spec.Containers)
	case ds.Spec.Template.Annotations["checksum/config"] != "abc":
		t.Errorf("pod annotations %v", ds.Spec.Template.Annotations)
	}
	cfg := kubeProxyComponentConfig("100.96.0.0/11")
	for _, want := range []string{"mode: iptables", "clusterCIDR: 100.96.0.0/11", "kubeconfig: /var/lib/kube-proxy-kubeconfig/kubeconfig"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("configuration lacks %q:\n%s", want, cfg)
		}
	}
	if kc := kubeProxyKubeconfig("https://10.0.0.1:443"); !strings.Contains(kc, "server: https://10.0.0.1:443") || !strings.Contains(kc, "tokenFile: "+serviceAccountDir+"/token") {
		t.Errorf("kubeconfig:\n%s", kc)
	}
}

// TestDaemonSetReady: a DaemonSet is ready when every scheduled pod is updated and ready; one rolling out is
// progressing, one with a pod that is not ready is not.
func TestDaemonSetReady(t *testing.T) {
	ds := func(gen, observed int64, desired, updated, ready int32) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired,
			UpdatedNumberScheduled: updated, NumberReady: ready, NumberUnavailable: desired - ready}}
		d.Generation = gen
		return d
	}
	for name, tc := range map[string]struct {
		ds                *appsv1.DaemonSet
		ready, rollingOut bool
	}{
		"ready":         {ds: ds(2, 2, 1, 1, 1), ready: true},
		"no nodes":      {ds: ds(1, 1, 0, 0, 0), ready: true},
		"not observed":  {ds: ds(3, 2, 1, 1, 1), rollingOut: true},
		"rolling out":   {ds: ds(2, 2, 2, 1, 2), rollingOut: true},
		"pod not ready": {ds: ds(2, 2, 2, 2, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			ok, why := ready(tc.ds)
			if ok != tc.ready || (!ok && why == "") {
				t.Errorf("ready: %v %q, want %v", ok, why, tc.ready)
			}
			if !tc.ready && rollingOut(tc.ds) != tc.rollingOut {
				t.Errorf("rollingOut: %v, want %v", !tc.rollingOut, tc.rollingOut)
			}
		})
	}
}

// TestSystemComponentsProbesTolerateLoad: kube-proxy's and CoreDNS's probes allow a loaded node's slow answers, as the
// control plane's do (test/shootcontrolplane's startupGuarded): at least 10 s an answer, and half a minute of
// failures before a probe takes the pod out of its Service or restarts it.
func TestSystemComponentsProbesTolerateLoad(t *testing.T) {
	containers := map[string]corev1ac.ContainerApplyConfiguration{
		"kube-proxy": kubeProxyDaemonSet("a", "img:v1", "abc", nil).Spec.Template.Spec.Containers[0],
		"coredns":    coreDNSDeployment("img:v1", "abc", nil, nil).Spec.Template.Spec.Containers[0],
	}
	or := func(v *int32, def int32) int32 { // the API's defaults of a field left out
		if v == nil {
			return def
		}
		return *v
	}
	for name, c := range containers {
		for kind, pr := range map[string]*corev1ac.ProbeApplyConfiguration{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if pr == nil {
				t.Errorf("%s: no %s probe", name, kind)
				continue
			}
			timeout, acts := or(pr.TimeoutSeconds, 1), time.Duration(or(pr.PeriodSeconds, 10)*or(pr.FailureThreshold, 3))*time.Second
			if timeout < 10 || acts < 30*time.Second {
				t.Errorf("%s: %s probe allows %d s an answer and acts after %v of failures, want at least 10 s and 30s", name, kind, timeout, acts)
			}
		}
	}
}
