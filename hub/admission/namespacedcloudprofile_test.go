package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

func validNamespacedCloudProfile() *corev1beta1.NamespacedCloudProfile {
	return &corev1beta1.NamespacedCloudProfile{
		Metadata: meta("custom", "garden-dev"),
		Spec: &corev1beta1.NamespacedCloudProfileSpec{
			Parent: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{
				{Version: "1.34.7"},
			}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux"}},
			MachineTypes:  []*corev1beta1.MachineType{{Name: "m6.large", Cpu: "4", Gpu: "0", Memory: "16Gi"}},
		},
	}
}

func TestNamespacedCloudProfileValidation(t *testing.T) {
	ncp := func(f func(*corev1beta1.NamespacedCloudProfile)) *corev1beta1.NamespacedCloudProfile {
		return with(validNamespacedCloudProfile(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validNamespacedCloudProfile()},
		{name: "parent only", obj: &corev1beta1.NamespacedCloudProfile{Metadata: meta("p", "garden-dev"), Spec: &corev1beta1.NamespacedCloudProfileSpec{
			Parent: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
		}}},
		{name: "parent required", obj: ncp(func(n *corev1beta1.NamespacedCloudProfile) { n.Spec.Parent = nil }),
			paths: []string{"spec.parent.kind", "spec.parent.name"}},
		{name: "parent must be a CloudProfile", obj: ncp(func(n *corev1beta1.NamespacedCloudProfile) { n.Spec.Parent.Kind = "NamespacedCloudProfile" }),
			paths: []string{"spec.parent.kind"}},
		{name: "kubernetes versions: no classification, semantic, unique", obj: ncp(func(n *corev1beta1.NamespacedCloudProfile) {
			n.Spec.Kubernetes.Versions = append(n.Spec.Kubernetes.Versions,
				&corev1beta1.ExpirableVersion{Version: "1.34.7"},
				&corev1beta1.ExpirableVersion{Version: "1.35"},
				&corev1beta1.ExpirableVersion{Version: "1.33.1", Classification: ptr("supported")},
			)
		}), paths: []string{"spec.kubernetes.versions[1].version", "spec.kubernetes.versions[2].version", "spec.kubernetes.versions[3].classification"}},
		{name: "machine images and types", obj: ncp(func(n *corev1beta1.NamespacedCloudProfile) {
			n.Spec.MachineImages = append(n.Spec.MachineImages, &corev1beta1.MachineImage{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{Version: "not-semver"}}})
			n.Spec.MachineTypes = append(n.Spec.MachineTypes, &corev1beta1.MachineType{Name: "m6.large", Memory: "lots"})
		}), paths: []string{"spec.machineImages[1].name", "spec.machineImages[1].versions[0].version", "spec.machineTypes[1].memory", "spec.machineTypes[1].name"}},
		{name: "parent is immutable", old: validNamespacedCloudProfile(), obj: ncp(func(n *corev1beta1.NamespacedCloudProfile) { n.Spec.Parent.Name = "other" }),
			paths: []string{"spec.parent"}},
	}
	runCases(t, cases)
}
