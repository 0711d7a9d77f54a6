package admission

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

const rollingUpdate = "RollingUpdate"

// defaultManagedSeedSet applies Gardener's SetDefaults_ManagedSeedSet, _UpdateStrategy and _RollingUpdateStrategy.
func defaultManagedSeedSet(s *seedmanagementv1alpha1.ManagedSeedSet) {
	if s.Spec == nil {
		s.Spec = &seedmanagementv1alpha1.ManagedSeedSetSpec{}
	}
	spec := s.Spec
	if spec.Replicas == nil {
		spec.Replicas = ptrTo(int32(1))
	}
	if spec.UpdateStrategy == nil {
		spec.UpdateStrategy = &seedmanagementv1alpha1.UpdateStrategy{}
	}
	if spec.UpdateStrategy.Type == nil {
		spec.UpdateStrategy.Type = ptrTo(rollingUpdate)
	}
	if ru := spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition == nil {
		ru.Partition = ptrTo(int32(0))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = ptrTo(int32(10))
	}
}

// validateManagedSeedSet checks that the set lives in the garden namespace, replicas and revisionHistoryLimit are not
// negative, the selector is given, valid and matches the labels of the ManagedSeed template, its seed template and
// the shoot template, the ManagedSeed template is valid (without a shoot), and the update strategy is RollingUpdate.
// The selector, revisionHistoryLimit and the template's bootstrap settings are immutable.
func validateManagedSeedSet(_ context.Context, _ Reader, s, old *seedmanagementv1alpha1.ManagedSeedSet) field.ErrorList {
	errs := requireGardenNamespace(s.GetMetadata(), false)
	p := field.NewPath("spec")
	spec := s.GetSpec()
	if spec == nil {
		spec = &seedmanagementv1alpha1.ManagedSeedSetSpec{}
	}
	errs = append(errs, nonNegative(p.Child("replicas"), spec.Replicas)...)
	errs = append(errs, nonNegative(p.Child("revisionHistoryLimit"), spec.RevisionHistoryLimit)...)

	sp := p.Child("selector")
	var selector labels.Selector
	sel := spec.GetSelector()
	switch {
	case sel == nil:
		errs = append(errs, field.Required(sp, "a selector is required"))
	case len(sel.GetMatchLabels()) == 0 && len(sel.GetMatchExpressions()) == 0:
		errs = append(errs, field.Invalid(sp, "", "empty selector is invalid for ManagedSeedSet"))
	default:
		if e := labelSelector(sp, sel); len(e) > 0 {
			errs = append(errs, e...)
		} else if ls, err := kmetav1.LabelSelectorAsSelector(toKubeSelector(sel.GetMatchLabels(), sel.GetMatchExpressions())); err != nil {
			errs = append(errs, field.Invalid(sp, "", err.Error()))
		} else {
			selector = ls
		}
	}

	tp := p.Child("template")
	errs = append(errs, templateMetadata(tp.Child("metadata"), spec.GetTemplate().GetMetadata(), selector)...)
	errs = append(errs, validateManagedSeedSpec(tp.Child("spec"), spec.GetTemplate().GetSpec(), true, selector)...)
	errs = append(errs, templateMetadata(p.Child("shootTemplate", "metadata"), spec.GetShootTemplate().GetMetadata(), selector)...)

	if us := spec.GetUpdateStrategy(); us != nil {
		up := p.Child("updateStrategy")
		switch t := us.Type; {
		case t == nil:
		case *t == "":
			errs = append(errs, field.Required(up.Child("type"), "must provide an update strategy type"))
		case *t != rollingUpdate:
			errs = append(errs, field.NotSupported(up.Child("type"), *t, []string{rollingUpdate}))
		default:
			errs = append(errs, nonNegative(up.Child("rollingUpdate", "partition"), partition(us.GetRollingUpdate()))...)
		}
	}

	if old != nil {
		os := old.GetSpec()
		errs = append(errs, immutableMessage(sp, spec.GetSelector(), os.GetSelector())...)
		if spec.RevisionHistoryLimit != nil || os.RevisionHistoryLimit != nil {
			errs = append(errs, immutable(p.Child("revisionHistoryLimit"), spec.GetRevisionHistoryLimit(), os.GetRevisionHistoryLimit())...)
		}
		gp := tp.Child("spec", "gardenlet")
		ng, og := spec.GetTemplate().GetSpec().GetGardenlet(), os.GetTemplate().GetSpec().GetGardenlet()
		errs = append(errs, immutable(gp.Child("bootstrap"), ng.GetBootstrap(), og.GetBootstrap())...)
		errs = append(errs, immutable(gp.Child("mergeWithParent"), ng.GetMergeWithParent(), og.GetMergeWithParent())...)
	}
	return errs
}

// templateMetadata checks the labels and annotations of a template and that the selector matches its labels.
func templateMetadata(p *field.Path, md *metav1.ObjectMeta, selector labels.Selector) field.ErrorList {
	errs := metav1validation.ValidateLabels(md.GetLabels(), p.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(md.GetAnnotations(), p.Child("annotations"))...)
	if selector != nil && !selector.Empty() && !selector.Matches(labels.Set(md.GetLabels())) {
		errs = append(errs, field.Invalid(p.Child("labels"), md.GetLabels(), "selector does not match template labels"))
	}
	return errs
}

func partition(ru *seedmanagementv1alpha1.RollingUpdateStrategy) *int32 {
	if ru == nil {
		return nil
	}
	return ru.Partition
}
