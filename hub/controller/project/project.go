package project

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// projectAPIVersion is the apiVersion of Projects in owner references.
const projectAPIVersion = "core.gardener.cloud/v1beta1"

// recheckRelease is how often a deletion looks at a namespace that is still going, besides the namespace's own
// changes (Gardener: a minute).
const recheckRelease = time.Minute

// projectReconciler is Gardener's project controller: finalizer, namespace, phase, and the release of the namespace
// on deletion.
type projectReconciler struct {
	c   *collections
	rec *controller.Recorder
	log *slog.Logger
}

// Reconcile reconciles the Project key.Name.
func (r *projectReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	obj, ok, err := controller.Get[*corev1beta1.Project](ctx, r.c.projects, key)
	if err != nil {
		return controller.Result{}, fmt.Errorf("get project %s: %w", key.Name, err)
	}
	if !ok {
		return controller.Result{}, nil
	}
	// A private copy: the reconciliation keeps it up to date with what it writes (setPhase).
	p := proto.Clone(obj).(*corev1beta1.Project)
	if p.GetMetadata().GetDeletionTimestamp() != nil {
		return r.delete(ctx, p)
	}
	return controller.Result{}, r.reconcile(ctx, p)
}

func (r *projectReconciler) reconcile(ctx context.Context, p *corev1beta1.Project) error {
	name := p.GetMetadata().GetName()
	if !slices.Contains(p.GetMetadata().GetFinalizers(), FinalizerGardener) {
		if err := r.updateFinalizer(ctx, name, true); err != nil {
			return err
		}
	}
	if p.GetStatus().GetPhase() == "" {
		if err := r.setPhase(ctx, p, PhasePending); err != nil {
			return err
		}
	}
	ns, err := r.ensureNamespace(ctx, p)
	if err != nil {
		return r.failed(ctx, p, err)
	}
	r.rec.Eventf(ctx, p, controller.EventNormal, ReasonNamespaceReconcileSuccessful, "Successfully reconciled namespace %q for project", ns)
	if p.GetSpec().GetNamespace() == "" {
		// Only a project written past admission (which defaults spec.namespace) gets here.
		out, err := r.c.projects.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
			cp := cur.(*corev1beta1.Project)
			if cp.GetSpec().GetNamespace() != "" {
				return nil, nil
			}
			if cp.Spec == nil {
				cp.Spec = &corev1beta1.ProjectSpec{}
			}
			cp.Spec.Namespace = &ns
			return cp, nil
		})
		if err != nil {
			err = fmt.Errorf("set spec.namespace of project %s: %w", name, err)
			return r.failed(ctx, p, err)
		}
		p = out.(*corev1beta1.Project) // the reconciled state is now this generation
	}
	// Gardener writes the default quotas as a ResourceQuota and the members' RBAC here; the hub enforces the quotas at
	// admission and authorizes members from the Project itself, so there is nothing to write.
	if err := r.setPhase(ctx, p, PhaseReady); err != nil {
		r.rec.Eventf(ctx, p, controller.EventWarning, ReasonNamespaceReconcileFailed, "Error while trying to mark project as ready: %v", err)
		return err
	}
	return nil
}

// failed records a failed reconciliation: a Warning event saying err, phase Failed, and err for a retry.
func (r *projectReconciler) failed(ctx context.Context, p *corev1beta1.Project, err error) error {
	r.rec.Eventf(ctx, p, controller.EventWarning, ReasonNamespaceReconcileFailed, "%v", err)
	if perr := r.setPhase(ctx, p, PhaseFailed); perr != nil {
		r.log.Error("updating the project status failed", "project", p.GetMetadata().GetName(), "err", perr)
	}
	return err
}

func (r *projectReconciler) delete(ctx context.Context, p *corev1beta1.Project) (controller.Result, error) {
	name := p.GetMetadata().GetName()
	if !slices.Contains(p.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return controller.Result{}, nil
	}
	if ns := p.GetSpec().GetNamespace(); ns != "" {
		shoots, err := listIn(ctx, r.c.shoots, ns)
		if err != nil {
			return controller.Result{}, fmt.Errorf("check whether namespace %s is empty: %w", ns, err)
		}
		if len(shoots) > 0 {
			r.rec.Eventf(ctx, p, controller.EventWarning, ReasonNamespaceNotEmpty, "Cannot release namespace %q because it still contains Shoots", ns)
			r.log.Info("cannot release the project namespace because it still contains shoots", "project", name, "namespace", ns, "shoots", len(shoots))
			// The shoots' deletions enqueue the project.
			return controller.Result{}, r.setPhase(ctx, p, PhaseTerminating)
		}
		released, marked, err := r.releaseNamespace(ctx, p, ns)
		if marked {
			r.rec.Eventf(ctx, p, controller.EventNormal, ReasonNamespaceMarkedForDeletion, "Successfully marked project namespace %q for deletion", ns)
		}
		if err != nil {
			r.rec.Eventf(ctx, p, controller.EventWarning, ReasonNamespaceDeletionFailed, "Failed to release project namespace %q: %v", ns, err)
			if perr := r.setPhase(ctx, p, PhaseFailed); perr != nil {
				r.log.Error("updating the project status failed", "project", name, "err", perr)
			}
			return controller.Result{}, fmt.Errorf("release project namespace %s: %w", ns, err)
		}
		if !released {
			// The namespace's deletion enqueues the project; the recheck covers content held by finalizers.
			return controller.Result{RequeueAfter: recheckRelease}, r.setPhase(ctx, p, PhaseTerminating)
		}
	}
	r.log.Info("removing the finalizer", "project", name)
	return controller.Result{}, r.updateFinalizer(ctx, name, false)
}

// setPhase writes status.phase and status.observedGeneration (the generation of p, the state reconciled).
func (r *projectReconciler) setPhase(ctx context.Context, p *corev1beta1.Project, phase string) error {
	gen := p.GetMetadata().GetGeneration()
	out, err := r.c.projects.GuaranteedUpdate(ctx, "", p.GetMetadata().GetName(), true, func(cur store.Object) (store.Object, error) {
		cp := cur.(*corev1beta1.Project)
		if cp.Status == nil {
			cp.Status = &corev1beta1.ProjectStatus{}
		}
		if cp.Status.Phase == phase && cp.Status.GetObservedGeneration() == gen {
			return nil, nil
		}
		cp.Status.Phase, cp.Status.ObservedGeneration = phase, &gen
		return cp, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set phase %s of project %s: %w", phase, p.GetMetadata().GetName(), err)
	}
	// Later decisions of this reconciliation read the phase.
	p.Status = out.(*corev1beta1.Project).GetStatus()
	return nil
}

// updateFinalizer adds (add) or removes the "gardener" finalizer, deciding on the current state: never added to a
// project being deleted.
func (r *projectReconciler) updateFinalizer(ctx context.Context, name string, add bool) error {
	_, err := r.c.projects.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		has := slices.Contains(md.GetFinalizers(), FinalizerGardener)
		switch {
		case add && !has && md.GetDeletionTimestamp() == nil:
			md.Finalizers = append(md.Finalizers, FinalizerGardener)
		case !add && has:
			md.Finalizers = slices.DeleteFunc(md.Finalizers, func(f string) bool { return f == FinalizerGardener })
		default:
			return nil, nil
		}
		return cur, nil
	})
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("update the finalizer of project %s: %w", name, err)
	}
	return nil
}
