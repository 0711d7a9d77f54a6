package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func secretRef(name, namespace string) *metav1.ObjectReference {
	return &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: name, Namespace: namespace}
}

func validSeed() *corev1beta1.Seed {
	return &corev1beta1.Seed{
		Metadata: meta("s1", ""),
		Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local", Zones: []string{"a", "b"}},
			Networks: &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16", Nodes: ptr("10.3.0.0/16")},
			Dns: &corev1beta1.SeedDNS{Provider: &corev1beta1.SeedDNSProvider{
				Type: "aws-route53", CredentialsRef: secretRef("dns", "garden"),
			}},
			Ingress: &corev1beta1.Ingress{Domain: "ingress.example.com", Controller: &corev1beta1.IngressController{Kind: "nginx"}},
			Backup:  &corev1beta1.Backup{Provider: "local", CredentialsRef: secretRef("backup", "garden")},
		},
	}
}

func TestSeedValidation(t *testing.T) {
	seed := func(f func(*corev1beta1.Seed)) *corev1beta1.Seed { return with(validSeed(), f) }
	cases := []validationCase{
		{name: "valid", obj: validSeed()},
		{name: "example", obj: examplesOf(t, &corev1beta1.Seed{})[0]},
		{name: "minimal without ingress", obj: &corev1beta1.Seed{Metadata: meta("s1", ""), Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"},
			Networks: &corev1beta1.SeedNetworks{Pods: "10.1.0.0/16", Services: "10.2.0.0/16"},
			Dns:      &corev1beta1.SeedDNS{},
		}}},
		{name: "name is not a DNS label", obj: seed(func(s *corev1beta1.Seed) { s.Metadata.Name = "a.b" }), paths: []string{"metadata.name"}},
		{name: "unknown operation", obj: seed(func(s *corev1beta1.Seed) {
			s.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "explode"}
		}), paths: []string{"metadata.annotations[gardener.cloud/operation]"}},
		{name: "provider type and region required", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Provider.Type, s.Spec.Provider.Region = "", ""
			s.Spec.Backup.Region = ptr("local")
		}), paths: []string{"spec.provider.region", "spec.provider.type"}},
		{name: "duplicate zone", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Provider.Zones = []string{"a", "a"} }),
			paths: []string{"spec.provider.zones[1]"}},
		{name: "networks required", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks = nil }),
			paths: []string{"spec.networks.pods", "spec.networks.services"}},
		{name: "invalid CIDRs", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Networks.Pods, s.Spec.Networks.Nodes = "10.1.0.0/33", ptr("nodes")
			s.Spec.Networks.BlockCidrs = []string{"169.254.169.254/32", "x"}
		}), paths: []string{"spec.networks.blockCIDRs[1]", "spec.networks.nodes", "spec.networks.pods"}},
		{name: "services overlap pods", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks.Services = "10.1.128.0/17" }),
			paths: []string{"spec.networks.services"}},
		{name: "nodes overlap services", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks.Nodes = ptr("10.0.0.0/8") }),
			paths: []string{"spec.networks.nodes", "spec.networks.nodes"}},
		{name: "shoot defaults overlap", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Networks.ShootDefaults = &corev1beta1.ShootNetworks{Pods: ptr("10.1.0.0/24")}
		}), paths: []string{"spec.networks.shootDefaults.pods"}},
		{name: "reserved range", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks.Pods = "240.0.0.0/16" }),
			paths: []string{"spec.networks.pods"}},
		{name: "IPv6 network of an IPv4 seed", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks.Services = "fd00:10::/112" }),
			paths: []string{"spec.networks.services"}},
		{name: "unknown IP family", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Networks.IpFamilies = []string{"IPv5"} }),
			paths: []string{"spec.networks.ipFamilies[0]"}},
		{name: "taints: key required, key/value unique", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Taints = []*corev1beta1.SeedTaint{{Key: ""}, {Key: "a"}, {Key: "a", Value: ptr("1")}, {Key: "a"}}
		}), paths: []string{"spec.taints[0].key", "spec.taints[3]"}},
		{name: "dns provider incomplete", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Dns.Provider = &corev1beta1.SeedDNSProvider{}
		}), paths: []string{"spec.dns.provider.credentialsRef", "spec.dns.provider.type"}},
		{name: "dns credentials of an unsupported kind", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Dns.Provider.CredentialsRef = &metav1.ObjectReference{ApiVersion: "v1", Kind: "ConfigMap", Name: "dns"}
		}), paths: []string{"spec.dns.provider.credentialsRef", "spec.dns.provider.credentialsRef.namespace"}},
		{name: "dns internal and defaults", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Dns.Internal = &corev1beta1.SeedDNSProviderConfig{Type: "aws-route53", Domain: "Not_A_Domain", CredentialsRef: secretRef("i", "garden")}
			s.Spec.Dns.Defaults = []*corev1beta1.SeedDNSProviderConfig{
				{Type: "aws-route53", Domain: "a.example.com", CredentialsRef: secretRef("d", "garden")},
				{Domain: "a.example.com", CredentialsRef: secretRef("d", "garden")},
			}
		}), paths: []string{"spec.dns.defaults[1].domain", "spec.dns.defaults[1].type", "spec.dns.internal.domain"}},
		{name: "ingress needs a dns provider", obj: seed(func(s *corev1beta1.Seed) { s.Spec.Dns.Provider = nil }),
			paths: []string{"spec.dns.provider"}},
		{name: "ingress domain and controller", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Ingress = &corev1beta1.Ingress{Controller: &corev1beta1.IngressController{Kind: "traefik"}}
		}), paths: []string{"spec.ingress.controller.kind", "spec.ingress.domain"}},
		{name: "backup of another provider needs a region and credentials", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Backup = &corev1beta1.Backup{Provider: "aws"}
		}), paths: []string{"spec.backup.credentialsRef", "spec.backup.region"}},
		{name: "backup provider required", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Backup.Provider = ""
			s.Spec.Backup.Region = ptr("r")
		}), paths: []string{"spec.backup.provider"}},
		{name: "volume", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Volume = &corev1beta1.SeedVolume{MinimumSize: ptr("-1Gi"), Providers: []*corev1beta1.SeedVolumeProvider{
				{Purpose: "etcd", Name: "a"}, {Purpose: "etcd"},
			}}
		}), paths: []string{"spec.volume.minimumSize", "spec.volume.providers[1].name", "spec.volume.providers[1].purpose"}},
		{name: "settings", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Settings = &corev1beta1.SeedSettings{
				ExcessCapacityReservation: &corev1beta1.SeedSettingExcessCapacityReservation{Configs: []*corev1beta1.SeedSettingExcessCapacityReservationConfig{
					{Resources: map[string]string{"cpu": "-1"}, Tolerations: []*corev1beta1.PodToleration{{Key: "k", Operator: "Exists", Value: "v"}}},
				}},
				LoadBalancerServices: &corev1beta1.SeedSettingLoadBalancerServices{
					ExternalTrafficPolicy: ptr("Somewhere"),
					Zones:                 []*corev1beta1.SeedSettingLoadBalancerServicesZones{{Name: "a"}, {Name: "c"}, {Name: "a"}},
				},
			}
		}), paths: []string{
			"spec.settings.excessCapacityReservation.configs[0].resources[cpu]",
			"spec.settings.excessCapacityReservation.configs[0].tolerations[0].value",
			"spec.settings.loadBalancerServices.externalTrafficPolicy",
			"spec.settings.loadBalancerServices.zones[1].name",
			"spec.settings.loadBalancerServices.zones[2].name",
		}},
		{name: "zonal load balancer settings need two zones", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Provider.Zones = []string{"a"}
			s.Spec.Settings = &corev1beta1.SeedSettings{LoadBalancerServices: &corev1beta1.SeedSettingLoadBalancerServices{
				Zones: []*corev1beta1.SeedSettingLoadBalancerServicesZones{{Name: "a"}},
			}}
		}), paths: []string{"spec.settings.loadBalancerServices.zones"}},
		{name: "extensions", obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Extensions = []*corev1beta1.Extension{{Type: "a"}, {Type: "a"}, {}, {Type: "b", Disabled: ptr(true)}}
		}), paths: []string{"spec.extensions[1].type", "spec.extensions[2].type", "spec.extensions[3].disabled"}},
		{name: "networks, ingress domain and backup are immutable", old: validSeed(), obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Networks.Pods = "10.4.0.0/16"
			s.Spec.Networks.Nodes = ptr("10.5.0.0/16")
			s.Spec.Ingress.Domain = "other.example.com"
			s.Spec.Backup = nil
		}), paths: []string{"spec.backup", "spec.ingress.domain", "spec.networks.nodes", "spec.networks.pods"}},
		{name: "backup provider immutable", old: validSeed(), obj: seed(func(s *corev1beta1.Seed) {
			s.Spec.Backup.Provider = "aws"
			s.Spec.Backup.Region = ptr("eu")
		}), paths: []string{"spec.backup.provider", "spec.backup.region"}},
		{name: "operation cannot be replaced", old: seed(func(s *corev1beta1.Seed) {
			s.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "reconcile"}
		}), obj: seed(func(s *corev1beta1.Seed) {
			s.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "renew-kubeconfig"}
		}), paths: []string{"metadata.annotations[gardener.cloud/operation]"}},
		{name: "unchanged update", old: validSeed(), obj: validSeed()},
	}
	runCases(t, cases)
}

