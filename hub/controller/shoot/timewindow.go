package shoot

import (
	"fmt"
	"hash/crc32"
	"time"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// maintenanceTimeLayout is the layout of spec.maintenance.timeWindow.begin and .end: "HHMMSS+ZZZZ".
const maintenanceTimeLayout = "150405-0700"

const (
	day = 24 * time.Hour
	// effectiveWindowCut is cut from the end of a window so that the maintenance has a chance to finish inside it
	// (Gardener's EffectiveMaintenanceTimeWindow).
	effectiveWindowCut = 15 * time.Minute
	// defaultWindowHours is how many full hours a default window may start at (0 to 22 UTC) and defaultWindowLength
	// how long it lasts (Gardener's RandomMaintenanceTimeWindow).
	defaultWindowHours  = 23
	defaultWindowLength = time.Hour
)

// timeOfDay is a time of day in UTC: the duration since midnight, in [0, 24h).
type timeOfDay time.Duration

func timeOfDayOf(t time.Time) timeOfDay {
	t = t.UTC()
	return timeOfDay(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second)
}

// add returns the time of day d later, wrapping around midnight.
func (t timeOfDay) add(d time.Duration) timeOfDay {
	return timeOfDay(((time.Duration(t)+d)%day + day) % day)
}

// on returns t on the UTC day of date.
func (t timeOfDay) on(date time.Time) time.Time {
	y, m, d := date.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(time.Duration(t))
}

func (t timeOfDay) String() string {
	d := time.Duration(t)
	return fmt.Sprintf("%02d:%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second))
}

// parseTimeOfDay reads a maintenance time such as "220000+0100" and returns it in UTC (21:00:00).
func parseTimeOfDay(value string) (timeOfDay, error) {
	t, err := time.Parse(maintenanceTimeLayout, value)
	if err != nil {
		return 0, fmt.Errorf("could not parse %q as a maintenance time (HHMMSS+ZZZZ): %w", value, err)
	}
	return timeOfDayOf(t), nil
}

// timeWindow is a daily maintenance time window in UTC. When end is before begin it spans midnight; when they are
// equal it is the whole day (Gardener's window arithmetic takes it so, though its Contains would take it for one
// second: a window of 15 minutes, which Gardener's validation refuses, would then never be maintained in).
type timeWindow struct {
	begin, end timeOfDay
}

// alwaysWindow is the window of the whole day.
var alwaysWindow = timeWindow{begin: 0, end: timeOfDay(day - time.Second)}

// parseTimeWindow reads spec.maintenance.timeWindow.
func parseTimeWindow(begin, end string) (timeWindow, error) {
	b, err := parseTimeOfDay(begin)
	if err != nil {
		return timeWindow{}, fmt.Errorf("begin: %w", err)
	}
	e, err := parseTimeOfDay(end)
	if err != nil {
		return timeWindow{}, fmt.Errorf("end: %w", err)
	}
	return timeWindow{begin: b, end: e}, nil
}

func (w timeWindow) String() string { return fmt.Sprintf("begin=%s, end=%s", w.begin, w.end) }

func (w timeWindow) spansMidnight() bool { return w.end < w.begin }

// contains reports whether t's time of day is inside the window (both ends included).
func (w timeWindow) contains(t time.Time) bool {
	x := timeOfDayOf(t)
	if w.begin == w.end {
		return true
	}
	if w.spansMidnight() {
		return x >= w.begin || x <= w.end
	}
	return x >= w.begin && x <= w.end
}

// untilNext returns how long from from until a random moment of the next occurrence of the window: today's when from
// is before it, otherwise tomorrow's. A from inside the window (its first second included) gets the next day's, so
// that a maintenance is not repeated in the occurrence it just ran in. random(n) returns a number in [0, n).
func (w timeWindow) untilNext(from time.Time, random func(int64) int64) time.Duration {
	from = from.UTC()
	begin := w.begin.on(from)
	end := w.end.on(from)
	if w.end <= w.begin {
		end = end.Add(day)
	}
	if !begin.After(from) && (w.contains(from) || from.After(end)) {
		begin, end = begin.Add(day), end.Add(day)
	}
	return begin.Sub(from) + time.Duration(random(int64(end.Sub(begin))))
}

// effectiveTimeWindow is the window a shoot is maintained in, as Gardener's EffectiveShootMaintenanceTimeWindow
// decides it, with the end cut by 15 minutes. A shoot without a window gets Gardener's default window (one hour
// from a full hour between 0 and 22 UTC), chosen from its uid so that it stays the same across restarts of the hub;
// Gardener's admission writes such a window into the spec on create. A window that cannot be parsed is the whole day.
func effectiveTimeWindow(s *corev1beta1.Shoot) timeWindow {
	tw := s.GetSpec().GetMaintenance().GetTimeWindow()
	var w timeWindow
	if tw == nil {
		w = defaultTimeWindow(s.GetMetadata().GetUid())
	} else {
		var err error
		if w, err = parseTimeWindow(tw.GetBegin(), tw.GetEnd()); err != nil {
			w = alwaysWindow
		}
	}
	w.end = w.end.add(-effectiveWindowCut)
	return w
}

// defaultTimeWindow is the default window of the shoot with the given uid.
func defaultTimeWindow(uid string) timeWindow {
	begin := timeOfDay(time.Duration(crc32.ChecksumIEEE([]byte(uid))%defaultWindowHours) * time.Hour)
	return timeWindow{begin: begin, end: begin.add(defaultWindowLength)}
}
