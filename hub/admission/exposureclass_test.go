package admission_test

import (
	"strings"
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validExposureClass() *corev1beta1.ExposureClass {
	return &corev1beta1.ExposureClass{
		Metadata: meta("internet", ""),
		Handler:  "internet-config",
		Scheduling: &corev1beta1.ExposureClassScheduling{
			SeedSelector: &corev1beta1.SeedSelector{MatchLabels: map[string]string{"network": "internet"}},
			Tolerations:  []*metav1.Toleration{{Key: "network", Value: ptr("internet")}},
		},
	}
}

func TestExposureClassValidation(t *testing.T) {
	ec := func(f func(*corev1beta1.ExposureClass)) *corev1beta1.ExposureClass {
		return with(validExposureClass(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validExposureClass()},
		{name: "example", obj: examplesOf(t, &corev1beta1.ExposureClass{})[0]},
		{name: "handler required", obj: ec(func(e *corev1beta1.ExposureClass) { e.Handler = "" }), paths: []string{"handler"}},
		{name: "handler is a DNS label", obj: ec(func(e *corev1beta1.ExposureClass) { e.Handler = "internet.config" }), paths: []string{"handler"}},
		{name: "handler at most 34 characters", obj: ec(func(e *corev1beta1.ExposureClass) { e.Handler = strings.Repeat("h", 35) }),
			paths: []string{"handler"}},
		{name: "scheduling", obj: ec(func(e *corev1beta1.ExposureClass) {
			e.Scheduling.SeedSelector.MatchLabels = map[string]string{"bad key": "v"}
			e.Scheduling.Tolerations = append(e.Scheduling.Tolerations, &metav1.Toleration{Key: "network", Value: ptr("internet")}, &metav1.Toleration{})
		}), paths: []string{"scheduling.seedSelector.matchLabels", "scheduling.tolerations[1]", "scheduling.tolerations[2].key"}},
		{name: "handler and scheduling are immutable", old: validExposureClass(), obj: ec(func(e *corev1beta1.ExposureClass) {
			e.Handler = "other"
			e.Scheduling = nil
		}), paths: []string{"handler", "scheduling"}},
	}
	runCases(t, cases)
}