func TestSeedDefaults(t *testing.T) {
	s := validSeed()
	s.Spec.Settings = &corev1beta1.SeedSettings{Scheduling: &corev1beta1.SeedSettingScheduling{}}
	if errs := validate(t, s, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	st := s.Spec.Settings
	switch {
	case len(s.Spec.Networks.IpFamilies) != 1 || s.Spec.Networks.IpFamilies[0] != "IPv4":
		t.Errorf("ipFamilies not defaulted: %v", s.Spec.Networks.IpFamilies)
	case st.Scheduling.GetVisible():
		t.Errorf("scheduling.visible of a given scheduling section defaults to false")
	case !st.GetVerticalPodAutoscaler().GetEnabled() || !st.GetDependencyWatchdog().GetWeeder().GetEnabled() || !st.GetDependencyWatchdog().GetProber().GetEnabled():
		t.Errorf("settings not defaulted: %v", st)
	case st.GetTopologyAwareRouting() == nil || st.GetTopologyAwareRouting().GetEnabled():
		t.Errorf("topologyAwareRouting not defaulted to disabled: %v", st)
	case len(st.GetExcessCapacityReservation().GetConfigs()) != 1 || st.GetExcessCapacityReservation().GetConfigs()[0].GetResources()["memory"] != "6Gi":
		t.Errorf("excess capacity reservation not defaulted: %v", st.GetExcessCapacityReservation())
	case !st.GetLoadBalancerServices().GetZonalIngress().GetEnabled():
		t.Errorf("zonal ingress not defaulted: %v", st.GetLoadBalancerServices())
	}
}
