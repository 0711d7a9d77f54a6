package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rbacv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/rbac/v1"
)

// validateClusterRole checks the rules as Kubernetes does: every rule has verbs, and either resources in API groups
// or non-resource URLs, not both.
func validateClusterRole(_ context.Context, _ Reader, cr, _ *rbacv1.ClusterRole) field.ErrorList {
	var errs field.ErrorList
	for i, r := range cr.GetRules() {
		p := field.NewPath("rules").Index(i)
		if len(r.GetVerbs()) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		resource := len(r.GetResources()) > 0 || len(r.GetApiGroups()) > 0
		switch nonResource := len(r.GetNonResourceUrls()) > 0; {
		case resource && nonResource:
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.GetNonResourceUrls(), "rules cannot apply to both regular resources and non-resource URLs"))
		case !resource && !nonResource:
			errs = append(errs, field.Required(p.Child("resources"), "resource rules need resources and apiGroups"))
		case resource && len(r.GetApiGroups()) == 0:
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		case resource && len(r.GetResources()) == 0:
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}
