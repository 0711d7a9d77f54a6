package admission_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validCloudProfile() *corev1beta1.CloudProfile {
	return &corev1beta1.CloudProfile{
		Metadata: meta("local", ""),
		Spec: &corev1beta1.CloudProfileSpec{
			Type: "local",
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{
				{Version: "1.35.4", Classification: ptr("supported")},
				{Version: "1.34.7", Classification: ptr("supported")},
				{Version: "1.34.6", Classification: ptr("deprecated"), ExpirationDate: timestamppb.New(time.Now().Add(24 * time.Hour))},
			}},
			MachineImages: []*corev1beta1.MachineImage{
				{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{Version: "1877.5.0"}, {Version: "1592.9.0"}}},
				{Name: "ubuntu", Versions: []*corev1beta1.MachineImageVersion{{Version: "18.04.201906170"}}},
			},
			MachineTypes: []*corev1beta1.MachineType{{Name: "m5.large", Cpu: "2", Gpu: "0", Memory: "8Gi"}},
			VolumeTypes:  []*corev1beta1.VolumeType{{Name: "gp3", Class: "standard"}},
			Regions:      []*corev1beta1.Region{{Name: "local", Zones: []*corev1beta1.AvailabilityZone{{Name: "a"}, {Name: "b"}}}},
		},
	}
}

