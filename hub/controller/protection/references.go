package protection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// referencedSecrets are the Secrets a Shoot references: its DNS providers' secretName and its spec.resources of
// kind Secret (apiVersion v1).
func referencedSecrets(s *corev1beta1.Shoot) []string {
	var out []string
	for _, p := range s.GetSpec().GetDns().GetProviders() {
		if n := p.GetSecretName(); n != "" {
			out = append(out, n)
		}
	}
	return append(out, referencedResources(s, "Secret")...)
}

// referencedConfigMaps are the ConfigMaps a Shoot references: its audit policy's and its spec.resources of kind
// ConfigMap (apiVersion v1).
func referencedConfigMaps(s *corev1beta1.Shoot) []string {
	var out []string
	if n := s.GetSpec().GetKubernetes().GetKubeApiServer().GetAuditConfig().GetAuditPolicy().GetConfigMapRef().GetName(); n != "" {
		out = append(out, n)
	}
	return append(out, referencedResources(s, "ConfigMap")...)
}

func referencedResources(s *corev1beta1.Shoot, kind string) []string {
	var out []string
	for _, r := range s.GetSpec().GetResources() {
		if rr := r.GetResourceRef(); rr.GetApiVersion() == "v1" && rr.GetKind() == kind && rr.GetName() != "" {
			out = append(out, rr.GetName())
		}
	}
	return out
}

// referencesDigest: what a shoot references, its finalizers and its deletion.
func referencesDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	return strings.Join(referencedSecrets(s), ",") + "|" + strings.Join(referencedConfigMaps(s), ",") + "|" + finalizerDigest(o)
}

// referenceReconciler is Gardener's shoot reference controller: it protects the Secrets and ConfigMaps a Shoot
// references with the finalizer gardener.cloud/reference-protection and releases those no Shoot of the namespace
// references any more.
type referenceReconciler struct {
	c   *collections
	log *slog.Logger
}

func (r *referenceReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	shoot, ok, err := controller.Get[*corev1beta1.Shoot](ctx, r.c.shoots, key)
	if err != nil {
		return controller.Result{}, err
	}
	// What no shoot references any more (this one's old references, or all of it when it is gone) is released.
	if err := r.releaseUnreferenced(ctx, key.Namespace); err != nil || !ok {
		return controller.Result{}, err
	}
	// A shoot being deleted whose flow is done needs nothing any more.
	if flowDone(shoot.GetMetadata()) {
		return controller.Result{}, setFinalizer(ctx, r.c.shoots, key, FinalizerReferenceProtection, false)
	}
	protected := false
	for _, ref := range []struct {
		col   *store.Collection
		kind  string
		names []string
	}{{r.c.secrets, "Secret", referencedSecrets(shoot)}, {r.c.configMaps, "ConfigMap", referencedConfigMaps(shoot)}} {
		for _, name := range ref.names {
			ro, err := ref.col.Get(ctx, key.Namespace, name)
			if err != nil {
				return controller.Result{}, fmt.Errorf("%s %s/%s referenced by Shoot %s: %w", ref.kind, key.Namespace, name, key, err)
			}
			if ref.kind == "Secret" && ro.GetMetadata().GetLabels()[LabelGardenRole] != "" {
				continue // managed by Gardener
			}
			protected = true
			if err := setFinalizer(ctx, ref.col, controller.Key{Namespace: key.Namespace, Name: name}, FinalizerReferenceProtection, true); err != nil {
				return controller.Result{}, err
			}
		}
	}
	return controller.Result{}, setFinalizer(ctx, r.c.shoots, key, FinalizerReferenceProtection, protected)
}

// flowDone reports whether a shoot is being deleted and its flow is done: the agent's "gardener" finalizer is gone.
func flowDone(md *metav1.ObjectMeta) bool {
	return md.GetDeletionTimestamp() != nil && !slices.Contains(md.GetFinalizers(), FinalizerGardener)
}

// Indexes are the store indexes the protection controllers find objects by; the hub registers them with its kinds
// (api.Config.Indexes), as controller-runtime's field indexers are registered with a manager's cache.
func Indexes() []api.Index {
	refs := func(o store.Object) []string {
		if flowDone(o.GetMetadata()) {
			return nil // it references nothing any more
		}
		return shootReferences(o.(*corev1beta1.Shoot))
	}
	protected := func(o store.Object) []string {
		md := o.GetMetadata()
		if !slices.Contains(md.GetFinalizers(), FinalizerReferenceProtection) {
			return nil
		}
		return []string{md.GetNamespace()}
	}
	return []api.Index{
		{Resource: gr("core.gardener.cloud", "shoots"), Name: IndexShootReferences, Values: refs},
		{Resource: gr("", "secrets"), Name: IndexReferenceProtected, Values: protected},
		{Resource: gr("", "configmaps"), Name: IndexReferenceProtected, Values: protected},
	}
}

const (
	// IndexShootReferences indexes Shoots by the Secrets and ConfigMaps they reference (referenceValue), leaving out
	// a shoot being deleted whose flow is done.
	IndexShootReferences = "shootReferences"
	// IndexReferenceProtected indexes Secrets and ConfigMaps that carry FinalizerReferenceProtection by namespace.
	IndexReferenceProtected = "referenceProtected"
)

// referenceValue is the IndexShootReferences value of a Secret or ConfigMap (kind) namespace/name.
func referenceValue(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// shootReferences are the IndexShootReferences values of a shoot's references.
func shootReferences(s *corev1beta1.Shoot) []string {
	ns := s.GetMetadata().GetNamespace()
	var out []string
	for _, n := range referencedSecrets(s) {
		out = append(out, referenceValue("Secret", ns, n))
	}
	for _, n := range referencedConfigMaps(s) {
		out = append(out, referenceValue("ConfigMap", ns, n))
	}
	return out
}

// releaseUnreferenced removes the reference-protection finalizer from the user-managed Secrets and ConfigMaps of
// namespace that no Shoot there references any more. A shoot being deleted whose flow is done does not count: the
// index leaves it out, and it cannot count again (no finalizer can be added to an object being deleted). Both are
// looked up by index (IndexReferenceProtected, IndexShootReferences), so a reconciliation costs a lookup per
// protected object, not a scan of the namespace's Secrets, ConfigMaps and Shoots.
func (r *referenceReconciler) releaseUnreferenced(ctx context.Context, namespace string) error {
	for _, p := range []struct {
		col  *store.Collection
		kind string
	}{{r.c.secrets, "Secret"}, {r.c.configMaps, "ConfigMap"}} {
		objs, err := p.col.ByIndex(ctx, IndexReferenceProtected, namespace)
		if err != nil {
			return err
		}
		for _, o := range objs {
			om := o.GetMetadata()
			if p.kind == "Secret" && om.GetLabels()[LabelGardenRole] != "" {
				continue
			}
			users, err := r.c.shoots.CountByIndex(ctx, IndexShootReferences, referenceValue(p.kind, namespace, om.GetName()))
			if err != nil {
				return err
			}
			if users > 0 {
				continue
			}
			if err := setFinalizer(ctx, p.col, controller.Key{Namespace: namespace, Name: om.GetName()}, FinalizerReferenceProtection, false); err != nil {
				return err
			}
		}
	}
	return nil
}
