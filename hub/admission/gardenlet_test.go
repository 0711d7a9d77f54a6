package admission_test

import (
	"testing"

	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func validGardenlet() *seedmanagementv1alpha1.Gardenlet {
	return &seedmanagementv1alpha1.Gardenlet{
		Metadata: meta("local", "garden"),
		Spec: &seedmanagementv1alpha1.GardenletSpec{
			Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{Helm: &seedmanagementv1alpha1.GardenletHelm{
				OciRepository: &corev1.OCIRepository{Ref: ptr("europe-docker.pkg.dev/gardener-project/releases/charts/gardener/gardenlet:v1.120.0")},
			}},
			Config: gardenletConfig(minimalGardenletConfig),
		},
	}
}

func TestGardenletValidation(t *testing.T) {
	g := func(f func(*seedmanagementv1alpha1.Gardenlet)) *seedmanagementv1alpha1.Gardenlet {
		return with(validGardenlet(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validGardenlet()},
		{name: "namespace must be garden", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) { x.Metadata.Namespace = "garden-dev" }),
			paths: []string{"metadata.namespace"}},
		{name: "helm chart required", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) { x.Spec.Deployment.Helm = nil }),
			paths: []string{"spec.deployment.helm.ociRepository"}},
		{name: "OCI repository", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) {
			x.Spec.Deployment.Helm.OciRepository.Tag = ptr("v1.120.0")
		}), paths: []string{"spec.deployment.helm.ociRepository.tag"}},
		{name: "deployment", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) { x.Spec.Deployment.RevisionHistoryLimit = ptr(int32(-1)) }),
			paths: []string{"spec.deployment.revisionHistoryLimit"}},
		{name: "no kubeconfig: gardenlets bootstrap", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) {
			x.Spec.Config = gardenletConfig(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",
				"gardenClientConnection":{"kubeconfig":"apiVersion: v1"}}`)
		}), paths: []string{"spec.config.gardenClientConnection.kubeconfig"}},
		{name: "force-redeploy operation", obj: g(func(x *seedmanagementv1alpha1.Gardenlet) {
			x.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "force-redeploy"}
		})},
	}
	runCases(t, cases)
}
