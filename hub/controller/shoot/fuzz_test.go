package shoot

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// FuzzHibernationSchedules: any start, end and location from a shoot either fails to parse or gives schedules whose
// activations are consistent and whose due schedule is found without hanging.
func FuzzHibernationSchedules(f *testing.F) {
	for _, seed := range [][3]string{
		{"0 18 * * 1-5", "0 8 * * 1-5", "Europe/Berlin"},
		{"@daily", "@every 90m", ""},
		{"*/5 * * * *", "", "America/New_York"},
		{"0 0 30 2 *", "@every 1s", "UTC"},
		{"CRON_TZ=Asia/Tokyo 0 1 * * *", "", "Local"},
		{"0 0 * * 7", "59 23 31 12 *", "Asia/Kolkata"},
	} {
		f.Add(seed[0], seed[1], seed[2], int64(0))
	}
	now := time.Date(2030, 3, 29, 1, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, start, end, location string, offset int64) {
		s := &corev1beta1.HibernationSchedule{Start: &start, End: &end, Location: &location}
		schedules, err := parseSchedules([]*corev1beta1.HibernationSchedule{s})
		if err != nil {
			return
		}
		at := now.Add(time.Duration(offset % int64(400*24*time.Hour)))
		for _, sc := range schedules {
			next, ok := sc.next(at)
			if ok && !next.After(at) {
				t.Fatalf("%q: next %v is not after %v", sc.spec, next, at)
			}
			if prev, ok := sc.previous(at.Add(-24*time.Hour), at); ok && (prev.After(at) || !prev.After(at.Add(-24*time.Hour))) {
				t.Fatalf("%q: previous %v outside (%v, %v]", sc.spec, prev, at.Add(-24*time.Hour), at)
			}
		}
		shoot := newShoot("s", func(s *corev1beta1.Shoot) {
			s.Metadata.CreationTimestamp = timestamppb.New(at.Add(-30 * 24 * time.Hour))
		})
		if due := dueSchedule(schedules, shoot, 2*time.Hour, at); due != nil && !slices.ContainsFunc(schedules, func(s schedule) bool { return s.spec == due.spec }) {
			t.Fatal("due schedule not among the schedules")
		}
		if d := nextScheduleAfter(schedules, at); d < 0 {
			t.Fatalf("next schedule after %v", d)
		}
	})
}

// FuzzMaintenanceTimeWindow: any begin and end either fail to parse or give a window whose next maintenance is a
// moment inside it within two days.
func FuzzMaintenanceTimeWindow(f *testing.F) {
	for _, seed := range [][2]string{{"220000+0000", "230000+0000"}, {"233000-0100", "010000-0100"}, {"000000+0000", "000000+0000"},
		{"235959+1400", "000001-1200"}, {"22:00", "23:00"}} {
		f.Add(seed[0], seed[1], int64(0), int64(1))
	}
	f.Fuzz(func(t *testing.T, begin, end string, offset, random int64) {
		w, err := parseTimeWindow(begin, end)
		if err != nil {
			return
		}
		from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(offset % int64(366*24*time.Hour)))
		eff := timeWindow{begin: w.begin, end: w.end.add(-effectiveWindowCut)}
		d := eff.untilNext(from, func(n int64) int64 {
			if n <= 0 {
				t.Fatalf("random over an empty range %d", n)
			}
			return ((random % n) + n) % n
		})
		if d < 0 || d > 2*day {
			t.Fatalf("window %v from %v: next maintenance after %v", eff, from, d)
		}
		if at := from.Add(d).Truncate(time.Second); !eff.contains(at) {
			t.Fatalf("window %v from %v: next maintenance %v is outside it", eff, from, at)
		}
	})
}

// FuzzVersionMaintenance: any cloud profile versions and current version give an update to a version of the profile,
// no update, or an error — never a panic.
func FuzzVersionMaintenance(f *testing.F) {
	f.Add("1.30.1", "1.30.1,1.30.5:deprecated,1.31.0:expired,1.31.2:preview", true, "patch")
	f.Add("1.30.5", "1.30.5:expired,1.32.0", false, "minor")
	f.Add("v1", "1,1.0,x,1.0.0-rc.1", true, "major")
	f.Fuzz(func(t *testing.T, current, profile string, auto bool, strategy string) {
		var specs []string
		if profile != "" {
			specs = strings.Split(profile, ",")
		}
		versions := evs(specs...)
		check := func(u *versionUpdate) {
			if u != nil && u.err == nil && !slices.ContainsFunc(versions, func(v *corev1beta1.ExpirableVersion) bool { return v.GetVersion() == u.to }) {
				t.Fatalf("update to %q, not a version of the profile %q", u.to, profile)
			}
		}
		u, _ := maintainKubernetesVersion(current, auto, versions, testNow)
		check(u)
		u, _ = maintainImageVersion("image", current, strategy, versions, auto, testNow)
		check(u)
		_ = capVersion(current, profile)
	})
}

// FuzzExpirationAnnotation: the expiration annotation parses or fails, never panics, and round-trips what it parses.
func FuzzExpirationAnnotation(f *testing.F) {
	for _, seed := range []string{"2030-01-01T00:00:00Z", "2030-01-01T00:00:00+02:00", "tomorrow", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		at, err := parseExpiration(value)
		if err != nil {
			return
		}
		if again, err := parseExpiration(at.Format(time.RFC3339)); err != nil || !again.Equal(at.Truncate(time.Second)) {
			t.Fatalf("%q: %v does not round-trip: %v, %v", value, at, again, err)
		}
	})
}
