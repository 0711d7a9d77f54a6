package project

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// NamespaceName is the namespace of a project: spec.namespace, or garden-<name> when it is unset (the hub's
// admission defaults spec.namespace to that name, so only projects written past admission lack it).
func NamespaceName(p *corev1beta1.Project) string {
	if ns := p.GetSpec().GetNamespace(); ns != "" {
		return ns
	}
	return "garden-" + p.GetMetadata().GetName()
}

// namespaceLabels are the labels a namespace must carry to belong to the project.
func namespaceLabels(p *corev1beta1.Project) map[string]string {
	return map[string]string{LabelRole: RoleProject, LabelProjectName: p.GetMetadata().GetName()}
}

// hasLabels reports whether have contains every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func ownerReference(p *corev1beta1.Project) *metav1.OwnerReference {
	return &metav1.OwnerReference{ApiVersion: projectAPIVersion, Kind: "Project", Name: p.GetMetadata().GetName(),
		Uid: p.GetMetadata().GetUid(), Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
}

// adoptable checks, as Gardener does, that an existing namespace may become the project's: it carries the project's
// labels (an unlabelled namespace is refused, so no project takes a namespace that is not meant for it), and it is
// not annotated as another project's.
func adoptable(ns *kcorev1.Namespace, p *corev1beta1.Project) error {
	md := ns.GetMetadata()
	if want := namespaceLabels(p); !hasLabels(md.GetLabels(), want) {
		return fmt.Errorf("namespace %q cannot be used as it needs the project labels %#v", md.GetName(), want)
	}
	if uid, ok := md.GetAnnotations()[AnnotationNamespaceProject]; ok && uid != p.GetMetadata().GetUid() {
		return fmt.Errorf("namespace %q is already in-use by another project", md.GetName())
	}
	return nil
}

// ensureNamespace creates the project's namespace or adopts the existing one, and returns its name.
func (r *projectReconciler) ensureNamespace(ctx context.Context, p *corev1beta1.Project) (string, error) {
	name := NamespaceName(p)
	obj, err := r.c.namespaces.Get(ctx, "", name)
	if apierrors.IsNotFound(err) {
		ns := &kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace",
			Metadata: &metav1.ObjectMeta{Name: name, Labels: namespaceLabels(p),
				Annotations: map[string]string{
					AnnotationNamespaceProject:           p.GetMetadata().GetUid(),
					AnnotationCreatedByProjectController: "true",
				},
				OwnerReferences: []*metav1.OwnerReference{ownerReference(p)}},
			// Written to the store directly, so without the API's defaults.
			Status: &kcorev1.NamespaceStatus{Phase: "Active"},
		}
		r.log.Info("creating the namespace of the project", "project", p.GetMetadata().GetName(), "namespace", name)
		if _, err := r.c.namespaces.Create(ctx, ns); err != nil {
			return "", fmt.Errorf("create namespace %q: %w", name, err)
		}
		return name, nil
	}
	if err != nil {
		return "", fmt.Errorf("get namespace %q: %w", name, err)
	}
	if err := adoptable(namespaceOf(obj), p); err != nil {
		return "", err
	}
	_, err = r.c.namespaces.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		ns := namespaceOf(cur)
		if adoptable(ns, p) != nil { // changed meanwhile: the next reconciliation reports it
			return nil, nil
		}
		md := ns.Metadata
		before := proto.Clone(md)
		md.OwnerReferences = mergeOwnerReference(md.OwnerReferences, ownerReference(p))
		if md.Annotations == nil {
			md.Annotations = map[string]string{}
		}
		md.Annotations[AnnotationNamespaceProject] = p.GetMetadata().GetUid()
		// A namespace the controller did not create outlives its project.
		if _, ok := md.Annotations[AnnotationCreatedByProjectController]; !ok {
			md.Annotations[AnnotationKeepAfterProjectDeletion] = "true"
		}
		if proto.Equal(before, md) {
			return nil, nil
		}
		r.log.Info("adopting the namespace of the project", "project", p.GetMetadata().GetName(), "namespace", name)
		return ns, nil
	})
	if err != nil {
		return "", fmt.Errorf("adopt namespace %q: %w", name, err)
	}
	return name, nil
}

// mergeOwnerReference replaces the reference with ref's uid, or appends ref.
func mergeOwnerReference(refs []*metav1.OwnerReference, ref *metav1.OwnerReference) []*metav1.OwnerReference {
	for i, r := range refs {
		if r.GetUid() == ref.GetUid() {
			refs[i] = ref
			return refs
		}
	}
	return append(refs, ref)
}

