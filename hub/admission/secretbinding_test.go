package admission_test

import (
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validSecretBinding() *corev1beta1.SecretBinding {
	return &corev1beta1.SecretBinding{
		Metadata:  meta("aws", "garden-dev"),
		SecretRef: &metav1.SecretReference{Name: "aws"},
		Provider:  &corev1beta1.SecretBindingProvider{Type: "aws"},
	}
}

func TestSecretBindingValidation(t *testing.T) {
	sb := func(f func(*corev1beta1.SecretBinding)) *corev1beta1.SecretBinding {
		return with(validSecretBinding(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validSecretBinding()},
		{name: "example", obj: examplesOf(t, &corev1beta1.SecretBinding{})[0]},
		{name: "secret name required", obj: sb(func(b *corev1beta1.SecretBinding) { b.SecretRef = nil }), paths: []string{"secretRef.name"}},
		{name: "provider required", obj: sb(func(b *corev1beta1.SecretBinding) { b.Provider = nil }), paths: []string{"provider"}},
		{name: "provider type required", obj: sb(func(b *corev1beta1.SecretBinding) { b.Provider.Type = "" }), paths: []string{"provider.type"}},
		{name: "quota names required", obj: sb(func(b *corev1beta1.SecretBinding) {
			b.Quotas = []*metav1.ObjectReference{{Name: "q"}, {Namespace: "garden"}}
		}), paths: []string{"quotas[1].name"}},
		{name: "secret, quotas and provider are immutable", old: validSecretBinding(), obj: sb(func(b *corev1beta1.SecretBinding) {
			b.SecretRef.Name = "other"
			b.Quotas = []*metav1.ObjectReference{{Name: "q"}}
			b.Provider.Type = "gcp"
		}), paths: []string{"provider", "quotas", "secretRef"}},
	}
	runCases(t, cases)
}

func TestSecretBindingDefaults(t *testing.T) {
	b := validSecretBinding()
	b.Quotas = []*metav1.ObjectReference{{Name: "q"}, {Name: "r", Namespace: "garden"}}
	if errs := validate(t, b, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if b.SecretRef.Namespace != "garden-dev" || b.Quotas[0].Namespace != "garden-dev" || b.Quotas[1].Namespace != "garden" {
		t.Errorf("namespaces not defaulted to the binding's: %v %v", b.SecretRef, b.Quotas)
	}
}
