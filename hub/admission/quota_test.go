package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validQuota() *corev1beta1.Quota {
	return &corev1beta1.Quota{
		Metadata: meta("trial", "garden-trial"),
		Spec: &corev1beta1.QuotaSpec{
			Scope:   &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project"},
			Metrics: map[string]string{"cpu": "200", "memory": "4000Gi", "storage.standard": "8000Gi"},
		},
	}
}

func TestQuotaValidation(t *testing.T) {
	q := func(f func(*corev1beta1.Quota)) *corev1beta1.Quota { return with(validQuota(), f) }
	cases := []validationCase{
		{name: "valid", obj: validQuota()},
		{name: "example", obj: examplesOf(t, &corev1beta1.Quota{})[0]},
		{name: "secret scope", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope = &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret"} })},
		{name: "workload identity scope", obj: q(func(x *corev1beta1.Quota) {
			x.Spec.Scope = &metav1.ObjectReference{ApiVersion: "security.gardener.cloud/v1alpha1", Kind: "WorkloadIdentity"}
		})},
		{name: "scope required", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope = nil }), paths: []string{"spec.scope"}},
		{name: "scope apiVersion required", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope.ApiVersion = "" }), paths: []string{"spec.scope.apiVersion"}},
		{name: "scope kind required", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope.Kind = "" }), paths: []string{"spec.scope.kind"}},
		{name: "scope of another kind", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope.Kind = "Shoot" }), paths: []string{"spec.scope"}},
		{name: "secret of the wrong group", obj: q(func(x *corev1beta1.Quota) { x.Spec.Scope.Kind = "Secret" }), paths: []string{"spec.scope"}},
		{name: "metrics: known names, valid quantities", obj: q(func(x *corev1beta1.Quota) {
			x.Spec.Metrics = map[string]string{"cpu": "-1", "gpus": "2", "memory": "lots"}
		}), paths: []string{"spec.metrics[cpu]", "spec.metrics[gpus]", "spec.metrics[memory]"}},
		{name: "cluster lifetime", obj: q(func(x *corev1beta1.Quota) { x.Spec.ClusterLifetimeDays = ptr(int32(0)) }),
			paths: []string{"spec.clusterLifetimeDays"}},
		{name: "scope is immutable", old: validQuota(), obj: q(func(x *corev1beta1.Quota) {
			x.Spec.Scope = &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret"}
		}), paths: []string{"spec.scope"}},
		{name: "metrics may change", old: validQuota(), obj: q(func(x *corev1beta1.Quota) { x.Spec.Metrics["cpu"] = "400" })},
	}
	runCases(t, cases)
}
