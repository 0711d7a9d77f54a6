package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// AnnotationShootExpirationTimestamp is when a shoot of a quota with clusterLifetimeDays is deleted (Gardener's
// shoot.gardener.cloud/expiration-timestamp, RFC 3339).
const AnnotationShootExpirationTimestamp = "shoot.gardener.cloud/expiration-timestamp"

// Volume classes of cloud profiles' volume and machine types, and the quota metric each one's storage counts in.
var volumeClassMetrics = map[string]string{"standard": "storage.standard", "premium": "storage.premium"}

// admitShootQuota is Gardener's ShootQuotaValidator. The quotas of a shoot are those its secret binding or
// credentials binding references (spec.secretBindingName first, as Gardener reads them; Projects reference no quotas in
// Gardener). On create, and on an update that adds a worker pool, changes a pool's machine type, maximum or volume, or
// enables the nginx-ingress addon, the shoot's usage plus the usage of every other shoot whose binding references the
// same quota must stay within each metric the quota limits; the quota's scope decides which shoots count: a Project
// quota counts the shoots of the shoot's namespace, a credentials (Secret, WorkloadIdentity) quota those of all
// namespaces. A shoot's usage is, for each worker pool, maximum × the machine type's cpu, gpu and memory and maximum ×
// the volume size in storage.standard or storage.premium by the volume type's class; loadbalancer is 1, 2 with the
// nginx-ingress addon. When the expiration annotation changes, it may lie at most the smallest clusterLifetimeDays of
// the quotas from now. Refusals are 403 Forbidden, as in Gardener, naming the metric, the quota, its limit and the
// usage.
//
// Unlike Gardener, a worker pool without a volume whose machine type declares no storage counts no storage (Gardener
// refuses the shoot for an unknown volume type).
func admitShootQuota(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) error {
	// Subresource writes (binding, status) and shoots being deleted are not checked, as in Gardener.
	if s.GetMetadata().GetDeletionTimestamp() != nil || Subresource(ctx) != "" {
		return nil
	}
	checkQuota := old == nil || quotaVerificationNeeded(s, old)
	checkLifetime := old != nil && lifetimeChanged(s, old)
	if !checkQuota && !checkLifetime {
		return nil
	}
	refs, err := shootQuotaRefs(ctx, r, s)
	if err != nil || len(refs) == 0 {
		return err
	}
	var maxLifetime *int32
	var exceeded []string
	for _, ref := range refs {
		o, err := r.Get(ctx, quotas, ref.GetNamespace(), ref.GetName())
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("reading quota %s/%s referenced by the shoot's binding: %w", ref.GetNamespace(), ref.GetName(), err))
		}
		q, ok := o.(*corev1beta1.Quota)
		if !ok {
			continue
		}
		if d := q.GetSpec().ClusterLifetimeDays; d != nil && (maxLifetime == nil || *d < *maxLifetime) {
			maxLifetime = d
		}
		if !checkQuota {
			continue
		}
		over, err := exceededMetrics(ctx, r, s, q)
		if err != nil {
			return err
		}
		exceeded = append(exceeded, over...)
	}
	if len(exceeded) > 0 {
		return apierrors.NewForbidden(shoots, s.GetMetadata().GetName(), fmt.Errorf("quota limits exceeded. Unable to allocate further %s", strings.Join(exceeded, ", ")))
	}
	if lifetime, ok := s.GetMetadata().GetAnnotations()[AnnotationShootExpirationTimestamp]; checkLifetime && ok && maxLifetime != nil {
		planned, err := time.Parse(time.RFC3339, lifetime)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("annotation %s: %q is no RFC 3339 time: %v", AnnotationShootExpirationTimestamp, lifetime, err))
		}
		if planned.After(time.Now().Add(time.Duration(*maxLifetime) * 24 * time.Hour)) {
			return apierrors.NewForbidden(shoots, s.GetMetadata().GetName(), fmt.Errorf("requested shoot expiration time is too long. Can only be extended by %d day(s)", *maxLifetime))
		}
	}
	return nil
}

