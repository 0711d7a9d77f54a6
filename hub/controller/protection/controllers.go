package protection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// Finalizers and labels, as Gardener names them.
const (
	// FinalizerGardener protects a Gardener object while it is used.
	FinalizerGardener = "gardener"
	// FinalizerExternal protects a Kubernetes object (a Secret, a WorkloadIdentity) a binding references.
	FinalizerExternal = "gardener.cloud/gardener"
	// FinalizerReferenceProtection protects the Secrets and ConfigMaps a Shoot references, and the Shoot meanwhile.
	FinalizerReferenceProtection = "gardener.cloud/reference-protection"
	// LabelSecretBindingReference and LabelCredentialsBindingReference mark objects a binding references.
	LabelSecretBindingReference      = "reference.gardener.cloud/secretbinding"
	LabelCredentialsBindingReference = "reference.gardener.cloud/credentialsbinding"
	// LabelShootProviderPrefix + <type> marks credentials usable by shoots of a provider type.
	LabelShootProviderPrefix = "provider.shoot.gardener.cloud/"
	// LabelGardenRole marks objects Gardener manages itself.
	LabelGardenRole = "gardener.cloud/role"
)

// Workers says how many objects each controller reconciles at once (Gardener's concurrentSyncs; 0: 5).
type Workers struct {
	CloudProfile, NamespacedCloudProfile, ExposureClass, Quota, SecretBinding, CredentialsBinding, ShootReference int
}

