package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

var (
	// quotaScopes are what a Quota may apply to (Gardener's helper.QuotaScope compares group and kind).
	quotaScopes = []schema.GroupKind{
		{Group: "core.gardener.cloud", Kind: "Project"},
		{Group: "", Kind: "Secret"},
		{Group: "security.gardener.cloud", Kind: "WorkloadIdentity"},
	}
	quotaScopeNames = []string{"core.gardener.cloud/v1beta1, Kind=Project", "/v1, Kind=Secret", "security.gardener.cloud/v1alpha1, Kind=WorkloadIdentity"}
	quotaMetrics    = []string{"cpu", "gpu", "memory", "storage.standard", "storage.premium", "loadbalancer"}
)

// validateQuota checks the scope (a Project, Secret or WorkloadIdentity, named by apiVersion and kind), the metrics
// (known names, non-negative quantities) and clusterLifetimeDays; the scope is immutable.
func validateQuota(_ context.Context, _ Reader, q, old *corev1beta1.Quota) field.ErrorList {
	p := field.NewPath("spec")
	spec := q.GetSpec()
	if spec == nil {
		spec = &corev1beta1.QuotaSpec{}
	}
	var errs field.ErrorList
	if d := spec.ClusterLifetimeDays; d != nil && *d < 1 {
		errs = append(errs, field.Invalid(p.Child("clusterLifetimeDays"), *d, "must be greater than 0"))
	}
	sp := p.Child("scope")
	scope := spec.GetScope()
	switch {
	case scope.GetApiVersion() == "" && scope.GetKind() == "":
		errs = append(errs, field.Required(sp, "must refer to a Project, Secret or WorkloadIdentity by apiVersion and kind"))
	case scope.GetApiVersion() == "":
		errs = append(errs, field.Required(sp.Child("apiVersion"), "must provide an apiVersion"))
	case scope.GetKind() == "":
		errs = append(errs, field.Required(sp.Child("kind"), "must provide a kind"))
	default:
		gk := schema.FromAPIVersionAndKind(scope.GetApiVersion(), scope.GetKind()).GroupKind()
		known := false
		for _, s := range quotaScopes {
			known = known || gk == s
		}
		if !known {
			errs = append(errs, field.NotSupported(sp, scope.GetApiVersion()+", Kind="+scope.GetKind(), quotaScopeNames))
		}
	}
	for k, v := range spec.GetMetrics() {
		kp := p.Child("metrics").Key(k)
		if !contains(quotaMetrics, k) {
			errs = append(errs, field.Invalid(kp, v, fmt.Sprintf("%s is no supported quota metric (supported: %v)", k, quotaMetrics)))
		}
		errs = append(errs, quantity(kp, v)...)
	}
	if old != nil {
		errs = append(errs, immutableMessage(sp, scope, old.GetSpec().GetScope())...)
	}
	return errs
}
