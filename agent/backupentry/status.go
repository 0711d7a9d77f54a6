package backupentry

import (
	"context"

	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Operation types of lastOperation, as Gardener spells them, and the annotation that asks for a restore.
const (
	opCreate    = "Create"
	opReconcile = "Reconcile"
	opDelete    = "Delete"
	opMigrate   = "Migrate"
	opRestore   = "Restore"

	annotationOperation = "gardener.cloud/operation"
	operationRestore    = "restore"
)

// Gardener's descriptions of an operation's start and success.
var (
	started = map[string]string{
		opCreate: "Reconciliation of BackupEntry state initialized.", opReconcile: "Reconciliation of BackupEntry state initialized.",
		opRestore: "Restoration of BackupEntry state initialized.", opMigrate: "Migration of BackupEntry state initialized.",
		opDelete: "Deletion of BackupEntry state initialized.",
	}
	done = map[string]string{
		opCreate: "Reconciliation of BackupEntry succeeded.", opReconcile: "Reconciliation of BackupEntry succeeded.",
		opRestore: "Restoration of BackupEntry succeeded.", opMigrate: "Migration of BackupEntry succeeded.",
		opDelete: "Deletion of BackupEntry succeeded.",
	}
)

func processing(typ string) hubobject.Outcome { return hubobject.Processing(typ, started[typ]) }

func succeeded(typ string) hubobject.Outcome { return hubobject.Succeeded(typ, done[typ]) }

// operationType is Gardener's ComputeOperationType for a BackupEntry this seed reconciles: Delete once deletion
// started; Restore when asked with gardener.cloud/operation=restore, when the entry was migrated away from another
// seed (lastOperation Migrate Succeeded: the shoot moved here) and until that restore succeeded; Create until a first
// operation succeeded; Reconcile after.
func operationType(e *corev1beta1.BackupEntry) string {
	lo := e.GetStatus().GetLastOperation()
	switch {
	case e.GetMetadata().GetDeletionTimestamp() != nil:
		return opDelete
	case e.GetMetadata().GetAnnotations()[annotationOperation] == operationRestore:
		return opRestore
	case lo == nil:
		return opCreate
	case lo.GetType() == opMigrate && lo.GetState() == hubobject.StateSucceeded:
		return opRestore
	case (lo.GetType() == opCreate || lo.GetType() == opRestore) && lo.GetState() != hubobject.StateSucceeded:
		return lo.GetType()
	}
	return opReconcile
}

// report writes o (and the further status fields in extra, Gardener JSON by field name) to the entry's status,
// unless the status says it already. It returns the entry as the hub has it after the write.
func (c *Controller) report(ctx context.Context, e *corev1beta1.BackupEntry, o hubobject.Outcome, extra map[string]any) (*corev1beta1.BackupEntry, error) {
	return c.Objects.Report(ctx, e, e.GetStatus(), o, extra)
}

// removeRestoreAnnotation removes gardener.cloud/operation=restore once the restore succeeded, as gardenlet does.
func removeRestoreAnnotation(e *corev1beta1.BackupEntry) bool {
	if e.Metadata.Annotations[annotationOperation] != operationRestore {
		return false
	}
	delete(e.Metadata.Annotations, annotationOperation)
	return true
}