func TestCloudProfileValidation(t *testing.T) {
	cp := func(f func(*corev1beta1.CloudProfile)) *corev1beta1.CloudProfile { return with(validCloudProfile(), f) }
	versions := func(c *corev1beta1.CloudProfile, vs ...string) {
		c.Spec.Kubernetes.Versions = nil
		for _, v := range vs {
			c.Spec.Kubernetes.Versions = append(c.Spec.Kubernetes.Versions, &corev1beta1.ExpirableVersion{Version: v})
		}
	}
	cases := []validationCase{
		{name: "valid", obj: validCloudProfile()},
		{name: "example", obj: examplesOf(t, &corev1beta1.CloudProfile{})[0]},
		{name: "empty", obj: &corev1beta1.CloudProfile{Metadata: meta("p", "")}, paths: []string{
			"spec.kubernetes.versions", "spec.machineImages", "spec.machineTypes", "spec.regions", "spec.type",
		}},
		{name: "kubernetes versions must be full semantic versions", obj: cp(func(c *corev1beta1.CloudProfile) {
			versions(c, "1.35.4", "1.35", "v1.34.1", "1.33.x")
		}), paths: []string{"spec.kubernetes.versions[1].version", "spec.kubernetes.versions[2].version", "spec.kubernetes.versions[3].version"}},
		{name: "kubernetes versions unique", obj: cp(func(c *corev1beta1.CloudProfile) { versions(c, "1.35.4", "1.34.1", "1.35.4") }),
			paths: []string{"spec.kubernetes.versions[2].version"}},
		{name: "classification enum", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Kubernetes.Versions[1].Classification = ptr("stable")
		}), paths: []string{"spec.kubernetes.versions[1].classification"}},
		{name: "lifecycle classification enum", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Kubernetes.Versions[0].Classification = nil
			c.Spec.Kubernetes.Versions[0].Lifecycle = []*corev1beta1.LifecycleStage{{Classification: "preview"}, {Classification: "retired"}}
		}), paths: []string{"spec.kubernetes.versions[0].lifecycle[1].classification"}},
		{name: "one supported version per minor", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Kubernetes.Versions[2].Classification = ptr("supported")
		}), paths: []string{"spec.kubernetes.versions[2]"}},
		{name: "latest kubernetes version must not expire", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Kubernetes.Versions[0].ExpirationDate = timestamppb.New(time.Now().Add(time.Hour))
		}), paths: []string{"spec.kubernetes.versions[0].expirationDate"}},
		{name: "machine images: names unique, versions semantic and unique", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.MachineImages = append(c.Spec.MachineImages,
				&corev1beta1.MachineImage{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{Version: "1.0.0"}}},
				&corev1beta1.MachineImage{Name: "flatcar", Versions: []*corev1beta1.MachineImageVersion{{Version: "stable"}, {Version: "1.2"}, {Version: "1.2"}, {}}},
				&corev1beta1.MachineImage{Versions: []*corev1beta1.MachineImageVersion{{Version: "1.0.0"}}},
				&corev1beta1.MachineImage{Name: "empty"},
			)
		}), paths: []string{
			"spec.machineImages[2].name",
			"spec.machineImages[3].versions[0].version", "spec.machineImages[3].versions[2].version", "spec.machineImages[3].versions[3].version",
			"spec.machineImages[4].name",
			"spec.machineImages[5].versions",
		}},
		{name: "machine image update strategy, CRI and architectures", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.MachineImages[0].UpdateStrategy = ptr("always")
			c.Spec.MachineImages[0].Versions[0].Cri = []*corev1beta1.CRI{{Name: "docker"}}
			c.Spec.MachineImages[0].Versions[1].Architectures = []string{"amd64", "s390x"}
			c.Spec.MachineImages[1].Versions[0].Classification = ptr("beta")
		}), paths: []string{
			"spec.machineImages[0].updateStrategy",
			"spec.machineImages[0].versions[0].cri[0].name",
			"spec.machineImages[0].versions[1].architectures[1]",
			"spec.machineImages[1].versions[0].classification",
		}},
		{name: "machine types: names unique, valid quantities, architecture", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.MachineTypes = append(c.Spec.MachineTypes,
				&corev1beta1.MachineType{Name: "m5.large", Cpu: "2", Memory: "8Gi"},
				&corev1beta1.MachineType{Name: "bad", Cpu: "-1", Gpu: "two", Memory: "8Gi", Architecture: ptr("riscv")},
				&corev1beta1.MachineType{Cpu: "1", Memory: "1Gi", Storage: &corev1beta1.MachineTypeStorage{Class: "standard"}},
			)
		}), paths: []string{
			"spec.machineTypes[1].name",
			"spec.machineTypes[2].architecture", "spec.machineTypes[2].cpu", "spec.machineTypes[2].gpu",
			"spec.machineTypes[3].name", "spec.machineTypes[3].storage",
		}},
		{name: "volume types", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.VolumeTypes = append(c.Spec.VolumeTypes, &corev1beta1.VolumeType{Name: "gp3", Class: "premium"}, &corev1beta1.VolumeType{Name: "io1", MinSize: ptr("-20Gi")})
		}), paths: []string{"spec.volumeTypes[1].name", "spec.volumeTypes[2].class", "spec.volumeTypes[2].minSize"}},
		{name: "regions and zones unique", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Regions = append(c.Spec.Regions,
				&corev1beta1.Region{Name: "local"},
				&corev1beta1.Region{Name: "eu", Zones: []*corev1beta1.AvailabilityZone{{Name: "x"}, {Name: "x"}, {}}, Labels: map[string]string{"bad key": "v"}},
				&corev1beta1.Region{},
			)
		}), paths: []string{
			"spec.regions[1].name",
			"spec.regions[2].labels", "spec.regions[2].zones[1].name", "spec.regions[2].zones[2].name",
			"spec.regions[3].name",
		}},
		{name: "bastion", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.Bastion = &corev1beta1.Bastion{
				MachineType:  &corev1beta1.BastionMachineType{Name: "m6.large"},
				MachineImage: &corev1beta1.BastionMachineImage{Name: "gardenlinux", Version: ptr("2.0.0")},
			}
		}), paths: []string{"spec.bastion.machineImage.version", "spec.bastion.machineType.name"}},
		{name: "limits", obj: cp(func(c *corev1beta1.CloudProfile) { c.Spec.Limits = &corev1beta1.Limits{MaxNodesTotal: ptr(int32(0))} }),
			paths: []string{"spec.limits.maxNodesTotal"}},
		{name: "seed selector and CA bundle", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.SeedSelector = &corev1beta1.SeedSelector{MatchExpressions: []*metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
			c.Spec.CaBundle = ptr("not a certificate")
		}), paths: []string{"spec.caBundle", "spec.seedSelector.matchExpressions[0].operator"}},
		{name: "machine capabilities", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.MachineCapabilities = []*corev1beta1.CapabilityDefinition{{Name: "architecture", Values: []string{"amd64"}}}
		})},
		{name: "machine capabilities need architecture; architectures forbidden with them", obj: cp(func(c *corev1beta1.CloudProfile) {
			c.Spec.MachineCapabilities = []*corev1beta1.CapabilityDefinition{{Name: "gpu", Values: []string{"nvidia"}}}
			c.Spec.MachineTypes[0].Architecture = ptr("amd64")
		}), paths: []string{"spec.machineCapabilities", "spec.machineTypes[0].architecture"}},
		{name: "maxNodesTotal cannot decrease", old: cp(func(c *corev1beta1.CloudProfile) { c.Spec.Limits = &corev1beta1.Limits{MaxNodesTotal: ptr(int32(10))} }),
			obj:   cp(func(c *corev1beta1.CloudProfile) { c.Spec.Limits = &corev1beta1.Limits{MaxNodesTotal: ptr(int32(5))} }),
			paths: []string{"spec.limits.maxNodesTotal"}},
	}
	runCases(t, cases)
}

func TestCloudProfileDefaults(t *testing.T) {
	cp := validCloudProfile()
	if errs := validate(t, cp, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	img := cp.Spec.MachineImages[0]
	switch v := img.Versions[0]; {
	case img.GetUpdateStrategy() != "major":
		t.Errorf("updateStrategy = %q, want major", img.GetUpdateStrategy())
	case len(v.Cri) != 1 || v.Cri[0].GetName() != "containerd":
		t.Errorf("cri = %v, want containerd", v.Cri)
	case len(v.Architectures) != 1 || v.Architectures[0] != "amd64":
		t.Errorf("architectures = %v, want amd64", v.Architectures)
	case cp.Spec.MachineTypes[0].GetArchitecture() != "amd64" || !cp.Spec.MachineTypes[0].GetUsable():
		t.Errorf("machine type not defaulted: %v", cp.Spec.MachineTypes[0])
	case !cp.Spec.VolumeTypes[0].GetUsable():
		t.Errorf("volume type not defaulted: %v", cp.Spec.VolumeTypes[0])
	}
}
