package shoot

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// quotaDigest: the bindings the quotas come from, the expiration annotation and the deletion. Gardener looks at a
// shoot when it appears and then every sync period; a new binding or a removed annotation is looked at at once here.
func quotaDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	return s.GetSpec().GetSecretBindingName() + "|" + s.GetSpec().GetCredentialsBindingName() + "|" +
		s.GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp] + deletionDigest(o)
}

// quotaReconciler deletes shoots whose cluster lifetime has ended.
type quotaReconciler struct {
	c          *collections
	syncPeriod time.Duration
	clock      clock.PassiveClock
	log        *slog.Logger
}

// Reconcile keeps the expiration annotation of a shoot with a limited lifetime and deletes the shoot once it has
// expired.
func (r *quotaReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.c.shoots, k)
	if err != nil || s == nil || s.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, err
	}
	lifetime, err := r.clusterLifetimeDays(ctx, s)
	if err != nil {
		return controller.Result{}, err
	}
	// Without a quota that limits the lifetime (any more), an existing expiration annotation goes: it is not
	// enforced.
	if lifetime == nil {
		if _, ok := s.GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp]; ok {
			r.log.Info("removing the expiration timestamp", "shoot", k.String())
			if _, err := updateShoot(ctx, r.c.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
				if _, ok := cur.GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp]; !ok {
					return false
				}
				delete(cur.Metadata.Annotations, AnnotationExpirationTimestamp)
				return true
			}); err != nil {
				return controller.Result{}, err
			}
		}
		return controller.Result{RequeueAfter: r.syncPeriod}, nil
	}
	value, ok := s.GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp]
	if !ok {
		// The lifetime counts from the creation; an annotation once set stays, even when the quotas change.
		value = s.GetMetadata().GetCreationTimestamp().AsTime().Add(time.Duration(*lifetime) * 24 * time.Hour).UTC().Format(time.RFC3339)
		r.log.Info("setting the expiration timestamp", "shoot", k.String(), "expirationTime", value)
		if _, err := updateShoot(ctx, r.c.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
			if _, ok := cur.GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp]; ok {
				return false
			}
			setAnnotation(cur, AnnotationExpirationTimestamp, value)
			return true
		}); err != nil {
			return controller.Result{}, err
		}
	}
	expiration, err := parseExpiration(value)
	if err != nil {
		return controller.Result{}, fmt.Errorf("shoot %s: %w", k, err)
	}
	now := r.clock.Now()
	if !now.After(expiration) {
		// Gardener looks again after the sync period; the expiration is looked at on time here.
		return controller.Result{RequeueAfter: min(r.syncPeriod, expiration.Sub(now)+time.Second)}, nil
	}
	r.log.Info("the shoot's lifetime has expired; deleting it", "shoot", k.String(), "expirationTime", value)
	if _, err := updateShoot(ctx, r.c.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
		if cur.GetMetadata().GetAnnotations()[AnnotationConfirmDeletion] == "true" {
			return false
		}
		setAnnotation(cur, AnnotationConfirmDeletion, "true")
		return true
	}); err != nil {
		return controller.Result{}, err
	}
	if _, _, err := r.c.shoots.Delete(ctx, k.Namespace, k.Name, &metav1.Preconditions{Uid: &s.Metadata.Uid}); err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, fmt.Errorf("delete the expired shoot %s: %w", k, err)
	}
	return controller.Result{}, nil
}

// parseExpiration reads the expiration annotation (RFC 3339).
func parseExpiration(value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s=%q is not an RFC 3339 time: %w", AnnotationExpirationTimestamp, value, err)
	}
	return t, nil
}

// clusterLifetimeDays returns the smallest clusterLifetimeDays of the quotas of the shoot's secret binding or, when it
// has none, credentials binding; nil when none limits the lifetime. A binding or quota that cannot be read fails the
// reconciliation, to be retried.
func (r *quotaReconciler) clusterLifetimeDays(ctx context.Context, s *corev1beta1.Shoot) (*int32, error) {
	ns := s.GetMetadata().GetNamespace()
	var refs []*metav1.ObjectReference
	switch {
	case s.GetSpec().GetSecretBindingName() != "":
		obj, err := r.c.secretBindings.Get(ctx, ns, s.GetSpec().GetSecretBindingName())
		if err != nil {
			return nil, fmt.Errorf("read SecretBinding %s/%s: %w", ns, s.GetSpec().GetSecretBindingName(), err)
		}
		refs = obj.(*corev1beta1.SecretBinding).GetQuotas()
	case s.GetSpec().GetCredentialsBindingName() != "":
		obj, err := r.c.credentialsBindings.Get(ctx, ns, s.GetSpec().GetCredentialsBindingName())
		if err != nil {
			return nil, fmt.Errorf("read CredentialsBinding %s/%s: %w", ns, s.GetSpec().GetCredentialsBindingName(), err)
		}
		refs = obj.(*securityv1alpha1.CredentialsBinding).GetQuotas()
	}
	var lifetime *int32
	for _, ref := range refs {
		obj, err := r.c.quotas.Get(ctx, ref.GetNamespace(), ref.GetName())
		if err != nil {
			return nil, fmt.Errorf("read Quota %s/%s: %w", ref.GetNamespace(), ref.GetName(), err)
		}
		q := obj.(*corev1beta1.Quota)
		if d := q.GetSpec().ClusterLifetimeDays; d != nil && (lifetime == nil || *d < *lifetime) {
			lifetime = d
		}
	}
	return lifetime, nil
}