// releaseNamespace lets the project's namespace go: it is gone or not the project's (released), kept without the
// project's marks (keep-after-project-deletion), or deleted with its content (released once it is gone). marked
// reports that this call marked it for deletion.
func (r *projectReconciler) releaseNamespace(ctx context.Context, p *corev1beta1.Project, name string) (released, marked bool, err error) {
	obj, err := r.c.namespaces.Get(ctx, "", name)
	if apierrors.IsNotFound(err) {
		return true, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("get namespace: %w", err)
	}
	ns := namespaceOf(obj)
	// Namespaces of other projects are never touched ("stealing" a namespace by pointing spec.namespace at it).
	ours := hasLabels(ns.GetMetadata().GetLabels(), namespaceLabels(p))
	if ns.GetMetadata().GetDeletionTimestamp() == nil {
		if !ours {
			r.log.Info("the referenced namespace does not belong to the project; nothing to release", "project", p.GetMetadata().GetName(), "namespace", name)
			return true, false, nil
		}
		if keep, _ := strconv.ParseBool(ns.GetMetadata().GetAnnotations()[AnnotationKeepAfterProjectDeletion]); keep {
			r.log.Info("keeping the project namespace, without the project's labels and annotations", "project", p.GetMetadata().GetName(), "namespace", name)
			return true, false, r.disown(ctx, p, name)
		}
		if err := r.markForDeletion(ctx, name); err != nil {
			return false, false, err
		}
		marked = true
	} else if !ours {
		return false, false, nil // someone else's deletion: wait for it
	}
	// The namespace is being deleted: the hub has no namespace controller, so its content goes here.
	remaining, err := r.deleteContent(ctx, name)
	if err != nil {
		return false, marked, err
	}
	if remaining > 0 {
		r.log.Info("the project namespace still holds objects being deleted", "project", p.GetMetadata().GetName(), "namespace", name, "objects", remaining)
		return false, marked, nil
	}
	gone, err := r.dropContentFinalizer(ctx, name)
	return gone, marked, err
}

// disown removes the project's labels, annotations and owner reference from a namespace that stays.
func (r *projectReconciler) disown(ctx context.Context, p *corev1beta1.Project, name string) error {
	_, err := r.c.namespaces.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		before := proto.Clone(md)
		maps.DeleteFunc(md.Annotations, func(k, _ string) bool {
			return k == AnnotationNamespaceProject || k == AnnotationKeepAfterProjectDeletion || k == AnnotationCreatedByProjectController
		})
		maps.DeleteFunc(md.Labels, func(k, _ string) bool { return k == LabelProjectName || k == LabelRole })
		md.OwnerReferences = slices.DeleteFunc(md.OwnerReferences, func(ref *metav1.OwnerReference) bool {
			return ref.GetApiVersion() == projectAPIVersion && ref.GetKind() == "Project" &&
				ref.GetName() == p.GetMetadata().GetName() && ref.GetUid() == p.GetMetadata().GetUid()
		})
		if proto.Equal(before, md) {
			return nil, nil
		}
		return cur, nil
	})
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("release namespace %q: %w", name, err)
	}
	return nil
}

// markForDeletion adds FinalizerNamespaceContent to the namespace and deletes it, so that it stays, Terminating,
// until its content is gone.
func (r *projectReconciler) markForDeletion(ctx context.Context, name string) error {
	_, err := r.c.namespaces.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if md.GetDeletionTimestamp() != nil || slices.Contains(md.GetFinalizers(), FinalizerNamespaceContent) {
			return nil, nil
		}
		md.Finalizers = append(md.Finalizers, FinalizerNamespaceContent)
		return cur, nil
	})
	if err != nil {
		return fmt.Errorf("add finalizer %s to namespace %q: %w", FinalizerNamespaceContent, name, err)
	}
	r.log.Info("deleting the project namespace", "namespace", name)
	if _, _, err := r.c.namespaces.Delete(ctx, "", name, nil); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %q: %w", name, err)
	}
	return nil
}

// deleteContent deletes every object in the namespace but Shoots, and returns how many objects are left: Shoots
// (deleted only with Gardener's confirmation, by their owners) and objects whose finalizers keep them.
func (r *projectReconciler) deleteContent(ctx context.Context, namespace string) (remaining int, err error) {
	var errs []error
	for _, c := range r.c.namespaced {
		items, err := listIn(ctx, c, namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range items {
			md := o.GetMetadata()
			if c == r.c.shoots || md.GetDeletionTimestamp() != nil {
				remaining++
				continue
			}
			_, deleted, err := c.Delete(ctx, namespace, md.GetName(), &metav1.Preconditions{Uid: proto.String(md.GetUid())})
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err): // gone or replaced meanwhile
			case err != nil:
				errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", c.Resource().Resource, namespace, md.GetName(), err))
			case !deleted:
				remaining++
			}
		}
	}
	return remaining, errors.Join(errs...)
}

// dropContentFinalizer removes FinalizerNamespaceContent from the emptied namespace and reports whether it is gone.
func (r *projectReconciler) dropContentFinalizer(ctx context.Context, name string) (gone bool, err error) {
	out, err := r.c.namespaces.GuaranteedUpdate(ctx, "", name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if !slices.Contains(md.GetFinalizers(), FinalizerNamespaceContent) {
			return nil, nil
		}
		md.Finalizers = slices.DeleteFunc(md.Finalizers, func(f string) bool { return f == FinalizerNamespaceContent })
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove finalizer %s from namespace %q: %w", FinalizerNamespaceContent, name, err)
	}
	// The update that removes the last finalizer of an object being deleted deletes it.
	if _, err := r.c.namespaces.Get(ctx, "", out.GetMetadata().GetName()); apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, nil
}
