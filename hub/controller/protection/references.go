package protection

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
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
	if !ok {
		// The shoot is gone: what only it referenced is released.
		return controller.Result{}, r.releaseUnreferenced(ctx, key.Namespace, nil)
	}
	if err := r.releaseUnreferenced(ctx, key.Namespace, shoot); err != nil {
		return controller.Result{}, err
	}
	md := shoot.GetMetadata()
	// A shoot being deleted whose flow is done (the agent's "gardener" finalizer is gone) needs nothing any more.
	if md.GetDeletionTimestamp() != nil && !slices.Contains(md.GetFinalizers(), FinalizerGardener) {
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

// releaseUnreferenced removes the reference-protection finalizer from the user-managed Secrets and ConfigMaps of
// namespace that no Shoot there references any more (shoot, being deleted and done, does not count). It looks at the
// shoots only while some protected object is not yet known to be referenced, so that a namespace of many shoots
// referencing the same few objects costs each reconciliation a scan of a few shoots, not of all of them.
func (r *referenceReconciler) releaseUnreferenced(ctx context.Context, namespace string, shoot *corev1beta1.Shoot) error {
	type protected struct {
		col   *store.Collection
		names map[string]bool // protected and not known to be referenced
	}
	secrets := protected{r.c.secrets, map[string]bool{}}
	configMaps := protected{r.c.configMaps, map[string]bool{}}
	for _, p := range []protected{secrets, configMaps} {
		res, err := p.col.List(ctx, namespace, store.ListOptions{})
		if err != nil {
			return err
		}
		for _, o := range res.Items {
			om := o.GetMetadata()
			if !slices.Contains(om.GetFinalizers(), FinalizerReferenceProtection) {
				continue
			}
			if p.col == r.c.secrets && om.GetLabels()[LabelGardenRole] != "" {
				continue
			}
			p.names[om.GetName()] = true
		}
	}
	if len(secrets.names)+len(configMaps.names) == 0 {
		return nil
	}
	shoots, err := listAll[*corev1beta1.Shoot](ctx, r.c.shoots, namespace)
	if err != nil {
		return err
	}
	for _, s := range shoots {
		sm := s.GetMetadata()
		if shoot != nil && sm.GetName() == shoot.GetMetadata().GetName() && sm.GetDeletionTimestamp() != nil && !slices.Contains(sm.GetFinalizers(), FinalizerGardener) {
			continue
		}
		for _, n := range referencedSecrets(s) {
			delete(secrets.names, n)
		}
		for _, n := range referencedConfigMaps(s) {
			delete(configMaps.names, n)
		}
		if len(secrets.names)+len(configMaps.names) == 0 {
			return nil
		}
	}
	for _, p := range []protected{secrets, configMaps} {
		for _, name := range slices.Sorted(maps.Keys(p.names)) {
			if err := setFinalizer(ctx, p.col, controller.Key{Namespace: namespace, Name: name}, FinalizerReferenceProtection, false); err != nil {
				return err
			}
		}
	}
	return nil
}
