package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

var gardenletOperations = []string{"reconcile", "renew-kubeconfig", "force-redeploy"}

// defaultGardenlet applies Gardener's SetDefaults_Gardenlet: deployment defaults and a shoot capacity of 250.
func defaultGardenlet(g *seedmanagementv1alpha1.Gardenlet) {
	if g.Spec == nil {
		g.Spec = &seedmanagementv1alpha1.GardenletSpec{}
	}
	if g.Spec.Deployment == nil {
		g.Spec.Deployment = &seedmanagementv1alpha1.GardenletSelfDeployment{}
	}
	d := g.Spec.Deployment
	d.ReplicaCount, d.RevisionHistoryLimit, d.Image, d.EnableHealthProbes = defaultGardenletDeployment(d.ReplicaCount, d.RevisionHistoryLimit, d.Image, d.EnableHealthProbes)
	defaultGardenletConfig(g.Spec.Config)
}

// validateGardenlet checks that the Gardenlet lives in the garden namespace, its deployment parameters, the OCI
// repository of its helm chart (spec.deployment.helm.ociRepository, required) and its GardenletConfiguration, which
// bootstraps with a token and so must not carry a kubeconfig.
func validateGardenlet(_ context.Context, _ Reader, g, old *seedmanagementv1alpha1.Gardenlet) field.ErrorList {
	errs := requireGardenNamespace(g.GetMetadata(), true)
	errs = append(errs, nameIsDNSLabel(g.GetMetadata())...)
	errs = append(errs, operationAnnotation(g.GetMetadata(), old.GetMetadata(), gardenletOperations)...)
	p := field.NewPath("spec")
	d := g.GetSpec().GetDeployment()
	if d == nil {
		d = &seedmanagementv1alpha1.GardenletSelfDeployment{}
	}
	dp := p.Child("deployment")
	errs = append(errs, validateGardenletDeployment(dp, d.ReplicaCount, d.RevisionHistoryLimit, d.ServiceAccountName, d.GetImage(), d.GetPodLabels(), d.GetPodAnnotations())...)
	op := dp.Child("helm", "ociRepository")
	if o := d.GetHelm().GetOciRepository(); o == nil {
		errs = append(errs, field.Required(op, "must provide either ref or repository"))
	} else {
		errs = append(errs, validateOCIRepository(op, &ociRepository{Ref: o.Ref, Repository: o.Repository, Tag: o.Tag, Digest: o.Digest})...)
	}
	errs = append(errs, validateGardenletConfig(p.Child("config"), g.GetSpec().GetConfig(), "BootstrapToken", false, false, nil)...)
	return errs
}
