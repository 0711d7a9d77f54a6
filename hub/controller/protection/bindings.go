package protection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// bindingKind is what differs between SecretBindings and CredentialsBindings.
type bindingKind struct {
	name string // "SecretBinding", "CredentialsBinding"
	// referenceLabel marks the credentials and quotas the kind references; otherLabel is the other kind's.
	referenceLabel, otherLabel string
	collection                 func(*collections) *store.Collection
	other                      func(*collections) *store.Collection
	// credentials is the kind ("Secret" or "WorkloadIdentity"), namespace and name of the credentials a binding
	// references.
	credentials func(store.Object) (kind, namespace, name string)
	quotas      func(store.Object) []*metav1.ObjectReference
	types       func(store.Object) []string
	// usedBy reports whether a shoot names the binding.
	usedBy func(s *corev1beta1.Shoot, binding string) bool
}

func secretBindingKind() bindingKind {
	return bindingKind{name: "SecretBinding", referenceLabel: LabelSecretBindingReference, otherLabel: LabelCredentialsBindingReference,
		collection: func(c *collections) *store.Collection { return c.secretBindings },
		other:      func(c *collections) *store.Collection { return c.credentialsBindings },
		credentials: func(o store.Object) (string, string, string) {
			b := o.(*corev1beta1.SecretBinding)
			ns := b.GetSecretRef().GetNamespace()
			if ns == "" {
				ns = b.GetMetadata().GetNamespace()
			}
			return "Secret", ns, b.GetSecretRef().GetName()
		},
		quotas: func(o store.Object) []*metav1.ObjectReference { return o.(*corev1beta1.SecretBinding).GetQuotas() },
		types: func(o store.Object) []string {
			return splitTypes(o.(*corev1beta1.SecretBinding).GetProvider().GetType())
		},
		usedBy: func(s *corev1beta1.Shoot, b string) bool { return s.GetSpec().GetSecretBindingName() == b },
	}
}

func credentialsBindingKind() bindingKind {
	return bindingKind{name: "CredentialsBinding", referenceLabel: LabelCredentialsBindingReference, otherLabel: LabelSecretBindingReference,
		collection: func(c *collections) *store.Collection { return c.credentialsBindings },
		other:      func(c *collections) *store.Collection { return c.secretBindings },
		credentials: func(o store.Object) (string, string, string) {
			b := o.(*securityv1alpha1.CredentialsBinding)
			r := b.GetCredentialsRef()
			ns := r.GetNamespace()
			if ns == "" {
				ns = b.GetMetadata().GetNamespace()
			}
			return r.GetKind(), ns, r.GetName()
		},
		quotas: func(o store.Object) []*metav1.ObjectReference {
			return o.(*securityv1alpha1.CredentialsBinding).GetQuotas()
		},
		types: func(o store.Object) []string {
			return splitTypes(o.(*securityv1alpha1.CredentialsBinding).GetProvider().GetType())
		},
		usedBy: func(s *corev1beta1.Shoot, b string) bool { return s.GetSpec().GetCredentialsBindingName() == b },
	}
}

