package controller

import (
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// ComputeOperationType returns the operation obj asks for, in Gardener's order: the migrate annotation, then a
// deletionTimestamp, then the restore annotation; without a last operation Create; an unfinished Create, Migrate or
// Restore is continued; anything else is Reconcile.
func ComputeOperationType(obj extensionsv1alpha1.Object) extensionsv1alpha1.LastOperationType {
	op := obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation]
	last := obj.GetExtensionStatus().LastOperation
	switch {
	case op == extensionsv1alpha1.OperationMigrate:
		return extensionsv1alpha1.LastOperationTypeMigrate
	case obj.GetDeletionTimestamp() != nil:
		return extensionsv1alpha1.LastOperationTypeDelete
	case op == extensionsv1alpha1.OperationRestore:
		return extensionsv1alpha1.LastOperationTypeRestore
	case last == nil:
		return extensionsv1alpha1.LastOperationTypeCreate
	case last.State != extensionsv1alpha1.LastOperationStateSucceeded &&
		(last.Type == extensionsv1alpha1.LastOperationTypeCreate ||
			last.Type == extensionsv1alpha1.LastOperationTypeMigrate ||
			last.Type == extensionsv1alpha1.LastOperationTypeRestore):
		return last.Type
	}
	return extensionsv1alpha1.LastOperationTypeReconcile
}

// IsMigrated says whether obj's last operation is a successful Migrate: the object now belongs to another seed.
func IsMigrated(obj extensionsv1alpha1.Object) bool {
	last := obj.GetExtensionStatus().LastOperation
	return last != nil && last.Type == extensionsv1alpha1.LastOperationTypeMigrate &&
		last.State == extensionsv1alpha1.LastOperationStateSucceeded
}

// ShouldSkipOperation says whether op must not run on obj: once migrated, only another Migrate or a Restore does.
func ShouldSkipOperation(op extensionsv1alpha1.LastOperationType, obj extensionsv1alpha1.Object) bool {
	return op != extensionsv1alpha1.LastOperationTypeMigrate && op != extensionsv1alpha1.LastOperationTypeRestore &&
		IsMigrated(obj)
}
