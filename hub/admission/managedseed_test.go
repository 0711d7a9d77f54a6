package admission_test

import (
	"encoding/json"
	"testing"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func gardenletConfig(s string) *metav1.RawExtension { return &metav1.RawExtension{Raw: []byte(s)} }

const minimalGardenletConfig = `{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration"}`

func validManagedSeed() *seedmanagementv1alpha1.ManagedSeed {
	return &seedmanagementv1alpha1.ManagedSeed{
		Metadata: meta("soil", "garden"),
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{
			Shoot: &seedmanagementv1alpha1.Shoot{Name: "soil"},
			Gardenlet: &seedmanagementv1alpha1.GardenletConfig{
				Bootstrap: ptr("ServiceAccount"),
				Config: gardenletConfig(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
					"seedConfig":{"metadata":{"labels":{"a":"b"}},"spec":{"provider":{"type":"local","region":"local"},
					"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"}}}}`),
			},
		},
	}
}

func TestManagedSeedValidation(t *testing.T) {
	ms := func(f func(*seedmanagementv1alpha1.ManagedSeed)) *seedmanagementv1alpha1.ManagedSeed {
		return with(validManagedSeed(), f)
	}
	config := func(s string) func(*seedmanagementv1alpha1.ManagedSeed) {
		return func(m *seedmanagementv1alpha1.ManagedSeed) { m.Spec.Gardenlet.Config = gardenletConfig(s) }
	}
	cases := []validationCase{
		{name: "valid", obj: validManagedSeed()},
		{name: "example", obj: examplesOf(t, &seedmanagementv1alpha1.ManagedSeed{})[0]},
		{name: "namespace must be garden", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) { m.Metadata.Namespace = "garden-dev" }),
			paths: []string{"metadata.namespace"}},
		{name: "shoot required", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) { m.Spec.Shoot = nil }), paths: []string{"spec.shoot"}},
		{name: "shoot name required", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) { m.Spec.Shoot.Name = "" }), paths: []string{"spec.shoot.name"}},
		{name: "unknown operation", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) {
			m.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "rotate"}
		}), paths: []string{"metadata.annotations[gardener.cloud/operation]"}},
		{name: "bootstrap mode", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) { m.Spec.Gardenlet.Bootstrap = ptr("Magic") }),
			paths: []string{"spec.gardenlet.bootstrap"}},
		{name: "deployment", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) {
			m.Spec.Gardenlet.Deployment = &seedmanagementv1alpha1.GardenletDeployment{
				ReplicaCount: ptr(int32(-1)), ServiceAccountName: ptr("Bad_Name"),
				Image:     &seedmanagementv1alpha1.Image{Repository: ptr(""), PullPolicy: ptr("Sometimes")},
				PodLabels: map[string]string{"bad key": "v"},
			}
		}), paths: []string{
			"spec.gardenlet.deployment.image.pullPolicy", "spec.gardenlet.deployment.image.repository",
			"spec.gardenlet.deployment.podLabels", "spec.gardenlet.deployment.replicaCount", "spec.gardenlet.deployment.serviceAccountName",
		}},
		{name: "config must be a GardenletConfiguration", obj: ms(config(`{"apiVersion":"v1","kind":"ConfigMap"}`)),
			paths: []string{"spec.gardenlet.config"}},
		{name: "seed name is set by the controller", obj: ms(config(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
			"seedConfig":{"metadata":{"name":"soil"}}}`)), paths: []string{"spec.gardenlet.config.seedConfig.metadata.name"}},
		{name: "seed template", obj: ms(config(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
			"seedConfig":{"spec":{"networks":{"pods":"10.1.0.0/16","services":"10.1.0.0/24"}}}}`)),
			paths: []string{"spec.gardenlet.config.seedConfig.spec.networks.services"}},
		{name: "no kubeconfig with bootstrapping", obj: ms(config(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
			"gardenClientConnection":{"kubeconfig":"apiVersion: v1"}}`)), paths: []string{"spec.gardenlet.config.gardenClientConnection.kubeconfig"}},
		{name: "kubeconfig without bootstrapping and merging", obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) {
			m.Spec.Gardenlet.Bootstrap = ptr("None")
			m.Spec.Gardenlet.MergeWithParent = ptr(false)
			m.Spec.Gardenlet.Config = gardenletConfig(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
				"gardenClientConnection":{"kubeconfigSecret":{"name":"k","namespace":"garden"}}}`)
		}), paths: []string{"spec.gardenlet.config.gardenClientConnection.kubeconfig", "spec.gardenlet.config.gardenClientConnection.kubeconfigSecret"}},
		{name: "shoot, bootstrap and mergeWithParent are immutable", old: validManagedSeed(), obj: ms(func(m *seedmanagementv1alpha1.ManagedSeed) {
			m.Spec.Shoot.Name = "other"
			m.Spec.Gardenlet.Bootstrap = ptr("BootstrapToken")
			m.Spec.Gardenlet.MergeWithParent = ptr(false)
		}), paths: []string{"spec.gardenlet.bootstrap", "spec.gardenlet.mergeWithParent", "spec.shoot.name"}},
		{name: "config may change", old: validManagedSeed(), obj: ms(config(minimalGardenletConfig))},
	}
	runCases(t, cases)
}

func TestManagedSeedDefaults(t *testing.T) {
	m := validManagedSeed()
	m.Spec.Gardenlet.Bootstrap = nil
	if errs := validate(t, m, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	g := m.Spec.Gardenlet
	d := g.GetDeployment()
	switch {
	case g.GetBootstrap() != "BootstrapToken" || !g.GetMergeWithParent():
		t.Errorf("bootstrap/mergeWithParent not defaulted: %v", g)
	case d.GetReplicaCount() != 2 || d.GetRevisionHistoryLimit() != 2 || !d.GetEnableHealthProbes() || d.GetImage().GetPullPolicy() != "IfNotPresent":
		t.Errorf("deployment not defaulted: %v", d)
	}
	var cfg struct {
		APIVersion string `json:"apiVersion"`
		Resources  struct {
			Capacity map[string]string `json:"capacity"`
		} `json:"resources"`
		SeedConfig struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"seedConfig"`
	}
	if err := json.Unmarshal(g.GetConfig().GetRaw(), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Resources.Capacity["shoots"] != "250" || cfg.SeedConfig.Metadata.Labels["a"] != "b" || cfg.APIVersion == "" {
		t.Errorf("config not defaulted or not kept: %s", g.GetConfig().GetRaw())
	}
}
