package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// defaultNamespacedCloudProfile applies Gardener's SetObjectDefaults_NamespacedCloudProfileSpec: machine and volume
// types are usable unless said otherwise.
func defaultNamespacedCloudProfile(ncp *corev1beta1.NamespacedCloudProfile) {
	if ncp.Spec == nil {
		ncp.Spec = &corev1beta1.NamespacedCloudProfileSpec{}
	}
	defaultMachineAndVolumeTypes(ncp.Spec.MachineTypes, ncp.Spec.VolumeTypes)
}

// validateNamespacedCloudProfile checks a NamespacedCloudProfile on its own: it names a parent CloudProfile, and what
// it adds or overrides is well-formed (Kubernetes versions without classifications, machine images, machine and
// volume types). Whether the parent exists and the merge is consistent is the business of its controller.
func validateNamespacedCloudProfile(_ context.Context, _ Reader, ncp, old *corev1beta1.NamespacedCloudProfile) field.ErrorList {
	p := field.NewPath("spec")
	spec := ncp.GetSpec()
	if spec == nil {
		spec = &corev1beta1.NamespacedCloudProfileSpec{}
	}
	var errs field.ErrorList
	pp := p.Child("parent")
	if k := spec.GetParent().GetKind(); k != "CloudProfile" {
		errs = append(errs, field.NotSupported(pp.Child("kind"), k, []string{"CloudProfile"}))
	}
	if spec.GetParent().GetName() == "" {
		errs = append(errs, field.Required(pp.Child("name"), "must provide a parent name"))
	}
	errs = append(errs, validateKubernetesVersions(p.Child("kubernetes", "versions"), spec.GetKubernetes().GetVersions(), true)...)
	errs = append(errs, validateMachineImages(p.Child("machineImages"), spec.GetMachineImages(), false, true)...)
	errs = append(errs, validateMachineTypes(p.Child("machineTypes"), spec.GetMachineTypes(), false, false)...)
	errs = append(errs, validateVolumeTypes(p.Child("volumeTypes"), spec.GetVolumeTypes())...)
	errs = append(errs, validateLimits(p.Child("limits"), spec.GetLimits())...)
	if spec.CaBundle != nil {
		errs = append(errs, pemCertificates(p.Child("caBundle"), spec.GetCaBundle())...)
	}
	if old != nil {
		errs = append(errs, immutableMessage(pp, spec.GetParent(), old.GetSpec().GetParent())...)
	}
	return errs
}
