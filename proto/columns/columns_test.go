package columns

import (
	"testing"
	"time"

	cliv1 "github.com/trellis-dev/trellis/proto/gen/trellis/cli/v1"
)

// TestTimedNamesEveryFormatThatAges: a format that Timed does not name renders the same whatever the time, for a
// timestamp and for an Event with every timestamp an Event has, so a rendering kept for later (hub/table's memo of
// list items) stays right.
func TestTimedNamesEveryFormatThatAges(t *testing.T) {
	ts := "2026-11-30T10:00:00Z"
	event := map[string]any{"firstTimestamp": ts, "lastTimestamp": ts, "eventTime": ts,
		"series": map[string]any{"lastObservedTime": ts, "count": "2"}}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for n := range cliv1.Format_name {
		f := cliv1.Format(n)
		for _, vals := range [][]any{{ts}, {event}, nil} {
			a, b := Render(f, vals, now), Render(f, vals, now.Add(50*time.Hour))
			if a != b && !Timed(f) {
				t.Errorf("%s renders %v as %q and 50 hours later as %q, but Timed says it does not age", f, vals, a, b)
			}
		}
	}
	if !Timed(cliv1.Format_FORMAT_AGE) || Timed(cliv1.Format_FORMAT_READY) {
		t.Error("Timed: AGE must age, READY must not")
	}
}
