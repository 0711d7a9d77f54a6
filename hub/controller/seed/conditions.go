package seed

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Condition statuses.
const (
	statusTrue        = "True"
	statusFalse       = "False"
	statusUnknown     = "Unknown"
	statusProgressing = "Progressing"
)

// condition returns the condition typ of conds (nil when absent).
func condition(conds []*metav1.Condition, typ string) *metav1.Condition {
	i := slices.IndexFunc(conds, func(c *metav1.Condition) bool { return c.GetType() == typ })
	if i < 0 {
		return nil
	}
	return conds[i]
}

// updated is Gardener's UpdatedConditionWithClock: the condition with status, reason and message at now; its
// lastTransitionTime moves only with the status, its lastUpdateTime whenever something changes.
func updated(old *metav1.Condition, typ, status, reason, message string, now time.Time) *metav1.Condition {
	ts := timestamppb.New(now.UTC().Truncate(time.Second))
	if old != nil && old.GetStatus() == status && old.GetReason() == reason && old.GetMessage() == message {
		return old
	}
	next := &metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: ts, LastUpdateTime: ts}
	if old != nil && old.GetStatus() == status && old.GetLastTransitionTime() != nil {
		next.LastTransitionTime = old.GetLastTransitionTime()
	}
	return next
}

// progressingOr is Gardener's setToProgressingIfWithinThreshold: a failing check turns a True condition
// Progressing, keeps it Progressing while it has been so for at most threshold, and then sets eventual (False or
// Unknown); without a threshold it sets eventual at once.
func progressingOr(old *metav1.Condition, typ, eventual, reason, message string, threshold time.Duration, now time.Time) *metav1.Condition {
	switch old.GetStatus() {
	case statusTrue:
		if threshold == 0 {
			return updated(old, typ, eventual, reason, message, now)
		}
		return updated(old, typ, statusProgressing, reason, message, now)
	case statusProgressing:
		if threshold == 0 {
			return updated(old, typ, eventual, reason, message, now)
		}
		if lt := old.GetLastTransitionTime(); lt != nil && now.Sub(lt.AsTime()) <= threshold {
			return updated(old, typ, statusProgressing, reason, message, now)
		}
		return updated(old, typ, eventual, reason, message, now)
	}
	return updated(old, typ, eventual, reason, message, now)
}

// writeCondition merges cond into the Seed's status conditions on the store unless it says what they say already.
func writeCondition(ctx context.Context, seeds *store.Collection, name string, cond *metav1.Condition) error {
	_, err := seeds.GuaranteedUpdate(ctx, "", name, true, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Seed)
		if s.Status == nil {
			s.Status = &corev1beta1.SeedStatus{}
		}
		old := condition(s.Status.Conditions, cond.GetType())
		if old != nil && old.GetStatus() == cond.GetStatus() && old.GetReason() == cond.GetReason() && old.GetMessage() == cond.GetMessage() {
			return nil, nil
		}
		if i := slices.IndexFunc(s.Status.Conditions, func(c *metav1.Condition) bool { return c.GetType() == cond.GetType() }); i >= 0 {
			s.Status.Conditions[i] = cond
		} else {
			s.Status.Conditions = append(s.Status.Conditions, cond)
		}
		return s, nil
	})
	return err
}