// splitTypes is Gardener's GetSecretBindingTypes: a comma-separated list of provider types.
func splitTypes(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// refKeys are the keys of references made from namespace (an empty namespace is namespace).
func refKeys(namespace string, refs []*metav1.ObjectReference) []controller.Key {
	var keys []controller.Key
	for _, r := range refs {
		ns := r.GetNamespace()
		if ns == "" {
			ns = namespace
		}
		keys = append(keys, controller.Key{Namespace: ns, Name: r.GetName()})
	}
	return keys
}

// bindingSources feed a binding controller: the bindings, and the shoots naming them (their deletion lets a binding
// go).
func bindingSources(bindings, shoots *store.Collection, name func(*corev1beta1.Shoot) string) []controller.Source {
	return []controller.Source{
		{Collection: bindings, Digest: func(o store.Object) string {
			b, _ := storeJSONish(o)
			return b + finalizerDigest(o)
		}},
		{Collection: shoots, Map: func(o store.Object) []controller.Key {
			s := o.(*corev1beta1.Shoot)
			if n := name(s); n != "" {
				return []controller.Key{{Namespace: s.GetMetadata().GetNamespace(), Name: n}}
			}
			return nil
		}, Digest: func(store.Object) string { return "" }},
	}
}

// storeJSONish summarises what a binding references.
func storeJSONish(o store.Object) (string, bool) {
	switch b := o.(type) {
	case *corev1beta1.SecretBinding:
		return fmt.Sprintf("%v|%v|%v", b.GetSecretRef(), b.GetQuotas(), b.GetProvider()), true
	case *securityv1alpha1.CredentialsBinding:
		return fmt.Sprintf("%v|%v|%v", b.GetCredentialsRef(), b.GetQuotas(), b.GetProvider()), true
	}
	return "", false
}

// bindingReconciler protects a binding while shoots use it, and the credentials and quotas it references while it
// exists (Gardener's secretbinding and credentialsbinding controllers).
type bindingReconciler struct {
	c      *collections
	log    *slog.Logger
	events *controller.Recorder
	kind   bindingKind
}

func (r *bindingReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	col := r.kind.collection(r.c)
	obj, ok, err := controller.Get[store.Object](ctx, col, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	md := obj.GetMetadata()
	if md.GetDeletionTimestamp() != nil {
		if !slices.Contains(md.GetFinalizers(), FinalizerGardener) {
			return controller.Result{}, nil
		}
		users, err := r.c.shootUsers(ctx, key.Namespace, func(s *corev1beta1.Shoot) bool { return r.kind.usedBy(s, key.Name) })
		if err != nil {
			return controller.Result{}, err
		}
		if len(users) > 0 {
			r.events.Eventf(ctx, obj, controller.EventWarning, controller.EventResourceReferenced,
				"Cannot delete %s, because the following Shoots are still referencing it: %s", r.kind.name, strings.Join(users, ", "))
			return controller.Result{}, nil
		}
		if err := r.release(ctx, obj); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, setFinalizer(ctx, col, key, FinalizerGardener, false)
	}
	if err := setFinalizer(ctx, col, key, FinalizerGardener, true); err != nil {
		return controller.Result{}, err
	}
	credKind, credNS, credName := r.kind.credentials(obj)
	credentials := r.credentialsCollection(credKind)
	if credentials == nil || credName == "" {
		return controller.Result{}, nil // admission refuses other kinds; nothing to protect
	}
	if _, err := credentials.GuaranteedUpdate(ctx, credNS, credName, false, func(cur store.Object) (store.Object, error) {
		cm := cur.GetMetadata()
		changed := false
		if cm.GetDeletionTimestamp() == nil && !slices.Contains(cm.Finalizers, FinalizerExternal) {
			cm.Finalizers = append(cm.Finalizers, FinalizerExternal)
			changed = true
		}
		want := []string{r.kind.referenceLabel}
		for _, t := range r.kind.types(obj) {
			want = append(want, LabelShootProviderPrefix+t)
		}
		for _, l := range want {
			if cm.Labels[l] != "true" {
				if cm.Labels == nil {
					cm.Labels = map[string]string{}
				}
				cm.Labels[l], changed = "true", true
			}
		}
		if !changed {
			return nil, nil
		}
		return cur, nil
	}); err != nil {
		return controller.Result{}, fmt.Errorf("protect %s %s/%s referenced by %s %s: %w", credKind, credNS, credName, r.kind.name, key, err)
	}
	for _, q := range refKeys(key.Namespace, r.kind.quotas(obj)) {
		if err := setLabel(ctx, r.c.quotas, q, r.kind.referenceLabel, true); err != nil {
			return controller.Result{}, fmt.Errorf("label Quota %s referenced by %s %s: %w", q, r.kind.name, key, err)
		}
	}
	return controller.Result{}, nil
}

func (r *bindingReconciler) credentialsCollection(kind string) *store.Collection {
	switch kind {
	case "Secret", "":
		return r.c.secrets
	case "WorkloadIdentity":
		return r.c.workloadIdentities
	}
	return nil
}

// release undoes what a binding did to its credentials and quotas, unless another binding of the same kind
// references them too; the finalizer and the provider labels stay while a binding of the other kind references the
// credentials.
func (r *bindingReconciler) release(ctx context.Context, obj store.Object) error {
	md := obj.GetMetadata()
	self := controller.Key{Namespace: md.GetNamespace(), Name: md.GetName()}
	credKind, credNS, credName := r.kind.credentials(obj)
	others, err := r.kind.collection(r.c).List(ctx, "", store.ListOptions{})
	if err != nil {
		return err
	}
	credentialsShared := false
	quotaShared := map[controller.Key]bool{}
	for _, o := range others.Items {
		om := o.GetMetadata()
		if (controller.Key{Namespace: om.GetNamespace(), Name: om.GetName()}) == self {
			continue
		}
		if k, ns, n := r.kind.credentials(o); k == credKind && ns == credNS && n == credName {
			credentialsShared = true
		}
		for _, q := range refKeys(om.GetNamespace(), r.kind.quotas(o)) {
			quotaShared[q] = true
		}
	}
	if col := r.credentialsCollection(credKind); col != nil && credName != "" && !credentialsShared {
		_, err := col.GuaranteedUpdate(ctx, credNS, credName, false, func(cur store.Object) (store.Object, error) {
			cm := cur.GetMetadata()
			_, otherKind := cm.Labels[r.kind.otherLabel]
			changed := false
			if _, ok := cm.Labels[r.kind.referenceLabel]; ok {
				delete(cm.Labels, r.kind.referenceLabel)
				changed = true
			}
			if !otherKind {
				for l := range cm.Labels {
					if strings.HasPrefix(l, LabelShootProviderPrefix) {
						delete(cm.Labels, l)
						changed = true
					}
				}
				if i := slices.Index(cm.Finalizers, FinalizerExternal); i >= 0 {
					cm.Finalizers = slices.Delete(cm.Finalizers, i, i+1)
					changed = true
				}
			}
			if !changed {
				return nil, nil
			}
			return cur, nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release %s %s/%s: %w", credKind, credNS, credName, err)
		}
	}
	for _, q := range refKeys(md.GetNamespace(), r.kind.quotas(obj)) {
		if quotaShared[q] {
			continue
		}
		if err := setLabel(ctx, r.c.quotas, q, r.kind.referenceLabel, false); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release Quota %s: %w", q, err)
		}
	}
	return nil
}

// setFinalizer adds (on) or removes the finalizer f of the object key; a finalizer is never added to an object
// being deleted.
func setFinalizer(ctx context.Context, c *store.Collection, key controller.Key, f string, on bool) error {
	_, err := c.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		has := slices.Contains(md.Finalizers, f)
		switch {
		case on && !has && md.GetDeletionTimestamp() == nil:
			md.Finalizers = append(md.Finalizers, f)
		case !on && has:
			md.Finalizers = slices.DeleteFunc(md.Finalizers, func(x string) bool { return x == f })
		default:
			return nil, nil
		}
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setLabel sets (on: to "true") or removes the label l of the object key.
func setLabel(ctx context.Context, c *store.Collection, key controller.Key, l string, on bool) error {
	_, err := c.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		_, has := md.Labels[l]
		switch {
		case on && md.Labels[l] != "true":
			if md.Labels == nil {
				md.Labels = map[string]string{}
			}
			md.Labels[l] = "true"
		case !on && has:
			delete(md.Labels, l)
		default:
			return nil, nil
		}
		return cur, nil
	})
	return err
}
