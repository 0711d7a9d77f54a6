package shoot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/gateway/kjson"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// statusPatch is a JSON merge patch of a Shoot's status: keys left out are not touched, a nil value removes the
// field.
type statusPatch map[string]any

// patchStatus applies p to the shoot's status on the hub and remembers the result, so that decisions made before the
// hub's change reaches the cache see it.
func (c *Controller) patchStatus(ctx context.Context, s *corev1beta1.Shoot, p statusPatch) (*corev1beta1.Shoot, error) {
	body, err := json.Marshal(map[string]any{"status": p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	out, err := c.shoots.Patch(ctx, &metav1.PatchRequest{
		Namespace: s.GetMetadata().GetNamespace(), Name: s.GetMetadata().GetName(),
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json", Subresource: "status",
	})
	if err != nil {
		return nil, fmt.Errorf("patch status of shoot %s/%s: %w", s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), err)
	}
	c.remember(out)
	return out, nil
}

// jsonOf renders a message as Gardener JSON for a patch.
func jsonOf(m proto.Message) json.RawMessage {
	b, err := kjson.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("shoot: encode %T: %v", m, err)) // our own messages always encode
	}
	return b
}

// lastOperationJSON is the JSON of a lastOperation written now.
func lastOperationJSON(typ, state string, progress int32, description string, now time.Time) json.RawMessage {
	return jsonOf(&metav1.LastOperation{
		Type: typ, State: state, Progress: proto.Int32(progress), Description: description,
		LastUpdateTime: timestamppb.New(now.UTC().Truncate(time.Second)),
	})
}

// lastErrorsJSON is the JSON of lastErrors for err: one entry per failed task, with the task's name and the error
// codes the extensions reported.
func lastErrorsJSON(err error, now time.Time) json.RawMessage {
	var errs []*metav1.LastError
	for _, te := range taskErrors(err) {
		le := &metav1.LastError{Description: te.err.Error(), Codes: extension.Codes(te.err), LastUpdateTime: timestamppb.New(now.UTC().Truncate(time.Second))}
		if te.task != "" {
			le.TaskId = proto.String(te.task)
		}
		errs = append(errs, le)
	}
	parts := make([]json.RawMessage, len(errs))
	for i, e := range errs {
		parts[i] = jsonOf(e)
	}
	b, _ := json.Marshal(parts)
	return b
}
