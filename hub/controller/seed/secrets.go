package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Names, as Gardener's.
const (
	// NamespacePrefix prefixes a seed's namespace in the garden.
	NamespacePrefix = "seed-"
	// GardenNamespace holds the garden's shared secrets.
	GardenNamespace = "garden"
	// LabelGardenRole marks the shared secrets (its value is their role) and the seed namespaces ("seed").
	LabelGardenRole = "gardener.cloud/role"
	roleSeed        = "seed"
)

// secretsReconciler keeps a seed's namespace and its copies of the garden's shared secrets (Gardener's
// seed/secrets).
type secretsReconciler struct {
	seeds, namespaces, secrets *store.Collection
	log                        *slog.Logger
}

func (r *secretsReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	ns := NamespacePrefix + key.Name
	seed, ok, err := controller.Get[*corev1beta1.Seed](ctx, r.seeds, key)
	if err != nil {
		return controller.Result{}, err
	}
	if !ok {
		return controller.Result{}, r.cleanup(ctx, ns)
	}
	owner := &metav1.OwnerReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Name: key.Name, Uid: seed.GetMetadata().GetUid(),
		Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
	cur, err := r.namespaces.Get(ctx, "", ns)
	switch {
	case apierrors.IsNotFound(err):
		if _, err := r.namespaces.Create(ctx, &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace",
			Metadata: &metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelGardenRole: roleSeed}, OwnerReferences: []*metav1.OwnerReference{owner}}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return controller.Result{}, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	case err != nil:
		return controller.Result{}, err
	default:
		if !controlledBy(cur.GetMetadata(), seed) {
			return controller.Result{}, fmt.Errorf("namespace %q is not controlled by seed %q", ns, key.Name)
		}
		if cur.GetMetadata().GetLabels()[LabelGardenRole] != roleSeed {
			if _, err := r.namespaces.GuaranteedUpdate(ctx, "", ns, false, func(o store.Object) (store.Object, error) {
				md := o.GetMetadata()
				if md.Labels == nil {
					md.Labels = map[string]string{}
				}
				md.Labels[LabelGardenRole] = roleSeed
				return o, nil
			}); err != nil {
				return controller.Result{}, err
			}
		}
	}
	shared, err := r.shared(ctx)
	if err != nil {
		return controller.Result{}, err
	}
	var errs []error
	for _, s := range shared {
		if err := r.copy(ctx, s, ns); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.deleteStale(ctx, ns, shared))
	return controller.Result{}, errors.Join(errs...)
}

// controlledBy reports whether md names seed as its controller.
func controlledBy(md *metav1.ObjectMeta, seed *corev1beta1.Seed) bool {
	return slices.ContainsFunc(md.GetOwnerReferences(), func(o *metav1.OwnerReference) bool {
		return o.GetController() && o.GetKind() == "Seed" && o.GetUid() == seed.GetMetadata().GetUid()
	})
}

// shared lists the garden's shared secrets: namespace garden, label gardener.cloud/role.
func (r *secretsReconciler) shared(ctx context.Context) ([]*kcorev1.Secret, error) {
	res, err := r.secrets.List(ctx, GardenNamespace, store.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*kcorev1.Secret
	for _, o := range res.Items {
		if s := o.(*kcorev1.Secret); s.GetMetadata().GetLabels()[LabelGardenRole] != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// copy makes the seed namespace's copy of s equal to it (labels, annotations, type, data).
func (r *secretsReconciler) copy(ctx context.Context, s *kcorev1.Secret, ns string) error {
	md := s.GetMetadata()
	want := func(dst *kcorev1.Secret) {
		dst.Metadata.Labels = maps.Clone(md.GetLabels())
		dst.Metadata.Annotations = maps.Clone(md.GetAnnotations())
		dst.Type = s.GetType()
		dst.Data = maps.Clone(s.GetData())
	}
	_, err := r.secrets.GuaranteedUpdate(ctx, ns, md.GetName(), false, func(cur store.Object) (store.Object, error) {
		c := cur.(*kcorev1.Secret)
		before := proto.Clone(c)
		want(c)
		if proto.Equal(before, c) {
			return nil, nil
		}
		return c, nil
	})
	if apierrors.IsNotFound(err) {
		c := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Metadata: &metav1.ObjectMeta{Namespace: ns, Name: md.GetName()}}
		want(c)
		_, err = r.secrets.Create(ctx, c)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("copy secret %s/%s to %s: %w", GardenNamespace, md.GetName(), ns, err)
	}
	return nil
}

// deleteStale deletes the copies in ns (secrets with the role label) of shared secrets that are no longer shared.
func (r *secretsReconciler) deleteStale(ctx context.Context, ns string, shared []*kcorev1.Secret) error {
	keep := map[string]bool{}
	for _, s := range shared {
		keep[s.GetMetadata().GetName()] = true
	}
	res, err := r.secrets.List(ctx, ns, store.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range res.Items {
		md := o.GetMetadata()
		if md.GetLabels()[LabelGardenRole] == "" || keep[md.GetName()] {
			continue
		}
		if _, _, err := r.secrets.Delete(ctx, ns, md.GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete stale copy %s/%s: %w", ns, md.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// cleanup removes the namespace of a seed that is gone, with its secrets (Gardener's garbage collector and namespace
// controller do this through the owner reference; the hub has neither).
func (r *secretsReconciler) cleanup(ctx context.Context, ns string) error {
	res, err := r.secrets.List(ctx, ns, store.ListOptions{})
	if err != nil {
		return err
	}
	for _, o := range res.Items {
		if _, _, err := r.secrets.Delete(ctx, ns, o.GetMetadata().GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete secret %s/%s of a deleted seed: %w", ns, o.GetMetadata().GetName(), err)
		}
	}
	if _, _, err := r.namespaces.Delete(ctx, "", ns, nil); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	r.log.Info("removed the namespace of a deleted seed", "namespace", ns)
	return nil
}
