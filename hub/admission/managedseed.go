package admission

import (
	"bytes"
	"context"
	"encoding/json"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

var (
	managedSeedOperations = []string{"reconcile", "renew-kubeconfig"}
	bootstrapModes        = []string{"BootstrapToken", "None", "ServiceAccount"}
	pullPolicies          = []string{"Always", "IfNotPresent", "Never"}
)

const (
	gardenletConfigAPIVersion = "gardenlet.config.gardener.cloud/v1alpha1"
	gardenletConfigKind       = "GardenletConfiguration"
)

// defaultManagedSeed applies Gardener's SetDefaults_ManagedSeed: gardenlet deployment defaults, bootstrap with a
// bootstrap token, merging with the parent gardenlet's configuration, and a shoot capacity of 250.
func defaultManagedSeed(ms *seedmanagementv1alpha1.ManagedSeed) {
	if ms.Spec == nil {
		ms.Spec = &seedmanagementv1alpha1.ManagedSeedSpec{}
	}
	if ms.Spec.Gardenlet == nil {
		ms.Spec.Gardenlet = &seedmanagementv1alpha1.GardenletConfig{}
	}
	g := ms.Spec.Gardenlet
	if g.Deployment == nil {
		g.Deployment = &seedmanagementv1alpha1.GardenletDeployment{}
	}
	d := g.Deployment
	d.ReplicaCount, d.RevisionHistoryLimit, d.Image, d.EnableHealthProbes = defaultGardenletDeployment(d.ReplicaCount, d.RevisionHistoryLimit, d.Image, d.EnableHealthProbes)
	defaultGardenletConfig(g.Config)
	if g.Bootstrap == nil {
		g.Bootstrap = ptrTo("BootstrapToken")
	}
	if g.MergeWithParent == nil {
		g.MergeWithParent = ptrTo(true)
	}
}

// defaultGardenletDeployment is Gardener's SetDefaults_GardenletDeployment and SetDefaults_Image.
func defaultGardenletDeployment(replicas, history *int32, image *seedmanagementv1alpha1.Image, probes *bool) (*int32, *int32, *seedmanagementv1alpha1.Image, *bool) {
	if replicas == nil {
		replicas = ptrTo(int32(2))
	}
	if history == nil {
		history = ptrTo(int32(2))
	}
	if image == nil {
		image = &seedmanagementv1alpha1.Image{}
	}
	if image.PullPolicy == nil {
		if image.GetTag() == "latest" {
			image.PullPolicy = ptrTo("Always")
		} else {
			image.PullPolicy = ptrTo("IfNotPresent")
		}
	}
	if probes == nil {
		probes = ptrTo(true)
	}
	return replicas, history, image, probes
}

// defaultGardenletConfig sets resources.capacity.shoots to 250 in a GardenletConfiguration that does not set it.
func defaultGardenletConfig(raw *metav1.RawExtension) {
	if raw == nil || len(raw.Raw) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil || cfg == nil {
		return
	}
	if cfg["apiVersion"] != gardenletConfigAPIVersion || cfg["kind"] != gardenletConfigKind {
		return
	}
	res, ok := cfg["resources"].(map[string]any)
	if !ok {
		if cfg["resources"] != nil {
			return
		}
		res = map[string]any{}
		cfg["resources"] = res
	}
	capacity, ok := res["capacity"].(map[string]any)
	if !ok {
		if res["capacity"] != nil {
			return
		}
		capacity = map[string]any{}
		res["capacity"] = capacity
	}
	if _, ok := capacity["shoots"]; ok {
		return
	}
	capacity["shoots"] = "250"
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return
	}
	raw.Raw = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// validateManagedSeed checks that the ManagedSeed lives in the garden namespace and names its shoot
// (spec.shoot.name, immutable), and its gardenlet section: deployment parameters, bootstrap mode (immutable, as is
// mergeWithParent) and the GardenletConfiguration.
func validateManagedSeed(_ context.Context, _ Reader, ms, old *seedmanagementv1alpha1.ManagedSeed) field.ErrorList {
	errs := requireGardenNamespace(ms.GetMetadata(), false)
	errs = append(errs, nameIsDNSLabel(ms.GetMetadata())...)
	errs = append(errs, operationAnnotation(ms.GetMetadata(), old.GetMetadata(), managedSeedOperations)...)
	p := field.NewPath("spec")
	errs = append(errs, validateManagedSeedSpec(p, ms.GetSpec(), false, nil)...)
	if old != nil {
		errs = append(errs, validateManagedSeedSpecUpdate(p, ms.GetSpec(), old.GetSpec())...)
	}
	return errs
}

// validateManagedSeedSpec is Gardener's ValidateManagedSeedSpec. In the template of a ManagedSeedSet (inTemplate)
// the shoot is not named and the seed template must match the set's selector.
func validateManagedSeedSpec(p *field.Path, spec *seedmanagementv1alpha1.ManagedSeedSpec, inTemplate bool, selector labels.Selector) field.ErrorList {
	var errs field.ErrorList
	sp := p.Child("shoot")
	switch {
	case inTemplate && spec.GetShoot() != nil:
		errs = append(errs, field.Forbidden(sp, "shoot is forbidden"))
	case inTemplate:
	case spec.GetShoot() == nil:
		errs = append(errs, field.Required(sp, "shoot is required"))
	case spec.GetShoot().GetName() == "":
		errs = append(errs, field.Required(sp.Child("name"), "shoot name is required"))
	}
	gp := p.Child("gardenlet")
	g := spec.GetGardenlet()
	if g == nil {
		g = &seedmanagementv1alpha1.GardenletConfig{}
	}
	if d := g.GetDeployment(); d != nil {
		errs = append(errs, validateGardenletDeployment(gp.Child("deployment"), d.ReplicaCount, d.RevisionHistoryLimit, d.ServiceAccountName, d.GetImage(), d.GetPodLabels(), d.GetPodAnnotations())...)
	}
	if b := g.Bootstrap; b != nil && !contains(bootstrapModes, *b) {
		errs = append(errs, field.NotSupported(gp.Child("bootstrap"), *b, bootstrapModes))
	}
	bootstrap := g.GetBootstrap()
	if bootstrap == "" {
		bootstrap = "None"
	}
	errs = append(errs, validateGardenletConfig(gp.Child("config"), g.GetConfig(), bootstrap, g.GetMergeWithParent(), inTemplate, selector)...)
	return errs
}

func validateManagedSeedSpecUpdate(p *field.Path, spec, old *seedmanagementv1alpha1.ManagedSeedSpec) field.ErrorList {
	errs := immutable(p.Child("shoot", "name"), spec.GetShoot().GetName(), old.GetShoot().GetName())
	gp := p.Child("gardenlet")
	errs = append(errs, immutable(gp.Child("bootstrap"), spec.GetGardenlet().GetBootstrap(), old.GetGardenlet().GetBootstrap())...)
	errs = append(errs, immutable(gp.Child("mergeWithParent"), spec.GetGardenlet().GetMergeWithParent(), old.GetGardenlet().GetMergeWithParent())...)
	return errs
}

// validateGardenletDeployment is Gardener's ValidateGardenletDeployment, for both deployment types.
func validateGardenletDeployment(p *field.Path, replicas, history *int32, serviceAccount *string, image *seedmanagementv1alpha1.Image, podLabels, podAnnotations map[string]string) field.ErrorList {
	errs := nonNegative(p.Child("replicaCount"), replicas)
	errs = append(errs, nonNegative(p.Child("revisionHistoryLimit"), history)...)
	if serviceAccount != nil {
		errs = append(errs, dnsSubdomain(p.Child("serviceAccountName"), *serviceAccount)...)
	}
	if image != nil {
		ip := p.Child("image")
		if image.Repository != nil && image.GetRepository() == "" {
			errs = append(errs, field.Invalid(ip.Child("repository"), "", "repository must not be empty if specified"))
		}
		if image.Tag != nil && image.GetTag() == "" {
			errs = append(errs, field.Invalid(ip.Child("tag"), "", "tag must not be empty if specified"))
		}
		if pp := image.PullPolicy; pp != nil && !contains(pullPolicies, *pp) {
			errs = append(errs, field.NotSupported(ip.Child("pullPolicy"), *pp, pullPolicies))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(podLabels, p.Child("podLabels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(podAnnotations, p.Child("podAnnotations"))...)
	return errs
}

// gardenletConfiguration is the part of a GardenletConfiguration admission looks at.
type gardenletConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	SeedConfig *struct {
		Metadata struct {
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	} `json:"seedConfig"`
	GardenClientConnection *struct {
		Kubeconfig          string          `json:"kubeconfig"`
		BootstrapKubeconfig json.RawMessage `json:"bootstrapKubeconfig"`
		KubeconfigSecret    json.RawMessage `json:"kubeconfigSecret"`
	} `json:"gardenClientConnection"`
}

// validateGardenletConfig checks a gardenlet's configuration: a gardenlet.config.gardener.cloud/v1alpha1
// GardenletConfiguration whose seed template leaves the name to the controller and is a valid seed template, and
// whose garden connection fits the bootstrap mode. With a selector (ManagedSeedSet templates) the seed template is
// required and its labels must match.
func validateGardenletConfig(p *field.Path, raw *metav1.RawExtension, bootstrap string, mergeWithParent, inTemplate bool, selector labels.Selector) field.ErrorList {
	if raw == nil || len(raw.GetRaw()) == 0 {
		return nil
	}
	var cfg gardenletConfiguration
	if err := json.Unmarshal(raw.GetRaw(), &cfg); err != nil {
		return field.ErrorList{field.Invalid(p, string(raw.GetRaw()), "must be a GardenletConfiguration: "+err.Error())}
	}
	if cfg.APIVersion != gardenletConfigAPIVersion || cfg.Kind != gardenletConfigKind {
		return field.ErrorList{field.Invalid(p, cfg.APIVersion+", Kind="+cfg.Kind, "must be a "+gardenletConfigAPIVersion+" "+gardenletConfigKind)}
	}
	var errs field.ErrorList
	scp := p.Child("seedConfig")
	if sc := cfg.SeedConfig; sc != nil {
		mp := scp.Child("metadata")
		if sc.Metadata.Name != "" {
			errs = append(errs, field.Forbidden(mp.Child("name"), "seed name is forbidden"))
		}
		errs = append(errs, metav1validation.ValidateLabels(sc.Metadata.Labels, mp.Child("labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(sc.Metadata.Annotations, mp.Child("annotations"))...)
		if selector != nil && !selector.Empty() && !selector.Matches(labels.Set(sc.Metadata.Labels)) {
			errs = append(errs, field.Invalid(mp.Child("labels"), sc.Metadata.Labels, "selector does not match template labels"))
		}
		if len(sc.Spec) > 0 && string(sc.Spec) != "null" {
			// Fields the Seed API no longer has are tolerated here, as the gardenlet ignores them.
			spec := &corev1beta1.SeedSpec{}
			if err := (kjson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(sc.Spec, spec); err != nil {
				errs = append(errs, field.Invalid(scp.Child("spec"), string(sc.Spec), err.Error()))
			} else {
				errs = append(errs, validateSeedSpec(scp.Child("spec"), spec, true)...)
			}
		}
	} else if selector != nil {
		errs = append(errs, field.Required(scp, "seedConfig is required"))
	}
	if gcc := cfg.GardenClientConnection; gcc != nil {
		gp := p.Child("gardenClientConnection")
		switch bootstrap {
		case "ServiceAccount", "BootstrapToken":
			if gcc.Kubeconfig != "" {
				errs = append(errs, field.Forbidden(gp.Child("kubeconfig"), "kubeconfig is forbidden if bootstrap is specified"))
			}
		case "None":
			if gcc.Kubeconfig == "" && !mergeWithParent {
				errs = append(errs, field.Required(gp.Child("kubeconfig"), "kubeconfig is required if bootstrap is not specified and merging with parent is disabled"))
			}
			if isSet(gcc.BootstrapKubeconfig) {
				errs = append(errs, field.Forbidden(gp.Child("bootstrapKubeconfig"), "bootstrap kubeconfig is forbidden if bootstrap is not specified"))
			}
			if isSet(gcc.KubeconfigSecret) {
				errs = append(errs, field.Forbidden(gp.Child("kubeconfigSecret"), "kubeconfig secret is forbidden if bootstrap is not specified"))
			}
		}
	}
	return errs
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
