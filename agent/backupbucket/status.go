package backupbucket

import (
	"context"

	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Operation types of lastOperation, as Gardener spells them.
const (
	opCreate    = "Create"
	opReconcile = "Reconcile"
	opDelete    = "Delete"
)

// operationType is Gardener's ComputeOperationType for a BackupBucket: Delete once deletion started, Create until
// a first operation succeeded, Reconcile after.
func operationType(b *corev1beta1.BackupBucket) string {
	lo := b.GetStatus().GetLastOperation()
	switch {
	case b.GetMetadata().GetDeletionTimestamp() != nil:
		return opDelete
	case lo == nil, lo.GetType() == opCreate && lo.GetState() != hubobject.StateSucceeded:
		return opCreate
	}
	return opReconcile
}

// report writes o (and the further status fields in extra, Gardener JSON by field name) to the bucket's status,
// unless the status says it already. It returns the bucket as the hub has it after the write.
func (c *Controller) report(ctx context.Context, b *corev1beta1.BackupBucket, o hubobject.Outcome, extra map[string]any) (*corev1beta1.BackupBucket, error) {
	return c.Objects.Report(ctx, b, b.GetStatus(), o, extra)
}
