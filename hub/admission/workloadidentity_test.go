package admission_test

import (
	"testing"

	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

func validWorkloadIdentity() *securityv1alpha1.WorkloadIdentity {
	return &securityv1alpha1.WorkloadIdentity{
		Metadata: meta("aws", "garden-dev"),
		Spec: &securityv1alpha1.WorkloadIdentitySpec{
			Audiences:    []string{"sts.amazonaws.com"},
			TargetSystem: &securityv1alpha1.TargetSystem{Type: "aws"},
		},
	}
}

func TestWorkloadIdentityValidation(t *testing.T) {
	wi := func(f func(*securityv1alpha1.WorkloadIdentity)) *securityv1alpha1.WorkloadIdentity {
		return with(validWorkloadIdentity(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validWorkloadIdentity()},
		{name: "empty", obj: &securityv1alpha1.WorkloadIdentity{Metadata: meta("w", "garden-dev")},
			paths: []string{"spec.audiences", "spec.targetSystem.type"}},
		{name: "empty audience", obj: wi(func(w *securityv1alpha1.WorkloadIdentity) { w.Spec.Audiences = append(w.Spec.Audiences, "") }),
			paths: []string{"spec.audiences[1]"}},
		{name: "one target system", obj: wi(func(w *securityv1alpha1.WorkloadIdentity) { w.Spec.TargetSystem.Type = "aws,gcp" }),
			paths: []string{"spec.targetSystem.type"}},
		{name: "target system is immutable", old: validWorkloadIdentity(), obj: wi(func(w *securityv1alpha1.WorkloadIdentity) {
			w.Spec.TargetSystem.Type = "gcp"
		}), paths: []string{"spec.targetSystem.type"}},
		{name: "audiences may change", old: validWorkloadIdentity(), obj: wi(func(w *securityv1alpha1.WorkloadIdentity) {
			w.Spec.Audiences = []string{"gardener"}
		})},
	}
	runCases(t, cases)
}
