package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func validManagedSeedSet() *seedmanagementv1alpha1.ManagedSeedSet {
	labels := map[string]string{"set": "soils"}
	return &seedmanagementv1alpha1.ManagedSeedSet{
		Metadata: meta("soils", "garden"),
		Spec: &seedmanagementv1alpha1.ManagedSeedSetSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: &seedmanagementv1alpha1.ManagedSeedTemplate{
				Metadata: &metav1.ObjectMeta{Labels: labels},
				Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Gardenlet: &seedmanagementv1alpha1.GardenletConfig{
					Config: gardenletConfig(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
						"seedConfig":{"metadata":{"labels":{"set":"soils"}}}}`),
				}},
			},
			ShootTemplate: &corev1beta1.ShootTemplate{Metadata: &metav1.ObjectMeta{Labels: labels}},
		},
	}
}

func TestManagedSeedSetValidation(t *testing.T) {
	mss := func(f func(*seedmanagementv1alpha1.ManagedSeedSet)) *seedmanagementv1alpha1.ManagedSeedSet {
		return with(validManagedSeedSet(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validManagedSeedSet()},
		{name: "example", obj: examplesOf(t, &seedmanagementv1alpha1.ManagedSeedSet{})[0]},
		{name: "namespace must be garden", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) { m.Metadata.Namespace = "garden-dev" }),
			paths: []string{"metadata.namespace"}},
		{name: "replicas not negative", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.Replicas = ptr(int32(-1))
			m.Spec.RevisionHistoryLimit = ptr(int32(-1))
		}), paths: []string{"spec.replicas", "spec.revisionHistoryLimit"}},
		{name: "zero replicas", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) { m.Spec.Replicas = ptr(int32(0)) })},
		{name: "selector required", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) { m.Spec.Selector = nil }), paths: []string{"spec.selector"}},
		{name: "selector not empty", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) { m.Spec.Selector = &metav1.LabelSelector{} }),
			paths: []string{"spec.selector"}},
		{name: "selector valid", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.Selector.MatchExpressions = []*metav1.LabelSelectorRequirement{{Key: "set", Operator: "Like"}}
		}), paths: []string{"spec.selector.matchExpressions[0].operator"}},
		{name: "selector must match the templates", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.Selector.MatchLabels = map[string]string{"set": "rocks"}
		}), paths: []string{
			"spec.shootTemplate.metadata.labels", "spec.template.metadata.labels",
			"spec.template.spec.gardenlet.config.seedConfig.metadata.labels",
		}},
		{name: "template names no shoot and has a seed template", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.Template.Spec.Shoot = &seedmanagementv1alpha1.Shoot{Name: "s"}
			m.Spec.Template.Spec.Gardenlet.Config = gardenletConfig(minimalGardenletConfig)
		}), paths: []string{"spec.template.spec.gardenlet.config.seedConfig", "spec.template.spec.shoot"}},
		{name: "update strategy", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.UpdateStrategy = &seedmanagementv1alpha1.UpdateStrategy{Type: ptr("Recreate")}
		}), paths: []string{"spec.updateStrategy.type"}},
		{name: "partition not negative", obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.UpdateStrategy = &seedmanagementv1alpha1.UpdateStrategy{RollingUpdate: &seedmanagementv1alpha1.RollingUpdateStrategy{Partition: ptr(int32(-2))}}
		}), paths: []string{"spec.updateStrategy.rollingUpdate.partition"}},
		{name: "selector and revisionHistoryLimit are immutable", old: validManagedSeedSet(), obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) {
			m.Spec.Selector.MatchExpressions = []*metav1.LabelSelectorRequirement{{Key: "set", Operator: "Exists"}}
			m.Spec.RevisionHistoryLimit = ptr(int32(3))
		}), paths: []string{"spec.revisionHistoryLimit", "spec.selector"}},
		{name: "replicas may change", old: validManagedSeedSet(), obj: mss(func(m *seedmanagementv1alpha1.ManagedSeedSet) { m.Spec.Replicas = ptr(int32(5)) })},
	}
	runCases(t, cases)
}

func TestManagedSeedSetDefaults(t *testing.T) {
	m := validManagedSeedSet()
	m.Spec.Replicas = nil
	if errs := validate(t, m, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if m.Spec.GetReplicas() != 1 || m.Spec.GetRevisionHistoryLimit() != 10 || m.Spec.GetUpdateStrategy().GetType() != "RollingUpdate" {
		t.Errorf("not defaulted: %v", m.Spec)
	}
}
