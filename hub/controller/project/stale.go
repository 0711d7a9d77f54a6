package project

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// staleConfig holds the stale rules' durations.
type staleConfig struct {
	minimumLifetime, gracePeriod, expiration, syncPeriod time.Duration
}

// staleReconciler is Gardener's project-stale controller: every syncPeriod per project, a project nobody uses is
// marked stale, gets an auto-delete time after the grace period, and is deleted once that time has passed.
type staleReconciler struct {
	c     *collections
	cfg   staleConfig
	clock clock.PassiveClock
	log   *slog.Logger
}

// Reconcile checks the staleness of the Project key.Name and asks to look again after the sync period.
func (r *staleReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	p, ok, err := controller.Get[*corev1beta1.Project](ctx, r.c.projects, key)
	if err != nil {
		return controller.Result{}, fmt.Errorf("get project %s: %w", key.Name, err)
	}
	if !ok {
		return controller.Result{}, nil
	}
	if err := r.reconcile(ctx, p); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{RequeueAfter: r.cfg.syncPeriod}, nil
}

func (r *staleReconciler) reconcile(ctx context.Context, p *corev1beta1.Project) error {
	if p.GetMetadata().GetDeletionTimestamp() != nil || p.GetSpec().GetNamespace() == "" {
		return nil
	}
	name, namespace := p.GetMetadata().GetName(), p.GetSpec().GetNamespace()
	log := r.log.With("project", name, "namespace", namespace)
	nsObj, err := r.c.namespaces.Get(ctx, "", namespace)
	if apierrors.IsNotFound(err) {
		// Gardener retries with backoff; the namespace's creation enqueues the project, and the sync period follows.
		log.Info("the project namespace does not exist (yet); not checking staleness")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	now := r.clock.Now()
	if reason := r.cfg.notStale(now, p, nsObj.(*kcorev1.Namespace)); reason != "" {
		log.Info("project is not stale: " + reason)
		return r.setStale(ctx, name, nil, nil)
	}
	for _, check := range []struct {
		resource string
		inUse    func(context.Context, string) (bool, error)
	}{
		{"Shoots", r.usedByShoots}, {"BackupEntries", r.usedByBackupEntries}, {"Secrets", r.usedBySecrets},
		{"InternalSecrets", r.usedByInternalSecrets}, {"WorkloadIdentities", r.usedByWorkloadIdentities}, {"Quotas", r.usedByQuotas},
	} {
		used, err := check.inUse(ctx, namespace)
		if err != nil {
			return fmt.Errorf("check whether project %s is used by %s: %w", name, check.resource, err)
		}
		if used {
			log.Info("project is in use, not stale", "resource", check.resource)
			return r.setStale(ctx, name, nil, nil)
		}
	}
	since, autoDelete := r.cfg.staleTimestamps(now, asTime(p.GetStatus().GetStaleSinceTimestamp()), asTime(p.GetStatus().GetStaleAutoDeleteTimestamp()))
	log.Info("project is not in use by any resource: stale", "staleSinceTimestamp", since, "staleAutoDeleteTimestamp", autoDelete)
	if err := r.setStale(ctx, name, since, autoDelete); err != nil {
		return err
	}
	if autoDelete == nil || now.Before(*autoDelete) {
		return nil
	}
	log.Info("deleting the project: its auto-delete time has passed", "staleAutoDeleteTimestamp", autoDelete)
	return r.deleteProject(ctx, name)
}

// notStale says why a project is not stale whatever uses it, or "": its namespace skips the check, or the project
// is younger than the minimum lifetime, or was active within it.
func (c staleConfig) notStale(now time.Time, p *corev1beta1.Project, ns *kcorev1.Namespace) string {
	if skip, _ := strconv.ParseBool(ns.GetMetadata().GetAnnotations()[AnnotationSkipStaleCheck]); skip {
		return "the namespace is annotated " + AnnotationSkipStaleCheck
	}
	if ct := p.GetMetadata().GetCreationTimestamp(); ct != nil && ct.AsTime().Add(c.minimumLifetime).After(now) {
		return "younger than the minimum lifetime"
	}
	if la := p.GetStatus().GetLastActivityTimestamp(); la != nil && la.AsTime().Add(c.minimumLifetime).After(now) {
		return "active within the minimum lifetime"
	}
	return ""
}

// staleTimestamps computes status.staleSinceTimestamp and staleAutoDeleteTimestamp of a project found stale at now,
// given their current values (nil: unset). Stale since the first time it was found so; no auto-delete time within
// the grace period (a set one is cleared, so that a changed configuration applies); after it, stale since +
// expiration, but never earlier than an auto-delete time already set (users may rely on it): a shorter expiration
// does not move it, a longer one does.
func (c staleConfig) staleTimestamps(now time.Time, since, autoDelete *time.Time) (*time.Time, *time.Time) {
	if since == nil {
		t := now.UTC().Truncate(time.Second) // the precision of Kubernetes' timestamps
		since = &t
	}
	if since.Add(c.gracePeriod).After(now) {
		return since, nil
	}
	next := since.Add(c.expiration)
	if autoDelete == nil || next.After(*autoDelete) {
		return since, &next
	}
	return since, autoDelete
}

func asTime(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func asTimestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// setStale writes the stale timestamps (nil clears them).
func (r *staleReconciler) setStale(ctx context.Context, name string, since, autoDelete *time.Time) error {
	_, err := r.c.projects.GuaranteedUpdate(ctx, "", name, true, func(cur store.Object) (store.Object, error) {
		p := cur.(*corev1beta1.Project)
		if p.Status == nil {
			p.Status = &corev1beta1.ProjectStatus{}
		}
		p.Status.StaleSinceTimestamp, p.Status.StaleAutoDeleteTimestamp = asTimestamp(since), asTimestamp(autoDelete)
		return p, nil // the store writes nothing when nothing changed
	})
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("update the stale timestamps of project %s: %w", name, err)
	}
	return nil
}

// deleteProject deletes the project the way a user must: confirmed by annotation first.
func (r *staleReconciler) deleteProject(ctx context.Context, name string) error {
	_, err := r.c.projects.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if md.GetAnnotations()[AnnotationConfirmDeletion] == "true" {
			return nil, nil
		}
		if md.Annotations == nil {
			md.Annotations = map[string]string{}
		}
		md.Annotations[AnnotationConfirmDeletion] = "true"
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("confirm the deletion of project %s: %w", name, err)
	}
	if _, _, err := r.c.projects.Delete(ctx, "", name, nil); ignoreNotFound(err) != nil {
		return fmt.Errorf("delete project %s: %w", name, err)
	}
	return nil
}