// shootQuotaRefs returns the quotas the shoot's secret binding or credentials binding references.
func shootQuotaRefs(ctx context.Context, r Reader, s *corev1beta1.Shoot) ([]*metav1.ObjectReference, error) {
	ns := s.GetMetadata().GetNamespace()
	gr, name := secretBindings, s.GetSpec().GetSecretBindingName()
	if name == "" {
		gr, name = credentialsBindings, s.GetSpec().GetCredentialsBindingName()
	}
	if name == "" {
		return nil, nil
	}
	o, err := r.Get(ctx, gr, ns, name)
	if err != nil {
		// Validation already refused a binding that does not exist.
		return nil, apierrors.NewInternalError(fmt.Errorf("reading %s %s/%s: %w", gr.Resource, ns, name, err))
	}
	return bindingQuotas(o), nil
}

// bindingQuotas returns the quotas a SecretBinding or CredentialsBinding references.
func bindingQuotas(o any) []*metav1.ObjectReference {
	switch b := o.(type) {
	case *corev1beta1.SecretBinding:
		return b.GetQuotas()
	case *securityv1alpha1.CredentialsBinding:
		return b.GetQuotas()
	}
	return nil
}

// exceededMetrics returns, for each metric quota q limits, a description of its excess when s joins the other shoots
// counted against q.
func exceededMetrics(ctx context.Context, r Reader, s *corev1beta1.Shoot, q *corev1beta1.Quota) ([]string, error) {
	required, err := shootUsage(ctx, r, s)
	if err != nil {
		return nil, err
	}
	others, err := shootsOfQuota(ctx, r, s, q)
	if err != nil {
		return nil, err
	}
	used := map[string]resource.Quantity{}
	for _, o := range others {
		u, err := shootUsage(ctx, r, o)
		if err != nil {
			return nil, err
		}
		addUsage(used, u)
	}
	var out []string
	for _, metric := range quotaMetrics {
		v, ok := q.GetSpec().GetMetrics()[metric]
		if !ok {
			continue
		}
		limit, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("quota %s/%s: metric %s: %w", q.GetMetadata().GetNamespace(), q.GetMetadata().GetName(), metric, err))
		}
		total := used[metric].DeepCopy()
		total.Add(required[metric])
		if limit.Cmp(total) < 0 {
			u, n := used[metric], required[metric]
			out = append(out, fmt.Sprintf("%s (quota %s/%s limits it to %s: %s in use, the shoot needs %s)",
				metric, q.GetMetadata().GetNamespace(), q.GetMetadata().GetName(), limit.String(), u.String(), n.String()))
		}
	}
	return out, nil
}

// shootsOfQuota lists the shoots other than s whose binding references q, in s's namespace for a Project quota and
// in all namespaces otherwise.
func shootsOfQuota(ctx context.Context, r Reader, s *corev1beta1.Shoot, q *corev1beta1.Quota) ([]*corev1beta1.Shoot, error) {
	ns := ""
	if schema.FromAPIVersionAndKind(q.GetSpec().GetScope().GetApiVersion(), q.GetSpec().GetScope().GetKind()).GroupKind() == quotaScopes[0] {
		ns = s.GetMetadata().GetNamespace()
	}
	// The bindings referencing q, by namespace and kind.
	bound := map[schema.GroupResource]map[string]bool{}
	for _, gr := range []schema.GroupResource{secretBindings, credentialsBindings} {
		list, err := r.List(ctx, gr, ns)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("listing %s: %w", gr.Resource, err))
		}
		bound[gr] = map[string]bool{}
		for _, b := range list {
			for _, ref := range bindingQuotas(b) {
				if ref.GetName() == q.GetMetadata().GetName() && ref.GetNamespace() == q.GetMetadata().GetNamespace() {
					bound[gr][b.GetMetadata().GetNamespace()+"/"+b.GetMetadata().GetName()] = true
				}
			}
		}
	}
	list, err := r.List(ctx, shoots, ns)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing shoots: %w", err))
	}
	var out []*corev1beta1.Shoot
	for _, o := range list {
		other, ok := o.(*corev1beta1.Shoot)
		if !ok {
			continue
		}
		md := other.GetMetadata()
		if md.GetNamespace() == s.GetMetadata().GetNamespace() && md.GetName() == s.GetMetadata().GetName() {
			continue
		}
		sb, cb := other.GetSpec().GetSecretBindingName(), other.GetSpec().GetCredentialsBindingName()
		if sb != "" && bound[secretBindings][md.GetNamespace()+"/"+sb] || cb != "" && bound[credentialsBindings][md.GetNamespace()+"/"+cb] {
			out = append(out, other)
		}
	}
	return out, nil
}

