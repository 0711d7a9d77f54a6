package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validControllerInstallation() *corev1beta1.ControllerInstallation {
	return &corev1beta1.ControllerInstallation{
		Metadata: meta("provider-local-abcde", ""),
		Spec: &corev1beta1.ControllerInstallationSpec{
			RegistrationRef: &metav1.ObjectReference{Name: "provider-local"},
			DeploymentRef:   &metav1.ObjectReference{Name: "provider-local"},
			SeedRef:         &metav1.ObjectReference{Name: "local"},
		},
	}
}

func TestControllerInstallationValidation(t *testing.T) {
	ci := func(f func(*corev1beta1.ControllerInstallation)) *corev1beta1.ControllerInstallation {
		return with(validControllerInstallation(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validControllerInstallation()},
		{name: "example", obj: examplesOf(t, &corev1beta1.ControllerInstallation{})[0]},
		{name: "self-hosted shoot", obj: ci(func(c *corev1beta1.ControllerInstallation) {
			c.Spec.SeedRef = nil
			c.Spec.ShootRef = &metav1.ObjectReference{Name: "shoot", Namespace: "garden"}
		})},
		{name: "references required", obj: &corev1beta1.ControllerInstallation{Metadata: meta("c", "")},
			paths: []string{"spec.registrationRef.name", "spec.seedRef.name"}},
		{name: "seed or shoot", obj: ci(func(c *corev1beta1.ControllerInstallation) {
			c.Spec.ShootRef = &metav1.ObjectReference{Name: "shoot", Namespace: "garden"}
		}), paths: []string{"spec.seedRef"}},
		{name: "references are immutable", old: validControllerInstallation(), obj: ci(func(c *corev1beta1.ControllerInstallation) {
			c.Spec.RegistrationRef.Name = "other"
			c.Spec.SeedRef.Name = "other"
		}), paths: []string{"spec.registrationRef.name", "spec.seedRef.name"}},
		{name: "deployment ref may change", old: validControllerInstallation(), obj: ci(func(c *corev1beta1.ControllerInstallation) {
			c.Spec.DeploymentRef.Name = "provider-local-v2"
		})},
	}
	runCases(t, cases)
}