// Uses of a project, as Gardener's stale controller counts them.

func (r *staleReconciler) usedByShoots(ctx context.Context, namespace string) (bool, error) {
	items, err := listIn(ctx, r.c.shoots, namespace)
	return len(items) > 0, err
}

func (r *staleReconciler) usedByBackupEntries(ctx context.Context, namespace string) (bool, error) {
	items, err := listIn(ctx, r.c.backupEntries, namespace)
	return len(items) > 0, err
}

// controlPlaneSecretRoles are the gardener.cloud/role values of secrets Gardener writes for shoots (kubeconfig,
// ssh-keypair, monitoring); such secrets are no sign of use.
var controlPlaneSecretRoles = sets.New("kubeconfig", "ssh-keypair", "monitoring")

// labelled names the objects of c in namespace that carry label=true (and, for secrets, are no control-plane
// secrets).
func labelled(ctx context.Context, c *store.Collection, namespace, label string, secrets bool) (sets.Set[string], error) {
	items, err := listIn(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	names := sets.New[string]()
	for _, o := range items {
		l := o.GetMetadata().GetLabels()
		if l[label] != "true" || secrets && controlPlaneSecretRoles.Has(l[LabelRole]) {
			continue
		}
		names.Insert(o.GetMetadata().GetName())
	}
	return names, nil
}

// usedBySecrets: a secret of the namespace, labelled as referenced by a binding, is referenced by a binding that a
// shoot uses.
func (r *staleReconciler) usedBySecrets(ctx context.Context, namespace string) (bool, error) {
	names, err := labelled(ctx, r.c.secrets, namespace, LabelSecretBindingReference, true)
	if err != nil {
		return false, err
	}
	if names.Len() > 0 {
		used, err := r.secretBindingsInUse(ctx, func(sb *corev1beta1.SecretBinding) bool {
			return sb.GetSecretRef().GetNamespace() == namespace && names.Has(sb.GetSecretRef().GetName())
		})
		if used || err != nil {
			return used, err
		}
	}
	names, err = labelled(ctx, r.c.secrets, namespace, LabelCredentialsBindingReference, true)
	if err != nil || names.Len() == 0 {
		return false, err
	}
	return r.credentialsBindingsInUse(ctx, credentialsRefTo("v1", "Secret", namespace, names))
}

func (r *staleReconciler) usedByInternalSecrets(ctx context.Context, namespace string) (bool, error) {
	names, err := labelled(ctx, r.c.internalSecrets, namespace, LabelCredentialsBindingReference, false)
	if err != nil || names.Len() == 0 {
		return false, err
	}
	return r.credentialsBindingsInUse(ctx, credentialsRefTo("core.gardener.cloud/v1beta1", "InternalSecret", namespace, names))
}

func (r *staleReconciler) usedByWorkloadIdentities(ctx context.Context, namespace string) (bool, error) {
	names, err := labelled(ctx, r.c.workloadIdentities, namespace, LabelCredentialsBindingReference, false)
	if err != nil || names.Len() == 0 {
		return false, err
	}
	return r.credentialsBindingsInUse(ctx, credentialsRefTo("security.gardener.cloud/v1alpha1", "WorkloadIdentity", namespace, names))
}

func credentialsRefTo(apiVersion, kind, namespace string, names sets.Set[string]) func(*securityv1alpha1.CredentialsBinding) bool {
	return func(cb *securityv1alpha1.CredentialsBinding) bool {
		ref := cb.GetCredentialsRef()
		return ref.GetApiVersion() == apiVersion && ref.GetKind() == kind && ref.GetNamespace() == namespace && names.Has(ref.GetName())
	}
}

// usedByQuotas: a Quota of the namespace is referenced by a binding that a shoot uses.
func (r *staleReconciler) usedByQuotas(ctx context.Context, namespace string) (bool, error) {
	items, err := listIn(ctx, r.c.quotas, namespace)
	if err != nil || len(items) == 0 {
		return false, err
	}
	names := sets.New[string]()
	for _, o := range items {
		names.Insert(o.GetMetadata().GetName())
	}
	refersToQuota := func(ref *metav1.ObjectReference) bool {
		return ref.GetNamespace() == namespace && names.Has(ref.GetName())
	}
	used, err := r.secretBindingsInUse(ctx, func(sb *corev1beta1.SecretBinding) bool {
		for _, q := range sb.GetQuotas() {
			if refersToQuota(q) {
				return true
			}
		}
		return false
	})
	if used || err != nil {
		return used, err
	}
	return r.credentialsBindingsInUse(ctx, func(cb *securityv1alpha1.CredentialsBinding) bool {
		for _, q := range cb.GetQuotas() {
			if refersToQuota(q) {
				return true
			}
		}
		return false
	})
}

// secretBindingsInUse reports whether a shoot uses a SecretBinding (of any namespace) that matches.
func (r *staleReconciler) secretBindingsInUse(ctx context.Context, match func(*corev1beta1.SecretBinding) bool) (bool, error) {
	items, err := listIn(ctx, r.c.secretBindings, "")
	if err != nil {
		return false, err
	}
	byNamespace := map[string]sets.Set[string]{}
	for _, o := range items {
		if sb := o.(*corev1beta1.SecretBinding); match(sb) {
			insert(byNamespace, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName())
		}
	}
	return r.shootsUse(ctx, byNamespace, func(s *corev1beta1.Shoot) string { return s.GetSpec().GetSecretBindingName() })
}

// credentialsBindingsInUse reports whether a shoot uses a CredentialsBinding (of any namespace) that matches.
func (r *staleReconciler) credentialsBindingsInUse(ctx context.Context, match func(*securityv1alpha1.CredentialsBinding) bool) (bool, error) {
	items, err := listIn(ctx, r.c.credentialsBindings, "")
	if err != nil {
		return false, err
	}
	byNamespace := map[string]sets.Set[string]{}
	for _, o := range items {
		if cb := o.(*securityv1alpha1.CredentialsBinding); match(cb) {
			insert(byNamespace, cb.GetMetadata().GetNamespace(), cb.GetMetadata().GetName())
		}
	}
	return r.shootsUse(ctx, byNamespace, func(s *corev1beta1.Shoot) string { return s.GetSpec().GetCredentialsBindingName() })
}

func insert(m map[string]sets.Set[string], namespace, name string) {
	if m[namespace] == nil {
		m[namespace] = sets.New[string]()
	}
	m[namespace].Insert(name)
}

// shootsUse reports whether a shoot of one of the namespaces names one of its bindings.
func (r *staleReconciler) shootsUse(ctx context.Context, bindings map[string]sets.Set[string], binding func(*corev1beta1.Shoot) string) (bool, error) {
	for namespace, names := range bindings {
		shoots, err := listIn(ctx, r.c.shoots, namespace)
		if err != nil {
			return false, err
		}
		for _, o := range shoots {
			if names.Has(binding(o.(*corev1beta1.Shoot))) {
				return true, nil
			}
		}
	}
	return false, nil
}