// shootUsage is what s counts against a quota, by metric.
func shootUsage(ctx context.Context, r Reader, s *corev1beta1.Shoot) (map[string]resource.Quantity, error) {
	name := s.GetMetadata().GetNamespace() + "/" + s.GetMetadata().GetName()
	profile, _, ferr := shootCloudProfile(ctx, r, s)
	if ferr != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("shoot %s: could not find referenced cloud profile: %s", name, ferr.Error()))
	}
	usage := map[string]resource.Quantity{}
	add := func(metric, v string, n int32) error {
		if v == "" || n <= 0 {
			return nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("shoot %s: %s %q: %w", name, metric, v, err))
		}
		total := usage[metric]
		for range n {
			total.Add(q)
		}
		usage[metric] = total
		return nil
	}
	for _, w := range s.GetSpec().GetProvider().GetWorkers() {
		var mt *corev1beta1.MachineType
		for _, m := range profile.GetMachineTypes() {
			if m.GetName() == w.GetMachine().GetType() {
				mt = m
				break
			}
		}
		if mt == nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("shoot %s: machine type %q not found in the cloud profile", name, w.GetMachine().GetType()))
		}
		n := w.GetMaximum()
		for _, c := range []struct{ metric, v string }{{"cpu", mt.GetCpu()}, {"gpu", mt.GetGpu()}, {"memory", mt.GetMemory()}} {
			if err := add(c.metric, c.v, n); err != nil {
				return nil, err
			}
		}
		class, size, err := workerVolume(w, mt, profile)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("shoot %s: worker %s: %w", name, w.GetName(), err))
		}
		if class == "" {
			continue
		}
		metric, ok := volumeClassMetrics[class]
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("shoot %s: worker %s: unknown volume class %q", name, w.GetName(), class))
		}
		if err := add(metric, size, n); err != nil {
			return nil, err
		}
	}
	lb := int64(1)
	if s.GetSpec().GetAddons().GetNginxIngress().GetEnabled() {
		lb++
	}
	usage["loadbalancer"] = *resource.NewQuantity(lb, resource.DecimalSI)
	return usage, nil
}

// workerVolume is the class and size of a worker pool's volume: its own (the class from the machine type's storage
// or else the cloud profile's volume type of that name), or the machine type's storage when it names none; "" when
// it has neither.
func workerVolume(w *corev1beta1.Worker, mt *corev1beta1.MachineType, profile *corev1beta1.CloudProfileSpec) (class, size string, err error) {
	v := w.GetVolume()
	if v == nil {
		if st := mt.GetStorage(); st != nil && st.Size != nil {
			return st.GetClass(), st.GetSize(), nil
		}
		return "", "", nil
	}
	if st := mt.GetStorage(); st != nil {
		return st.GetClass(), v.GetSize(), nil
	}
	for _, vt := range profile.GetVolumeTypes() {
		if v.Type != nil && vt.GetName() == v.GetType() {
			return vt.GetClass(), v.GetSize(), nil
		}
	}
	return "", "", fmt.Errorf("volume type %q not found in the cloud profile", v.GetType())
}

func addUsage(into, u map[string]resource.Quantity) {
	for k, v := range u {
		t := into[k]
		t.Add(v)
		into[k] = t
	}
}

// quotaVerificationNeeded reports an update that may raise the shoot's usage: the nginx-ingress addon enabled, a
// worker pool added, or a pool's machine type, maximum or volume changed.
func quotaVerificationNeeded(s, old *corev1beta1.Shoot) bool {
	if !old.GetSpec().GetAddons().GetNginxIngress().GetEnabled() && s.GetSpec().GetAddons().GetNginxIngress().GetEnabled() {
		return true
	}
	before := map[string]*corev1beta1.Worker{}
	for _, w := range old.GetSpec().GetProvider().GetWorkers() {
		before[w.GetName()] = w
	}
	for _, w := range s.GetSpec().GetProvider().GetWorkers() {
		o, ok := before[w.GetName()]
		if !ok || o.GetMachine().GetType() != w.GetMachine().GetType() || o.GetMaximum() != w.GetMaximum() || !proto.Equal(o.GetVolume(), w.GetVolume()) {
			return true
		}
	}
	return false
}

// lifetimeChanged reports an update that sets or changes the expiration annotation.
func lifetimeChanged(s, old *corev1beta1.Shoot) bool {
	o, ok := old.GetMetadata().GetAnnotations()[AnnotationShootExpirationTimestamp]
	n, nok := s.GetMetadata().GetAnnotations()[AnnotationShootExpirationTimestamp]
	return ok != nok || o != n
}
