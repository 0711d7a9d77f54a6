package admission_test

import (
	"testing"

	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validControllerDeployment() *corev1.ControllerDeployment {
	return &corev1.ControllerDeployment{
		Metadata: meta("provider-local", ""),
		Helm: &corev1.HelmControllerDeployment{OciRepository: &corev1.OCIRepository{
			Repository: ptr("registry.example.com/charts/provider-local"), Tag: ptr("v1.0.0"),
		}},
	}
}

func TestControllerDeploymentValidation(t *testing.T) {
	cd := func(f func(*corev1.ControllerDeployment)) *corev1.ControllerDeployment {
		return with(validControllerDeployment(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validControllerDeployment()},
		{name: "example", obj: examplesOf(t, &corev1.ControllerDeployment{})[0]},
		{name: "raw chart", obj: cd(func(c *corev1.ControllerDeployment) {
			c.Helm = &corev1.HelmControllerDeployment{RawChart: []byte("chart")}
		})},
		{name: "custom type", obj: cd(func(c *corev1.ControllerDeployment) {
			c.Helm = nil
			c.Metadata.Annotations = map[string]string{"migration.controllerdeployment.gardener.cloud/type": "custom"}
		})},
		{name: "helm or custom type required", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm = nil }), paths: []string{"helm"}},
		{name: "chart or repository", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm.OciRepository = nil }), paths: []string{"helm"}},
		{name: "not both", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm.RawChart = []byte("chart") }), paths: []string{"helm"}},
		{name: "ref or repository", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm.OciRepository = &corev1.OCIRepository{Tag: ptr("v1")} }),
			paths: []string{"helm.ociRepository"}},
		{name: "ref alone", obj: cd(func(c *corev1.ControllerDeployment) {
			c.Helm.OciRepository.Ref = ptr("registry.example.com/charts/provider-local:v1.0.0")
		}), paths: []string{"helm.ociRepository.repository", "helm.ociRepository.tag"}},
		{name: "repository needs tag or digest", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm.OciRepository.Tag = nil }),
			paths: []string{"helm.ociRepository"}},
		{name: "digest is sha256", obj: cd(func(c *corev1.ControllerDeployment) { c.Helm.OciRepository.Digest = ptr("md5:abc") }),
			paths: []string{"helm.ociRepository.digest"}},
		{name: "resource names unique", obj: cd(func(c *corev1.ControllerDeployment) {
			c.Resources = []*corev1beta1.NamedResourceReference{{Name: "a"}, {Name: "a"}, {}}
		}), paths: []string{"resources[1].name", "resources[2].name"}},
	}
	runCases(t, cases)
}

func TestControllerDeploymentV1beta1Validation(t *testing.T) {
	cd := func(typ, providerConfig string) *corev1beta1.ControllerDeployment {
		c := &corev1beta1.ControllerDeployment{Metadata: meta("provider-local", ""), Type: typ}
		if providerConfig != "" {
			c.ProviderConfig = &metav1.RawExtension{Raw: []byte(providerConfig)}
		}
		return c
	}
	cases := []validationCase{
		{name: "helm chart", obj: cd("helm", `{"chart":"Y2hhcnQ=","values":{"a":1}}`)},
		{name: "helm OCI repository", obj: cd("helm", `{"ociRepository":{"ref":"registry.example.com/foo:1.0.0"}}`)},
		{name: "custom type", obj: cd("custom", `{"anything":true}`)},
		{name: "type required", obj: cd("", ""), paths: []string{"type"}},
		{name: "helm needs a chart", obj: cd("helm", ""), paths: []string{"providerConfig"}},
		{name: "helm: not both", obj: cd("helm", `{"chart":"Y2hhcnQ=","ociRepository":{"ref":"r"}}`), paths: []string{"providerConfig"}},
		{name: "helm: not a helm config", obj: cd("helm", `{"chart":42}`), paths: []string{"providerConfig"}},
		{name: "helm: OCI repository", obj: cd("helm", `{"ociRepository":{"ref":"r","digest":"sha256:abc"}}`),
			paths: []string{"providerConfig.ociRepository.digest"}},
	}
	runCases(t, cases)
}
