package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

var (
	// extensionKinds are Gardener's extension kinds (extensionsv1alpha1.AllExtensionKinds).
	extensionKinds = []string{
		"BackupBucket", "BackupEntry", "Bastion", "ContainerRuntime", "ControlPlane", "DNSRecord", "Extension",
		"Infrastructure", "Network", "OperatingSystemConfig", "SelfHostedShootExposure", "Worker",
	}
	deploymentPolicies         = []string{"Always", "AlwaysExceptNoShoots", "OnDemand"}
	clusterTypes               = []string{"seed", "shoot"}
	extensionStrategies        = []string{"AfterKubeAPIServer", "BeforeKubeAPIServer"}
	extensionReconcileStrategy = []string{"AfterKubeAPIServer", "AfterWorker", "BeforeKubeAPIServer"}
)

const kindExtension = "Extension"

// defaultControllerRegistration applies Gardener's SetDefaults_ControllerResource, _ControllerResourceLifecycle and
// _ControllerRegistrationDeployment.
func defaultControllerRegistration(cr *corev1beta1.ControllerRegistration) {
	if cr.Spec == nil {
		cr.Spec = &corev1beta1.ControllerRegistrationSpec{}
	}
	for _, r := range cr.Spec.Resources {
		if r == nil {
			continue
		}
		if r.Primary == nil {
			r.Primary = ptrTo(true)
		}
		if r.Kind == kindExtension {
			if len(r.ClusterCompatibility) == 0 {
				r.ClusterCompatibility = []string{"shoot"}
			}
			if r.ReconcileTimeout == nil {
				r.ReconcileTimeout = ptrTo("3m0s")
			}
			if r.Lifecycle == nil {
				r.Lifecycle = &corev1beta1.ControllerResourceLifecycle{}
			}
		}
		if r.Kind == "SelfHostedShootExposure" && r.ContinuousEndpointUpdate == nil {
			r.ContinuousEndpointUpdate = ptrTo(true)
		}
		if l := r.Lifecycle; l != nil {
			if l.Reconcile == nil {
				l.Reconcile = ptrTo("AfterKubeAPIServer")
			}
			if l.Delete == nil {
				l.Delete = ptrTo("BeforeKubeAPIServer")
			}
			if l.Migrate == nil {
				l.Migrate = ptrTo("BeforeKubeAPIServer")
			}
		}
	}
	if d := cr.Spec.Deployment; d != nil && d.Policy == nil {
		d.Policy = ptrTo("OnDemand")
	}
}

// validateControllerRegistration checks spec.resources (kind among Gardener's extension kinds, type, unique
// kind/type, the Extension-only fields) and spec.deployment (policy, seed selector only for controllers that control
// no resource primarily, at most one deployment reference); primary is immutable per kind/type, exactly one
// registration controls a kind/type primarily, and nothing of the spec changes once the registration is being deleted.
func validateControllerRegistration(ctx context.Context, r Reader, cr, old *corev1beta1.ControllerRegistration) field.ErrorList {
	errs := nameIsDNSLabel(cr.GetMetadata())
	p := field.NewPath("spec")
	spec := cr.GetSpec()
	if old != nil && cr.GetMetadata().GetDeletionTimestamp() != nil && !protoEqual(spec, old.GetSpec()) {
		return append(errs, field.Forbidden(p, "cannot update the spec if the deletion timestamp is set"))
	}
	errs = append(errs, validateControllerResources(p.Child("resources"), spec.GetResources())...)

	if d := spec.GetDeployment(); d != nil {
		dp := p.Child("deployment")
		if pol := d.Policy; pol != nil && !contains(deploymentPolicies, *pol) {
			errs = append(errs, field.NotSupported(dp.Child("policy"), *pol, deploymentPolicies))
		}
		if d.SeedSelector != nil {
			for _, r := range spec.GetResources() {
				if r.Primary == nil || r.GetPrimary() {
					errs = append(errs, field.Forbidden(dp.Child("seedSelector"), "specifying a seed selector is not allowed when controlling resources primarily"))
					break
				}
			}
			errs = append(errs, labelSelector(dp.Child("seedSelector"), d.GetSeedSelector())...)
		}
		if len(d.GetDeploymentRefs()) > 1 {
			errs = append(errs, field.Forbidden(dp.Child("deploymentRefs"), "only one deployment reference is allowed"))
		}
		for i, ref := range d.GetDeploymentRefs() {
			if ref.GetName() == "" {
				errs = append(errs, field.Required(dp.Child("deploymentRefs").Index(i).Child("name"), "must not be empty"))
			}
		}
	}

	errs = append(errs, uniquePrimaries(ctx, r, p.Child("resources"), cr)...)
	if old != nil {
		// primary defaults to true.
		primary := map[string]bool{}
		for _, r := range old.GetSpec().GetResources() {
			primary[r.GetKind()+"/"+r.GetType()] = r.Primary == nil || r.GetPrimary()
		}
		for i, r := range spec.GetResources() {
			if op, ok := primary[r.GetKind()+"/"+r.GetType()]; ok && op != (r.Primary == nil || r.GetPrimary()) {
				errs = append(errs, field.Invalid(p.Child("resources").Index(i).Child("primary"), r.GetPrimary(), immutableMsg))
			}
		}
	}
	return errs
}

