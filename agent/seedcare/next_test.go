package seedcare

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// next follows Gardener's thresholds: failing turns True (or a new condition) Progressing and Progressing False only
// once it has been Progressing for longer than the threshold; passing turns anything True; the transition time moves
// only with the status, and an unchanged condition is not rewritten.
func TestNext(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }
	cond := func(st string, since time.Duration) *metav1.Condition {
		return &metav1.Condition{Type: "X", Status: st, Reason: "R", Message: "m", LastTransitionTime: ago(since), LastUpdateTime: ago(since)}
	}
	fail := result{reason: "R", message: "m"}
	pass := result{ok: true, reason: "R", message: "m"}
	for _, tc := range []struct {
		name      string
		old       *metav1.Condition
		r         result
		threshold time.Duration
		want      string // "" for no change
		moved     bool   // lastTransitionTime is now
	}{
		{"new condition, failing", nil, fail, time.Minute, "Progressing", true},
		{"new condition, failing, no threshold", nil, fail, 0, "False", true},
		{"new condition, passing", nil, pass, time.Minute, "True", true},
		{"True fails", cond("True", time.Hour), fail, time.Minute, "Progressing", true},
		{"Unknown fails", cond("Unknown", time.Hour), fail, time.Minute, "Progressing", true},
		{"Progressing within the threshold", cond("Progressing", 30*time.Second), fail, time.Minute, "", false},
		{"Progressing past the threshold", cond("Progressing", 61*time.Second), fail, time.Minute, "False", true},
		{"False stays False", cond("False", time.Hour), fail, time.Minute, "", false},
		{"False recovers", cond("False", time.Hour), pass, time.Minute, "True", true},
		{"Progressing recovers", cond("Progressing", time.Second), pass, time.Minute, "True", true},
		{"True stays True", cond("True", time.Hour), pass, time.Minute, "", false},
		{"True with a new message", cond("True", time.Hour), result{ok: true, reason: "R", message: "other"}, time.Minute, "True", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := next(tc.old, "X", tc.r, tc.threshold, now)
			if tc.want == "" {
				if got != nil {
					t.Fatalf("got %v, want no change", got)
				}
				return
			}
			if got == nil || got.GetStatus() != tc.want || got.GetType() != "X" {
				t.Fatalf("got %v, want status %s", got, tc.want)
			}
			if moved := got.GetLastTransitionTime().AsTime().Equal(now); moved != tc.moved {
				t.Errorf("lastTransitionTime %v, moved %v, want %v", got.GetLastTransitionTime().AsTime(), moved, tc.moved)
			}
			if !got.GetLastUpdateTime().AsTime().Equal(now) {
				t.Errorf("lastUpdateTime %v, want now", got.GetLastUpdateTime().AsTime())
			}
		})
	}
}