// Config configures the controllers.
type Config struct {
	Source  controller.Collections
	Workers Workers
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// collections are the store collections the controllers use.
type collections struct {
	cloudProfiles, namespacedCloudProfiles, exposureClasses, quotas, secretBindings, credentialsBindings,
	shoots, secrets, configMaps, workloadIdentities, events *store.Collection
}

func gr(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

func openCollections(src controller.Collections) (*collections, error) {
	c := &collections{}
	if err := controller.OpenCollections(src, "protection", map[schema.GroupResource]**store.Collection{
		gr("core.gardener.cloud", "cloudprofiles"):           &c.cloudProfiles,
		gr("core.gardener.cloud", "namespacedcloudprofiles"): &c.namespacedCloudProfiles,
		gr("core.gardener.cloud", "exposureclasses"):         &c.exposureClasses,
		gr("core.gardener.cloud", "quotas"):                  &c.quotas,
		gr("core.gardener.cloud", "secretbindings"):          &c.secretBindings,
		gr("security.gardener.cloud", "credentialsbindings"): &c.credentialsBindings,
		gr("core.gardener.cloud", "shoots"):                  &c.shoots,
		gr("", "secrets"):                                    &c.secrets,
		gr("", "configmaps"):                                 &c.configMaps,
		gr("security.gardener.cloud", "workloadidentities"):  &c.workloadIdentities,
		gr("", "events"):                                     &c.events,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// New returns the controllers for cfg.
func New(cfg Config) (controller.Group, error) {
	if cfg.Source == nil {
		return nil, errors.New("protection: no source")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c, err := openCollections(cfg.Source)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With("controller", "protection")
	events := &controller.Recorder{Events: c.events, Component: "gardener-controller-manager", Clock: cfg.Clock, Log: log}
	deletionOnly := func(store.Object) string { return "" } // users matter when they come and go
	var all controller.Group
	add := func(cc controller.Config) error {
		cc.Clock, cc.Log = cfg.Clock, cfg.Log
		ctrl, err := controller.New(cc)
		if err != nil {
			return err
		}
		all = append(all, ctrl)
		return nil
	}
	protect := func(col *store.Collection, inUse func(context.Context, store.Object) ([]string, error)) *controller.Protection {
		return &controller.Protection{Collection: col, Finalizer: FinalizerGardener, InUse: inUse, Log: log, Events: events}
	}
	errs := []error{
		add(controller.Config{Name: "cloudprofile", Workers: cfg.Workers.CloudProfile,
			Reconciler: protect(c.cloudProfiles, c.cloudProfileUsers),
			Sources: []controller.Source{
				{Collection: c.cloudProfiles, Digest: finalizerDigest},
				{Collection: c.shoots, Map: func(o store.Object) []controller.Key {
					if kind, name := cloudProfileOf(o.(*corev1beta1.Shoot)); kind == "CloudProfile" {
						return []controller.Key{{Name: name}}
					}
					return nil
				}, Digest: deletionOnly},
				{Collection: c.namespacedCloudProfiles, Map: func(o store.Object) []controller.Key {
					p := o.(*corev1beta1.NamespacedCloudProfile).GetSpec().GetParent()
					if p.GetName() == "" || (p.GetKind() != "" && p.GetKind() != "CloudProfile") {
						return nil
					}
					return []controller.Key{{Name: p.GetName()}}
				}, Digest: deletionOnly},
			}}),
		add(controller.Config{Name: "namespacedcloudprofile", Workers: cfg.Workers.NamespacedCloudProfile,
			Reconciler: protect(c.namespacedCloudProfiles, c.namespacedCloudProfileUsers),
			Sources: []controller.Source{
				{Collection: c.namespacedCloudProfiles, Digest: finalizerDigest},
				{Collection: c.shoots, Map: func(o store.Object) []controller.Key {
					s := o.(*corev1beta1.Shoot)
					if kind, name := cloudProfileOf(s); kind == "NamespacedCloudProfile" {
						return []controller.Key{{Namespace: s.GetMetadata().GetNamespace(), Name: name}}
					}
					return nil
				}, Digest: deletionOnly},
			}}),
		add(controller.Config{Name: "exposureclass", Workers: cfg.Workers.ExposureClass,
			Reconciler: protect(c.exposureClasses, c.exposureClassUsers),
			Sources: []controller.Source{
				{Collection: c.exposureClasses, Digest: finalizerDigest},
				{Collection: c.shoots, Map: func(o store.Object) []controller.Key {
					if n := o.(*corev1beta1.Shoot).GetSpec().GetExposureClassName(); n != "" {
						return []controller.Key{{Name: n}}
					}
					return nil
				}, Digest: deletionOnly},
			}}),
		add(controller.Config{Name: "quota", Workers: cfg.Workers.Quota,
			Reconciler: protect(c.quotas, c.quotaUsers),
			Sources: []controller.Source{
				{Collection: c.quotas, Digest: finalizerDigest},
				{Collection: c.secretBindings, Map: func(o store.Object) []controller.Key {
					return refKeys(o.GetMetadata().GetNamespace(), o.(*corev1beta1.SecretBinding).GetQuotas())
				}, Digest: deletionOnly},
				{Collection: c.credentialsBindings, Map: func(o store.Object) []controller.Key {
					return refKeys(o.GetMetadata().GetNamespace(), o.(*securityv1alpha1.CredentialsBinding).GetQuotas())
				}, Digest: deletionOnly},
			}}),
		add(controller.Config{Name: "secretbinding", Workers: cfg.Workers.SecretBinding,
			Reconciler: &bindingReconciler{c: c, log: log, events: events, kind: secretBindingKind()},
			Sources:    bindingSources(c.secretBindings, c.shoots, func(s *corev1beta1.Shoot) string { return s.GetSpec().GetSecretBindingName() })}),
		add(controller.Config{Name: "credentialsbinding", Workers: cfg.Workers.CredentialsBinding,
			Reconciler: &bindingReconciler{c: c, log: log, events: events, kind: credentialsBindingKind()},
			Sources:    bindingSources(c.credentialsBindings, c.shoots, func(s *corev1beta1.Shoot) string { return s.GetSpec().GetCredentialsBindingName() })}),
		add(controller.Config{Name: "shoot-reference", Workers: cfg.Workers.ShootReference,
			Reconciler: &referenceReconciler{c: c, log: log},
			Sources:    []controller.Source{{Collection: c.shoots, Digest: referencesDigest}}}),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return all, nil
}

// finalizerDigest: the finalizers and the deletion of the protected object.
func finalizerDigest(o store.Object) string {
	md := o.GetMetadata()
	return fmt.Sprintf("%s|%t", strings.Join(md.GetFinalizers(), ","), md.GetDeletionTimestamp() != nil)
}

// cloudProfileOf is the kind and name of the cloud profile a shoot references (spec.cloudProfile, else the
// deprecated spec.cloudProfileName).
func cloudProfileOf(s *corev1beta1.Shoot) (kind, name string) {
	if cp := s.GetSpec().GetCloudProfile(); cp.GetName() != "" {
		kind = cp.GetKind()
		if kind == "" {
			kind = "CloudProfile"
		}
		return kind, cp.GetName()
	}
	if n := s.GetSpec().GetCloudProfileName(); n != "" {
		return "CloudProfile", n
	}
	return "", ""
}

// listAll lists every object of a collection (in namespace, "" for all) as T.
func listAll[T store.Object](ctx context.Context, c *store.Collection, namespace string) ([]T, error) {
	res, err := c.List(ctx, namespace, store.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(res.Items))
	for _, o := range res.Items {
		out = append(out, o.(T))
	}
	return out, nil
}

// shootUsers names the shoots (of namespace, "" for all) for which uses holds.
func (c *collections) shootUsers(ctx context.Context, namespace string, uses func(*corev1beta1.Shoot) bool) ([]string, error) {
	shoots, err := listAll[*corev1beta1.Shoot](ctx, c.shoots, namespace)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, s := range shoots {
		if uses(s) {
			users = append(users, "Shoot "+s.GetMetadata().GetNamespace()+"/"+s.GetMetadata().GetName())
		}
	}
	return users, nil
}

func (c *collections) cloudProfileUsers(ctx context.Context, obj store.Object) ([]string, error) {
	name := obj.GetMetadata().GetName()
	users, err := c.shootUsers(ctx, "", func(s *corev1beta1.Shoot) bool {
		kind, n := cloudProfileOf(s)
		return kind == "CloudProfile" && n == name
	})
	if err != nil {
		return nil, err
	}
	ncps, err := listAll[*corev1beta1.NamespacedCloudProfile](ctx, c.namespacedCloudProfiles, "")
	if err != nil {
		return nil, err
	}
	for _, p := range ncps {
		if parent := p.GetSpec().GetParent(); parent.GetName() == name && (parent.GetKind() == "" || parent.GetKind() == "CloudProfile") {
			users = append(users, "NamespacedCloudProfile "+p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
		}
	}
	return users, nil
}

func (c *collections) namespacedCloudProfileUsers(ctx context.Context, obj store.Object) ([]string, error) {
	return c.shootUsers(ctx, obj.GetMetadata().GetNamespace(), func(s *corev1beta1.Shoot) bool {
		kind, n := cloudProfileOf(s)
		return kind == "NamespacedCloudProfile" && n == obj.GetMetadata().GetName()
	})
}

func (c *collections) exposureClassUsers(ctx context.Context, obj store.Object) ([]string, error) {
	return c.shootUsers(ctx, "", func(s *corev1beta1.Shoot) bool {
		return s.GetSpec().GetExposureClassName() == obj.GetMetadata().GetName()
	})
}

func (c *collections) quotaUsers(ctx context.Context, obj store.Object) ([]string, error) {
	md := obj.GetMetadata()
	var users []string
	sbs, err := listAll[*corev1beta1.SecretBinding](ctx, c.secretBindings, "")
	if err != nil {
		return nil, err
	}
	for _, b := range sbs {
		if slices.Contains(refKeys(b.GetMetadata().GetNamespace(), b.GetQuotas()), controller.Key{Namespace: md.GetNamespace(), Name: md.GetName()}) {
			users = append(users, "SecretBinding "+b.GetMetadata().GetNamespace()+"/"+b.GetMetadata().GetName())
		}
	}
	cbs, err := listAll[*securityv1alpha1.CredentialsBinding](ctx, c.credentialsBindings, "")
	if err != nil {
		return nil, err
	}
	for _, b := range cbs {
		if slices.Contains(refKeys(b.GetMetadata().GetNamespace(), b.GetQuotas()), controller.Key{Namespace: md.GetNamespace(), Name: md.GetName()}) {
			users = append(users, "CredentialsBinding "+b.GetMetadata().GetNamespace()+"/"+b.GetMetadata().GetName())
		}
	}
	return users, nil
}