func validateControllerResources(p *field.Path, rs []*corev1beta1.ControllerResource) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, r := range rs {
		ip := p.Index(i)
		if r.GetKind() == "" {
			errs = append(errs, field.Required(ip.Child("kind"), "field is required"))
		} else if !contains(extensionKinds, r.GetKind()) {
			errs = append(errs, field.NotSupported(ip.Child("kind"), r.GetKind(), extensionKinds))
		}
		if r.GetType() == "" {
			errs = append(errs, field.Required(ip.Child("type"), "field is required"))
		}
		id := r.GetKind() + "/" + r.GetType()
		if seen[id] {
			errs = append(errs, field.Duplicate(ip, id))
		}
		seen[id] = true

		if r.GetKind() != kindExtension {
			notExtension := fmt.Sprintf("field must not be set when kind != %s", kindExtension)
			if len(r.GetAutoEnable()) > 0 {
				errs = append(errs, field.Forbidden(ip.Child("autoEnable"), notExtension))
			}
			if len(r.GetClusterCompatibility()) > 0 {
				errs = append(errs, field.Forbidden(ip.Child("clusterCompatibility"), notExtension))
			}
			if r.ReconcileTimeout != nil {
				errs = append(errs, field.Forbidden(ip.Child("reconcileTimeout"), notExtension))
			}
			if r.Lifecycle != nil {
				errs = append(errs, field.Forbidden(ip.Child("lifecycle"), notExtension))
			}
			continue
		}

		errs = append(errs, duration(ip.Child("reconcileTimeout"), r.ReconcileTimeout)...)
		compatible := map[string]bool{}
		for j, ct := range r.GetClusterCompatibility() {
			cp := ip.Child("clusterCompatibility").Index(j)
			if !contains(clusterTypes, ct) {
				errs = append(errs, field.NotSupported(cp, ct, clusterTypes))
			}
			if compatible[ct] {
				errs = append(errs, field.Duplicate(cp, ct))
			}
			compatible[ct] = true
		}
		auto := map[string]bool{}
		for j, ct := range r.GetAutoEnable() {
			ap := ip.Child("autoEnable").Index(j)
			if !contains(clusterTypes, ct) {
				errs = append(errs, field.NotSupported(ap, ct, clusterTypes))
			}
			if !compatible[ct] {
				errs = append(errs, field.Forbidden(ap, fmt.Sprintf("autoEnable is not allowed for cluster type %q when clusterCompatibility is set to %v", ct, r.GetClusterCompatibility())))
			}
			if auto[ct] {
				errs = append(errs, field.Duplicate(ap, ct))
			}
			auto[ct] = true
		}
		if l := r.GetLifecycle(); l != nil {
			lp := ip.Child("lifecycle")
			if s := l.Reconcile; s != nil && !contains(extensionReconcileStrategy, *s) {
				errs = append(errs, field.NotSupported(lp.Child("reconcile"), *s, extensionReconcileStrategy))
			}
			if s := l.Delete; s != nil && !contains(extensionStrategies, *s) {
				errs = append(errs, field.NotSupported(lp.Child("delete"), *s, extensionStrategies))
			}
			if s := l.Migrate; s != nil && !contains(extensionStrategies, *s) {
				errs = append(errs, field.NotSupported(lp.Child("migrate"), *s, extensionStrategies))
			}
		}
	}
	return errs
}

// uniquePrimaries forbids a resource that cr controls primarily (primary defaults to true) when another registration
// already controls the same kind/type primarily (Gardener's ControllerRegistrationResources admission plugin).
func uniquePrimaries(ctx context.Context, r Reader, p *field.Path, cr *corev1beta1.ControllerRegistration) field.ErrorList {
	primary := func(res *corev1beta1.ControllerResource) bool { return res.Primary == nil || res.GetPrimary() }
	mine := map[string]int{}
	for i, res := range cr.GetSpec().GetResources() {
		if primary(res) {
			mine[res.GetKind()+"/"+res.GetType()] = i
		}
	}
	if len(mine) == 0 || r == nil {
		return nil
	}
	list, err := r.List(ctx, controllerRegistrations, "")
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	var errs field.ErrorList
	for _, o := range list {
		other := o.(*corev1beta1.ControllerRegistration)
		if other.GetMetadata().GetName() == cr.GetMetadata().GetName() {
			continue
		}
		for _, res := range other.GetSpec().GetResources() {
			id := res.GetKind() + "/" + res.GetType()
			if i, ok := mine[id]; ok && primary(res) {
				errs = append(errs, field.Forbidden(p.Index(i).Child("primary"),
					fmt.Sprintf("%s is already controlled primarily by ControllerRegistration %q; only one registration may be primary for a kind/type", id, other.GetMetadata().GetName())))
			}
		}
	}
	return errs
}
