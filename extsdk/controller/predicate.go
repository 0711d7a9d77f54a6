package controller

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// HasType admits extension objects whose spec.type is typ.
func HasType(typ string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		obj, ok := o.(extensionsv1alpha1.Object)
		return ok && obj.GetExtensionSpec().Type == typ
	})
}

// HasClass admits extension objects whose spec.class is one of classes; an unset class is "shoot". No classes means
// shoot only.
func HasClass(classes ...extensionsv1alpha1.ExtensionClass) predicate.Predicate {
	if len(classes) == 0 {
		classes = []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot}
	}
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		obj, ok := o.(extensionsv1alpha1.Object)
		if !ok {
			return false
		}
		class := extensionsv1alpha1.ExtensionClassShoot
		if c := obj.GetExtensionSpec().Class; c != nil && *c != "" {
			class = *c
		}
		return slices.Contains(classes, class)
	})
}

// DefaultPredicate admits the events on which an extension acts when the agent asks and only then (so that the
// agent can keep reconciles to the shoot's maintenance window):
//   - create (which is also every object's first event after a controller start): the operation annotation is
//     reconcile, restore or migrate, or a deletionTimestamp is set, or the last operation is missing or did not
//     succeed (the retry after a restart);
//   - update: the operation annotation is reconcile, restore or migrate, or a deletionTimestamp is set and the status
//     did not change (so that the controller's own status writes during a deletion do not trigger it again);
//   - delete and generic: never.
func DefaultPredicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			obj, ok := e.Object.(extensionsv1alpha1.Object)
			if !ok {
				return false
			}
			last := obj.GetExtensionStatus().LastOperation
			return hasOperationAnnotation(obj) || obj.GetDeletionTimestamp() != nil ||
				last == nil || last.State != extensionsv1alpha1.LastOperationStateSucceeded
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			newObj, ok1 := e.ObjectNew.(extensionsv1alpha1.Object)
			oldObj, ok2 := e.ObjectOld.(extensionsv1alpha1.Object)
			if !ok1 || !ok2 {
				return false
			}
			if hasOperationAnnotation(newObj) {
				return true
			}
			return newObj.GetDeletionTimestamp() != nil &&
				equality.Semantic.DeepEqual(oldObj.GetExtensionStatus(), newObj.GetExtensionStatus())
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// hasOperationAnnotation says whether obj asks for reconcile, restore or migrate (wait-for-state asks for nothing).
func hasOperationAnnotation(obj client.Object) bool {
	switch obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation] {
	case extensionsv1alpha1.OperationReconcile, extensionsv1alpha1.OperationRestore, extensionsv1alpha1.OperationMigrate:
		return true
	}
	return false
}
