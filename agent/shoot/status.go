package shoot

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// statusPatch is a JSON merge patch of a Shoot's status: keys left out are not touched, a nil value removes the
// field.
type statusPatch map[string]any

// patchStatus applies p to the shoot's status on the hub; the answer counts as the shoot's newest state until the
// cache has it, so that decisions made meanwhile see it.
func (c *Controller) patchStatus(ctx context.Context, s *corev1beta1.Shoot, p statusPatch) (*corev1beta1.Shoot, error) {
	return c.shoots.PatchStatus(ctx, s, p)
}

// jsonOf renders a message as Gardener JSON for a patch.
func jsonOf(m proto.Message) json.RawMessage { return hubobject.JSON(m) }

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
