package backupbucket

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

	stateProcessing = "Processing"
	stateSucceeded  = "Succeeded"
	stateError      = "Error"
)

// outcome is what the controller reports on a core BackupBucket: its lastOperation and lastError.
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

func processing(typ, description string) outcome {
	return outcome{typ: typ, state: stateProcessing, description: description}
}

func failed(typ string, err *lastError) outcome {
	return outcome{typ: typ, state: stateError, progress: 50, description: err.description, err: err}
}

func succeeded(typ, description string) outcome {
	return outcome{typ: typ, state: stateSucceeded, progress: 100, description: description}
}

// reported reports whether the bucket's status already says o, so that nothing needs to be written.
func reported(st *corev1beta1.BackupBucketStatus, o outcome) bool {
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

// operationType is Gardener's ComputeOperationType for a BackupBucket: Delete once deletion started, Create until
// a first operation succeeded, Reconcile after.
func operationType(b *corev1beta1.BackupBucket) string {
	lo := b.GetStatus().GetLastOperation()
	switch {
	case b.GetMetadata().GetDeletionTimestamp() != nil:
		return opDelete
	case lo == nil, lo.GetType() == opCreate && lo.GetState() != stateSucceeded:
		return opCreate
	}
	return opReconcile
}

// report writes o (and the further status fields in extra, Gardener JSON by field name) to the bucket's status,
// unless the status says it already. It returns the bucket as the hub has it after the write.
func (c *Controller) report(ctx context.Context, b *corev1beta1.BackupBucket, o outcome, extra map[string]any) (*corev1beta1.BackupBucket, error) {
	if len(extra) == 0 && reported(b.GetStatus(), o) {
		return b, nil
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
	return c.patchStatus(ctx, b, p)
}

// patchStatus applies a JSON merge patch to the bucket's status and remembers the result.
func (c *Controller) patchStatus(ctx context.Context, b *corev1beta1.BackupBucket, p map[string]any) (*corev1beta1.BackupBucket, error) {
	body, err := json.Marshal(map[string]any{"status": p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	out, err := c.buckets.Patch(ctx, &metav1.PatchRequest{Name: b.GetMetadata().GetName(),
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json", Subresource: "status"})
	if err != nil {
		return nil, fmt.Errorf("patch status of BackupBucket %s: %w", b.GetMetadata().GetName(), err)
	}
	c.objects.remember(out.GetMetadata().GetName(), out)
	return out, nil
}

// updateBucket applies change to the bucket's newest state and updates it on the hub, re-reading it after a
// conflict. change returns false when there is nothing to do.
func (c *Controller) updateBucket(ctx context.Context, b *corev1beta1.BackupBucket, change func(*corev1beta1.BackupBucket) bool) (*corev1beta1.BackupBucket, error) {
	cur := proto.Clone(b).(*corev1beta1.BackupBucket)
	for attempt := 0; ; attempt++ {
		if cur.Metadata == nil {
			cur.Metadata = &metav1.ObjectMeta{}
		}
		if !change(cur) {
			return cur, nil
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
		out, err := c.buckets.Update(cctx, cur)
		cancel()
		if err == nil {
			c.objects.remember(out.GetMetadata().GetName(), out)
			return out, nil
		}
		if status.Code(err) != codes.Aborted || attempt >= 5 {
			return nil, fmt.Errorf("update BackupBucket %s: %w", b.GetMetadata().GetName(), err)
		}
		cctx, cancel = context.WithTimeout(ctx, c.cfg.HubTimeout)
		fresh, gerr := c.buckets.Get(cctx, &metav1.GetRequest{Name: b.GetMetadata().GetName()})
		cancel()
		if gerr != nil {
			return nil, fmt.Errorf("update BackupBucket %s: %w (re-read: %w)", b.GetMetadata().GetName(), err, gerr)
		}
		cur = fresh
	}
}

func addFinalizer(name string) func(*corev1beta1.BackupBucket) bool {
	return func(b *corev1beta1.BackupBucket) bool {
		if slices.Contains(b.Metadata.Finalizers, name) {
			return false
		}
		b.Metadata.Finalizers = append(b.Metadata.Finalizers, name)
		return true
	}
}

func removeFinalizer(name string) func(*corev1beta1.BackupBucket) bool {
	return func(b *corev1beta1.BackupBucket) bool {
		i := slices.Index(b.Metadata.Finalizers, name)
		if i < 0 {
			return false
		}
		b.Metadata.Finalizers = slices.Delete(slices.Clone(b.Metadata.Finalizers), i, i+1)
		return true
	}
}

// jsonOf renders a message as Gardener JSON for a patch.
func jsonOf(m proto.Message) json.RawMessage {
	b, err := kjson.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("backupbucket: encode %T: %v", m, err)) // our own messages always encode
	}
	return b
}
