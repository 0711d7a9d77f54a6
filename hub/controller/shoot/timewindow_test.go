package shoot

import (
	"testing"
	"time"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func hms(h, m, s int) timeOfDay {
	return timeOfDay(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
}

func at(day, h, m int) time.Time { return time.Date(2026, 6, day, h, m, 0, 0, time.UTC) }

func TestParseTimeWindow(t *testing.T) {
	for _, tc := range []struct {
		begin, end string
		want       timeWindow
		err        bool
	}{
		{begin: "220000+0000", end: "230000+0000", want: timeWindow{hms(22, 0, 0), hms(23, 0, 0)}},
		// Zones are converted to UTC, across midnight if need be.
		{begin: "220000+0100", end: "230000+0100", want: timeWindow{hms(21, 0, 0), hms(22, 0, 0)}},
		{begin: "003000+0200", end: "013000+0200", want: timeWindow{hms(22, 30, 0), hms(23, 30, 0)}},
		{begin: "233000-0100", end: "010000-0100", want: timeWindow{hms(0, 30, 0), hms(2, 0, 0)}},
		{begin: "120545+0000", end: "130000+0000", want: timeWindow{hms(12, 5, 45), hms(13, 0, 0)}},
		{begin: "22:00", end: "230000+0000", err: true},
		{begin: "220000", end: "230000+0000", err: true},
		{begin: "250000+0000", end: "230000+0000", err: true},
		{begin: "220000+0000", end: "", err: true},
	} {
		got, err := parseTimeWindow(tc.begin, tc.end)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("parseTimeWindow(%q, %q) = %v, %v; want %v (error %t)", tc.begin, tc.end, got, err, tc.want, tc.err)
		}
	}
}

func TestTimeWindowContains(t *testing.T) {
	day := timeWindow{hms(10, 0, 0), hms(12, 0, 0)}
	night := timeWindow{hms(22, 0, 0), hms(2, 0, 0)}
	for _, tc := range []struct {
		w    timeWindow
		t    time.Time
		want bool
	}{
		{day, at(1, 9, 59), false},
		{day, at(1, 10, 0), true},
		{day, at(1, 11, 0), true},
		{day, at(1, 12, 0), true},
		{day, at(1, 12, 1), false},
		{night, at(1, 21, 59), false},
		{night, at(1, 22, 0), true},
		{night, at(1, 23, 59), true},
		{night, at(2, 0, 0), true},
		{night, at(2, 2, 0), true},
		{night, at(2, 2, 1), false},
		{night, at(2, 12, 0), false},
		// Times in other zones count by their UTC time of day.
		{day, time.Date(2026, 6, 1, 12, 30, 0, 0, time.FixedZone("CEST", 2*3600)), true},
		{alwaysWindow, at(1, 23, 59), true},
		// A window that ends where it begins is the whole day.
		{timeWindow{hms(22, 0, 0), hms(22, 0, 0)}, at(1, 12, 0), true},
	} {
		if got := tc.w.contains(tc.t); got != tc.want {
			t.Errorf("%v contains %v = %t, want %t", tc.w, tc.t, got, tc.want)
		}
	}
}

// TestUntilNext: the next maintenance is a random moment of the next occurrence of the window; from inside the
// window that is tomorrow's.
func TestUntilNext(t *testing.T) {
	first := func(int64) int64 { return 0 }
	last := func(n int64) int64 { return n - 1 }
	day := timeWindow{hms(10, 0, 0), hms(12, 0, 0)}
	night := timeWindow{hms(22, 0, 0), hms(2, 0, 0)}
	for _, tc := range []struct {
		name      string
		w         timeWindow
		from      time.Time
		rand      func(int64) int64
		wantBegin time.Time
	}{
		{"before the window: today", day, at(1, 8, 0), first, at(1, 10, 0)},
		{"inside the window: tomorrow", day, at(1, 11, 0), first, at(2, 10, 0)},
		{"at the window's first second: tomorrow", day, at(1, 10, 0), first, at(2, 10, 0)},
		{"after the window: tomorrow", day, at(1, 13, 0), first, at(2, 10, 0)},
		{"spanning midnight, before it", night, at(1, 20, 0), first, at(1, 22, 0)},
		{"spanning midnight, inside before midnight", night, at(1, 23, 0), first, at(2, 22, 0)},
		{"spanning midnight, inside after midnight", night, at(2, 1, 0), first, at(2, 22, 0)},
		{"latest moment", day, at(1, 8, 0), last, at(1, 12, 0).Add(-time.Nanosecond)},
		{"always: tomorrow", alwaysWindow, at(1, 8, 0), first, at(2, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.from.Add(tc.w.untilNext(tc.from, tc.rand))
			if !got.Equal(tc.wantBegin) {
				t.Fatalf("next maintenance at %v, want %v", got, tc.wantBegin)
			}
			if !tc.w.contains(got.Truncate(time.Second)) {
				t.Fatalf("next maintenance %v is outside %v", got, tc.w)
			}
		})
	}
}

// TestEffectiveTimeWindow: the end is cut by 15 minutes; a shoot without a window gets a one-hour default window at
// a full hour that depends on its uid only; an unparsable window is the whole day.
func TestEffectiveTimeWindow(t *testing.T) {
	withWindow := func(begin, end string) *corev1beta1.Shoot {
		return newShoot("s", func(s *corev1beta1.Shoot) {
			s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: begin, End: end}}
		})
	}
	if got, want := effectiveTimeWindow(withWindow("220000+0000", "230000+0000")), (timeWindow{hms(22, 0, 0), hms(22, 45, 0)}); got != want {
		t.Errorf("window 22-23: effective %v, want %v", got, want)
	}
	if got, want := effectiveTimeWindow(withWindow("230000+0000", "000000+0000")), (timeWindow{hms(23, 0, 0), hms(23, 45, 0)}); got != want {
		t.Errorf("window 23-00: effective %v, want %v", got, want)
	}
	if got, want := effectiveTimeWindow(withWindow("bad", "230000+0000")), (timeWindow{0, hms(23, 44, 59)}); got != want {
		t.Errorf("unparsable window: effective %v, want %v", got, want)
	}
	seen := map[timeOfDay]bool{}
	for _, uid := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "0b5d8f6e-6f43-4c2e-9d1e-1f0e4c7c1a10"} {
		s := newShoot("s", func(s *corev1beta1.Shoot) { s.Metadata = &metav1.ObjectMeta{Uid: uid} })
		w := effectiveTimeWindow(s)
		if w != effectiveTimeWindow(s) {
			t.Fatalf("default window of %q is not stable", uid)
		}
		if time.Duration(w.begin)%time.Hour != 0 || w.begin > hms(22, 0, 0) || w.end != w.begin.add(45*time.Minute) {
			t.Errorf("default window of %q: %v, want a one-hour window from a full hour 0-22 cut by 15 minutes", uid, w)
		}
		seen[w.begin] = true
	}
	if len(seen) < 3 {
		t.Errorf("default windows of 9 uids start at %d different hours only", len(seen))
	}
}
