package admission_test

import (
	"testing"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

func validCredentialsBinding() *securityv1alpha1.CredentialsBinding {
	return &securityv1alpha1.CredentialsBinding{
		Metadata:       meta("aws", "garden-dev"),
		Provider:       &securityv1alpha1.CredentialsBindingProvider{Type: "aws"},
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "aws"},
	}
}

func TestCredentialsBindingValidation(t *testing.T) {
	cb := func(f func(*securityv1alpha1.CredentialsBinding)) *securityv1alpha1.CredentialsBinding {
		return with(validCredentialsBinding(), f)
	}
	ref := func(apiVersion, kind string) func(*securityv1alpha1.CredentialsBinding) {
		return func(b *securityv1alpha1.CredentialsBinding) {
			b.CredentialsRef.ApiVersion, b.CredentialsRef.Kind = apiVersion, kind
		}
	}
	cases := []validationCase{
		{name: "valid", obj: validCredentialsBinding()},
		{name: "example", obj: examplesOf(t, &securityv1alpha1.CredentialsBinding{})[0]},
		{name: "workload identity", obj: cb(ref("security.gardener.cloud/v1alpha1", "WorkloadIdentity"))},
		{name: "internal secret", obj: cb(ref("core.gardener.cloud/v1beta1", "InternalSecret"))},
		{name: "config map", obj: cb(ref("v1", "ConfigMap")), paths: []string{"credentialsRef"}},
		{name: "secret of the wrong version", obj: cb(ref("core.gardener.cloud/v1beta1", "Secret")), paths: []string{"credentialsRef"}},
		{name: "apiVersion and kind required", obj: cb(ref("", "")), paths: []string{"credentialsRef.apiVersion", "credentialsRef.kind"}},
		{name: "credentials required", obj: cb(func(b *securityv1alpha1.CredentialsBinding) {
			b.CredentialsRef = nil
			b.Metadata.Namespace = ""
		}), paths: []string{"credentialsRef.apiVersion", "credentialsRef.kind", "credentialsRef.name", "credentialsRef.namespace"}},
		{name: "name must be a DNS subdomain", obj: cb(func(b *securityv1alpha1.CredentialsBinding) { b.CredentialsRef.Name = "Not_Valid" }),
			paths: []string{"credentialsRef.name"}},
		{name: "provider type required", obj: cb(func(b *securityv1alpha1.CredentialsBinding) { b.Provider = nil }), paths: []string{"provider.type"}},
		{name: "one provider", obj: cb(func(b *securityv1alpha1.CredentialsBinding) { b.Provider.Type = "aws,gcp" }), paths: []string{"provider.type"}},
		{name: "quota names required", obj: cb(func(b *securityv1alpha1.CredentialsBinding) {
			b.Quotas = []*metav1.ObjectReference{{}}
		}), paths: []string{"quotas[0].name"}},
		{name: "credentials, quotas and provider are immutable", old: validCredentialsBinding(), obj: cb(func(b *securityv1alpha1.CredentialsBinding) {
			b.CredentialsRef.Name = "other"
			b.Quotas = []*metav1.ObjectReference{{Name: "q"}}
			b.Provider.Type = "gcp"
		}), paths: []string{"credentialsRef", "provider", "quotas"}},
	}
	runCases(t, cases)
}

func TestCredentialsBindingDefaults(t *testing.T) {
	b := validCredentialsBinding()
	if errs := validate(t, b, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if b.CredentialsRef.Namespace != "garden-dev" {
		t.Errorf("credentialsRef.namespace = %q, want the binding's namespace", b.CredentialsRef.Namespace)
	}
}
