package admission_test

import (
	"testing"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMjf4u7l0qTQbW0zDiYpbf7gVfxWcdxDkPo0Pqs3YgR you@example.com"

func validBastion() *operationsv1alpha1.Bastion {
	return &operationsv1alpha1.Bastion{
		Metadata: meta("debug", "garden-dev"),
		Spec: &operationsv1alpha1.BastionSpec{
			ShootRef:     &metav1.LocalObjectReference{Name: "crazy-botany"},
			SshPublicKey: sshKey,
			Ingress:      []*operationsv1alpha1.BastionIngressPolicy{{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "1.2.3.4/32"}}},
		},
	}
}

func TestBastionValidation(t *testing.T) {
	b := func(f func(*operationsv1alpha1.Bastion)) *operationsv1alpha1.Bastion { return with(validBastion(), f) }
	cases := []validationCase{
		{name: "valid", obj: validBastion()},
		{name: "example", obj: examplesOf(t, &operationsv1alpha1.Bastion{})[0]},
		{name: "empty", obj: &operationsv1alpha1.Bastion{Metadata: meta("b", "garden-dev")},
			paths: []string{"spec.ingress", "spec.shootRef.name", "spec.sshPublicKey"}},
		{name: "key must parse", obj: b(func(x *operationsv1alpha1.Bastion) { x.Spec.SshPublicKey = "ssh-rsa not-base64" }),
			paths: []string{"spec.sshPublicKey"}},
		{name: "ingress CIDRs", obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.Ingress = append(x.Spec.Ingress,
				&operationsv1alpha1.BastionIngressPolicy{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "1.2.3.4"}},
				&operationsv1alpha1.BastionIngressPolicy{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "2001:db8::/64"}},
				&operationsv1alpha1.BastionIngressPolicy{},
			)
		}), paths: []string{"spec.ingress[1].ipBlock.cidr", "spec.ingress[3].ipBlock.cidr"}},
		{name: "shoot and key are immutable", old: validBastion(), obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.ShootRef.Name = "other"
			x.Spec.SshPublicKey = examplesOf(t, &operationsv1alpha1.Bastion{})[0].(*operationsv1alpha1.Bastion).Spec.SshPublicKey
		}), paths: []string{"spec.shootRef.name", "spec.sshPublicKey"}},
		{name: "ingress may change", old: validBastion(), obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.Ingress[0].IpBlock.Cidr = "5.6.7.8/32"
		})},
	}
	runCases(t, cases)
}
