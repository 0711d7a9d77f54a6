package backupentry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/extension"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/gateway/kjson"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Operation types and states of lastOperation, as Gardener spells them.
const (
	opCreate    = "Create"
	opReconcile = "Reconcile"
	opDelete    = "Delete"
	opMigrate   = "Migrate"
	opRestore   = "Restore"

	stateProcessing = "Processing"
	stateSucceeded  = "Succeeded"
	stateError      = "Error"

	annotationOperation = "gardener.cloud/operation"
	operationRestore    = "restore"
)

// outcome is what the controller reports on a core BackupEntry: its lastOperation and lastError.
type outcome struct {
	typ, state, description string
	progress                int32
	// err becomes lastError (nil removes it).
	err *lastError
}

// lastError is what the controller reports as a core object's lastError.
type lastError struct {
	description string
	codes       []string
}

// errorOf is err as a lastError, with the codes in its tree (an extension's *extension.CodedError).
func errorOf(err error) *lastError {
	return &lastError{description: err.Error(), codes: extension.Codes(err)}
}

// extensionLastError is the lastError an extension object reports, as the controller reports it.
func extensionLastError(le *extensionsv1alpha1.LastError) *lastError {
	codes := make([]string, len(le.Codes))
	for i, c := range le.Codes {
		codes[i] = string(c)
	}
	return &lastError{description: le.Description, codes: codes}
}

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

func processing(typ string) outcome {
	return outcome{typ: typ, state: stateProcessing, description: started[typ]}
}

func failed(typ string, err *lastError) outcome {
	return outcome{typ: typ, state: stateError, progress: 50, description: err.description, err: err}
}

func succeeded(typ string) outcome {
	return outcome{typ: typ, state: stateSucceeded, progress: 100, description: done[typ]}
}

// reported reports whether the entry's status already says o, so that nothing needs to be written.
func reported(st *corev1beta1.BackupEntryStatus, o outcome) bool {
	lo := st.GetLastOperation()
	if lo == nil || lo.GetType() != o.typ || lo.GetState() != o.state || lo.GetDescription() != o.description {
		return false
	}
	le := st.GetLastError()
	if o.err == nil {
		return le == nil
	}
	return le != nil && le.GetDescription() == o.err.description && slices.Equal(le.GetCodes(), o.err.codes)
}

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
	case lo.GetType() == opMigrate && lo.GetState() == stateSucceeded:
		return opRestore
	case (lo.GetType() == opCreate || lo.GetType() == opRestore) && lo.GetState() != stateSucceeded:
		return lo.GetType()
	}
	return opReconcile
}

// report writes o (and the further status fields in extra, Gardener JSON by field name) to the entry's status,
// unless the status says it already. It returns the entry as the hub has it after the write.
func (c *Controller) report(ctx context.Context, e *corev1beta1.BackupEntry, o outcome, extra map[string]any) (*corev1beta1.BackupEntry, error) {
	if len(extra) == 0 && reported(e.GetStatus(), o) {
		return e, nil
	}
	now := c.cfg.Now().UTC().Truncate(time.Second)
	p := map[string]any{
		"lastOperation": jsonOf(&metav1.LastOperation{Type: o.typ, State: o.state, Progress: proto.Int32(o.progress),
			Description: o.description, LastUpdateTime: timestamppb.New(now)}),
		"lastError": nil,
	}
	if o.err != nil {
		p["lastError"] = jsonOf(&metav1.LastError{Description: o.err.description, Codes: o.err.codes, LastUpdateTime: timestamppb.New(now)})
	}
	for k, v := range extra {
		p[k] = v
	}
	return c.patchStatus(ctx, e, p)
}

// patchStatus applies a JSON merge patch to the entry's status and remembers the result.
func (c *Controller) patchStatus(ctx context.Context, e *corev1beta1.BackupEntry, p map[string]any) (*corev1beta1.BackupEntry, error) {
	body, err := json.Marshal(map[string]any{"status": p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	out, err := c.entries.Patch(ctx, &metav1.PatchRequest{Namespace: e.GetMetadata().GetNamespace(), Name: e.GetMetadata().GetName(),
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json", Subresource: "status"})
	if err != nil {
		return nil, fmt.Errorf("patch status of BackupEntry %s: %w", keyOf(e), err)
	}
	c.objects.remember(keyOf(out), out)
	return out, nil
}

// updateEntry applies change to the entry's newest state and updates it on the hub, re-reading it after a conflict.
// change returns false when there is nothing to do.
func (c *Controller) updateEntry(ctx context.Context, e *corev1beta1.BackupEntry, change func(*corev1beta1.BackupEntry) bool) (*corev1beta1.BackupEntry, error) {
	cur := proto.Clone(e).(*corev1beta1.BackupEntry)
	for attempt := 0; ; attempt++ {
		if cur.Metadata == nil {
			cur.Metadata = &metav1.ObjectMeta{}
		}
		if !change(cur) {
			return cur, nil
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
		out, err := c.entries.Update(cctx, cur)
		cancel()
		if err == nil {
			c.objects.remember(keyOf(out), out)
			return out, nil
		}
		if status.Code(err) != codes.Aborted || attempt >= 5 {
			return nil, fmt.Errorf("update BackupEntry %s: %w", keyOf(e), err)
		}
		cctx, cancel = context.WithTimeout(ctx, c.cfg.HubTimeout)
		fresh, gerr := c.entries.Get(cctx, &metav1.GetRequest{Namespace: e.GetMetadata().GetNamespace(), Name: e.GetMetadata().GetName()})
		cancel()
		if gerr != nil {
			return nil, fmt.Errorf("update BackupEntry %s: %w (re-read: %w)", keyOf(e), err, gerr)
		}
		cur = fresh
	}
}

func addFinalizer(name string) func(*corev1beta1.BackupEntry) bool {
	return func(e *corev1beta1.BackupEntry) bool {
		if slices.Contains(e.Metadata.Finalizers, name) {
			return false
		}
		e.Metadata.Finalizers = append(e.Metadata.Finalizers, name)
		return true
	}
}

func removeFinalizer(name string) func(*corev1beta1.BackupEntry) bool {
	return func(e *corev1beta1.BackupEntry) bool {
		i := slices.Index(e.Metadata.Finalizers, name)
		if i < 0 {
			return false
		}
		e.Metadata.Finalizers = slices.Delete(slices.Clone(e.Metadata.Finalizers), i, i+1)
		return true
	}
}

// removeRestoreAnnotation removes gardener.cloud/operation=restore once the restore succeeded, as gardenlet does.
func removeRestoreAnnotation(e *corev1beta1.BackupEntry) bool {
	if e.Metadata.Annotations[annotationOperation] != operationRestore {
		return false
	}
	delete(e.Metadata.Annotations, annotationOperation)
	return true
}

// jsonOf renders a message as Gardener JSON for a patch.
func jsonOf(m proto.Message) json.RawMessage {
	b, err := kjson.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("backupentry: encode %T: %v", m, err)) // our own messages always encode
	}
	return b
}
