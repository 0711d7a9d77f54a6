package hubobject

import (
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// SetCondition sets the condition typ in conds to status, reason and message at now, with Gardener's rules
// (v1beta1helper.UpdatedConditionWithClock): lastTransitionTime moves only when the status changes, lastUpdateTime
// whenever status, reason or message change; an unchanged condition is left as it is. It returns the new list and
// whether anything changed; conds is not modified.
func SetCondition(conds []*metav1.Condition, typ, status, reason, message string, now time.Time) ([]*metav1.Condition, bool) {
	ts := timestamppb.New(now.Truncate(time.Second))
	i := slices.IndexFunc(conds, func(c *metav1.Condition) bool { return c.GetType() == typ })
	if i < 0 {
		return append(slices.Clone(conds), &metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
			LastTransitionTime: ts, LastUpdateTime: ts}), true
	}
	old := conds[i]
	if old.GetStatus() == status && old.GetReason() == reason && old.GetMessage() == message {
		return conds, false
	}
	next := &metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, Codes: old.GetCodes(),
		LastTransitionTime: old.GetLastTransitionTime(), LastUpdateTime: ts}
	if old.GetStatus() != status || next.LastTransitionTime == nil {
		next.LastTransitionTime = ts
	}
	out := slices.Clone(conds)
	out[i] = next
	return out, true
}
