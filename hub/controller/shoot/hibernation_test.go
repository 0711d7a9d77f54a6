package shoot

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func sched(start, end, location string) *corev1beta1.HibernationSchedule {
	s := &corev1beta1.HibernationSchedule{}
	if start != "" {
		s.Start = ptr(start)
	}
	if end != "" {
		s.End = ptr(end)
	}
	if location != "" {
		s.Location = ptr(location)
	}
	return s
}

func mustParseSchedules(t *testing.T, ss ...*corev1beta1.HibernationSchedule) []schedule {
	t.Helper()
	out, err := parseSchedules(ss)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseSchedules(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *corev1beta1.HibernationSchedule
		n    int
		err  bool
	}{
		{"start and end", sched("0 18 * * 1-5", "0 8 * * 1-5", "Europe/Berlin"), 2, false},
		{"start only, default UTC", sched("0 18 * * *", "", ""), 1, false},
		{"descriptor", sched("@daily", "@every 2h", ""), 2, false},
		{"six fields are not standard", sched("0 0 18 * * *", "", ""), 0, true},
		{"garbage", sched("never", "", ""), 0, true},
		{"unknown location", sched("0 18 * * *", "", "Mars/Olympus"), 0, true},
		{"time zone prefix", sched("CRON_TZ=Asia/Tokyo 0 18 * * *", "", ""), 0, true},
		{"TZ prefix", sched("TZ=UTC 0 18 * * *", "", ""), 0, true},
	} {
		got, err := parseSchedules([]*corev1beta1.HibernationSchedule{tc.s})
		if (err != nil) != tc.err || len(got) != tc.n {
			t.Errorf("%s: %d schedules, error %v; want %d, error %t", tc.name, len(got), err, tc.n, tc.err)
		}
	}
}

// TestScheduleTimeZones: schedules fire at their local time, across time zones and daylight saving time changes. A
// local time that does not exist on the day clocks go forward is skipped that day; one that occurs twice on the day
// they go back fires twice (setting the same state twice).
func TestScheduleTimeZones(t *testing.T) {
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name, spec, location string
		from                 time.Time
		want                 []time.Time
	}{
		{"Berlin in winter is UTC+1", "0 8 * * 1-5", "Europe/Berlin", utc(1, 9, 12, 0), // a Friday
			[]time.Time{utc(1, 12, 7, 0), utc(1, 13, 7, 0)}},
		{"Berlin in summer is UTC+2", "0 8 * * 1-5", "Europe/Berlin", utc(7, 1, 12, 0),
			[]time.Time{utc(7, 2, 6, 0), utc(7, 3, 6, 0), utc(7, 6, 6, 0)}},
		{"across the spring change", "0 8 * * *", "Europe/Berlin", utc(3, 28, 12, 0),
			[]time.Time{utc(3, 29, 6, 0), utc(3, 30, 6, 0)}},
		{"a time that does not exist is skipped that day", "30 2 * * *", "Europe/Berlin", utc(3, 28, 12, 0),
			[]time.Time{utc(3, 30, 0, 30), utc(3, 31, 0, 30)}},
		{"a time that occurs twice fires twice", "30 2 * * *", "Europe/Berlin", utc(10, 24, 12, 0),
			[]time.Time{utc(10, 25, 0, 30), utc(10, 25, 1, 30), utc(10, 26, 1, 30)}},
		{"New York", "0 19 * * *", "America/New_York", utc(1, 9, 12, 0),
			[]time.Time{utc(1, 10, 0, 0), utc(1, 11, 0, 0)}},
		{"half-hour zone", "0 9 * * *", "Asia/Kolkata", utc(1, 9, 12, 0),
			[]time.Time{utc(1, 10, 3, 30)}},
		{"UTC by default", "15 6 * * *", "", utc(1, 9, 12, 0), []time.Time{utc(1, 10, 6, 15)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParseSchedules(t, sched(tc.spec, "", tc.location))[0]
			var got []time.Time
			for at := tc.from; len(got) < len(tc.want); {
				n, ok := s.next(at)
				if !ok {
					t.Fatal("no next time")
				}
				got, at = append(got, n), n
			}
			if !slices.EqualFunc(got, tc.want, time.Time.Equal) {
				t.Fatalf("fires at %v, want %v", got, tc.want)
			}
			// previous agrees with next: the last activation up to the last wanted time is that time.
			if p, ok := s.previous(tc.from, tc.want[len(tc.want)-1]); !ok || !p.Equal(tc.want[len(tc.want)-1]) {
				t.Fatalf("previous = %v, %t", p, ok)
			}
		})
	}
}

func TestSchedulePrevious(t *testing.T) {
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	daily := mustParseSchedules(t, sched("0 18 * * *", "", ""))[0]
	if _, ok := daily.previous(from, from.Add(17*time.Hour)); ok {
		t.Fatal("nothing fired before 18:00")
	}
	if p, ok := daily.previous(from, from.Add(3*24*time.Hour)); !ok || !p.Equal(from.Add(2*24*time.Hour+18*time.Hour)) {
		t.Fatalf("previous = %v, %t; want the third day's 18:00", p, ok)
	}
	every := mustParseSchedules(t, sched("@every 90m", "", ""))[0]
	if p, ok := every.previous(from, from.Add(7*24*time.Hour)); !ok || !p.Equal(from.Add(7*24*time.Hour)) {
		t.Fatalf("@every previous = %v, %t", p, ok)
	}
	never := mustParseSchedules(t, sched("0 0 30 2 *", "", ""))[0] // 30 February
	if _, ok := never.previous(from, from.Add(7*24*time.Hour)); ok {
		t.Fatal("30 February fired")
	}
	if d := nextScheduleAfter([]schedule{never}, from); d != 0 {
		t.Fatalf("a schedule that never fires is looked at again after %v", d)
	}
}

// TestDueSchedule: the most recent activation since the last trigger (or creation) counts, if it is within the
// trigger deadline.
func TestDueSchedule(t *testing.T) {
	now := time.Date(2026, 6, 3, 12, 0, 0, 0, time.UTC) // a Wednesday
	schedules := mustParseSchedules(t, sched("0 11 * * *", "0 9 * * *", ""))
	shootWith := func(created time.Time, lastTrigger *time.Time) *corev1beta1.Shoot {
		s := newShoot("s", func(s *corev1beta1.Shoot) {
			s.Metadata.CreationTimestamp = timestamppb.New(created)
		})
		if lastTrigger != nil {
			s.Status = &corev1beta1.ShootStatus{LastHibernationTriggerTime: timestamppb.New(*lastTrigger)}
		}
		return s
	}
	monthAgo := now.Add(-30 * 24 * time.Hour)
	for _, tc := range []struct {
		name      string
		shoot     *corev1beta1.Shoot
		deadline  time.Duration
		now       time.Time
		hibernate *bool // nil: none due
	}{
		{"start at 11:00 is the most recent", shootWith(monthAgo, nil), 2 * time.Hour, now, ptr(true)},
		{"end at 09:00 when 11:00 has not come", shootWith(monthAgo, nil), 4 * time.Hour, now.Add(-90 * time.Minute), ptr(false)},
		{"missed beyond the deadline", shootWith(monthAgo, nil), 30 * time.Minute, now, nil},
		{"already triggered after it", shootWith(monthAgo, ptr(now.Add(-30*time.Minute))), 2 * time.Hour, now, nil},
		{"triggered before it", shootWith(monthAgo, ptr(now.Add(-2*time.Hour))), 2 * time.Hour, now, ptr(true)},
		{"created after it", shootWith(now.Add(-10*time.Minute), nil), 2 * time.Hour, now, nil},
		{"the end at 09:00 counts when it is the only one in time", shootWith(now.Add(-4*time.Hour), nil), 24 * time.Hour,
			now.Add(-90 * time.Minute), ptr(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dueSchedule(schedules, tc.shoot, tc.deadline, tc.now)
			switch {
			case tc.hibernate == nil && got != nil:
				t.Fatalf("due %+v, want none", got)
			case tc.hibernate != nil && (got == nil || bool(got.hibernate) != *tc.hibernate):
				t.Fatalf("due %+v, want hibernate=%t", got, *tc.hibernate)
			}
		})
	}
}

// TestHibernationReconcile runs the reconciler on the real store at moments of a fake clock.
func TestHibernationReconcile(t *testing.T) {
	start := time.Date(2030, 6, 3, 17, 0, 0, 0, time.UTC) // a Monday, long after the shoot's creation
	e := newEnv(t, start)
	r := &hibernationReconciler{shoots: e.c.shoots, deadline: 2 * time.Hour, clock: e.clock, recorder: e.recorder(), log: testLog()}
	e.createShoot(newShoot("s", func(s *corev1beta1.Shoot) {
		s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: []*corev1beta1.HibernationSchedule{
			sched("0 20 * * 1-5", "0 8 * * 1-5", "Europe/Berlin")}}
	}))
	enabled := func() *bool {
		if h := e.shoot("s").GetSpec().GetHibernation(); h.Enabled != nil {
			return ptr(h.GetEnabled())
		}
		return nil
	}

	// 19:00 Berlin: nothing due yet; look again at 20:00 Berlin (18:00 UTC).
	res := reconcile(t, r, "s")
	if enabled() != nil {
		t.Fatal("hibernation set before the schedule")
	}
	if want := time.Hour + nextScheduleDelta; res.RequeueAfter != want {
		t.Fatalf("requeue after %v, want %v", res.RequeueAfter, want)
	}
	rv := e.shoot("s").GetMetadata().GetResourceVersion()
	e.clock.Step(res.RequeueAfter)
	res = reconcile(t, r, "s")
	if got := enabled(); got == nil || !*got {
		t.Fatalf("enabled = %v after the start schedule, want true", got)
	}
	s := e.shoot("s")
	if s.GetMetadata().GetResourceVersion() == rv || !s.GetStatus().GetLastHibernationTriggerTime().AsTime().Equal(e.clock.Now()) {
		t.Fatalf("lastHibernationTriggerTime %v, want %v", s.GetStatus().GetLastHibernationTriggerTime().AsTime(), e.clock.Now())
	}
	if gen := s.GetMetadata().GetGeneration(); gen != 2 {
		t.Fatalf("generation %d after the spec change, want 2", gen)
	}
	// Next: Tuesday 08:00 Berlin (06:00 UTC), 12 hours later.
	if want := 12 * time.Hour; res.RequeueAfter != want {
		t.Fatalf("requeue after %v, want %v", res.RequeueAfter, want)
	}
	// A second reconciliation in between changes nothing.
	rv = e.shoot("s").GetMetadata().GetResourceVersion()
	e.clock.Step(time.Hour)
	reconcile(t, r, "s")
	if e.shoot("s").GetMetadata().GetResourceVersion() != rv {
		t.Fatal("a reconciliation without a due schedule wrote the shoot")
	}
	// The owner wakes it up by hand; the next scheduled wake-up finds it awake and leaves it.
	e.updateShoot("s", false, func(s *corev1beta1.Shoot) { s.Spec.Hibernation.Enabled = ptr(false) })
	e.clock.SetTime(time.Date(2030, 6, 4, 6, 0, 1, 0, time.UTC))
	reconcile(t, r, "s")
	if got := enabled(); got == nil || *got {
		t.Fatalf("enabled = %v after the end schedule, want false", got)
	}

	// The hub was down over the start schedule: caught up within the deadline, not after.
	e.clock.SetTime(time.Date(2030, 6, 4, 19, 30, 0, 0, time.UTC)) // 21:30 Berlin
	reconcile(t, r, "s")
	if got := enabled(); got == nil || !*got {
		t.Fatalf("enabled = %v 90 minutes after the start schedule, want true (deadline 2h)", got)
	}
	e.updateShoot("s", false, func(s *corev1beta1.Shoot) { s.Spec.Hibernation.Enabled = ptr(false) })
	e.updateShoot("s", true, func(s *corev1beta1.Shoot) {
		s.Status.LastHibernationTriggerTime = timestamppb.New(time.Date(2030, 6, 5, 6, 0, 0, 0, time.UTC))
	})
	e.clock.SetTime(time.Date(2030, 6, 5, 20, 30, 0, 0, time.UTC)) // Wednesday 22:30 Berlin: 2h30 after 20:00
	reconcile(t, r, "s")
	if got := enabled(); got == nil || *got {
		t.Fatalf("enabled = %v 2h30 after the start schedule, want false (deadline 2h)", got)
	}

	if ev := e.events(); !slices.Contains(ev, EventHibernated+": Hibernating cluster due to schedule") ||
		!slices.Contains(ev, EventWokenUp+": Waking up cluster due to schedule") {
		t.Fatalf("events %v", ev)
	}
}

// TestHibernationSkips: failed shoots, shoots being deleted and invalid schedules are left alone.
func TestHibernationSkips(t *testing.T) {
	now := time.Date(2030, 6, 3, 18, 30, 0, 0, time.UTC)
	e := newEnv(t, now)
	r := &hibernationReconciler{shoots: e.c.shoots, deadline: 2 * time.Hour, clock: e.clock, recorder: e.recorder(), log: testLog()}
	withSchedule := func(s *corev1beta1.Shoot) {
		s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: []*corev1beta1.HibernationSchedule{sched("0 18 * * *", "", "")}}
	}
	e.createShoot(newShoot("failed", withSchedule, func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{ObservedGeneration: ptr(int64(1)),
			LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Failed"}}
	}))
	e.createShoot(newShoot("invalid", func(s *corev1beta1.Shoot) {
		s.Spec.Hibernation = &corev1beta1.Hibernation{Schedules: []*corev1beta1.HibernationSchedule{sched("0 18 * *", "", "")}}
	}))
	e.createShoot(newShoot("none"))
	for _, name := range []string{"failed", "invalid", "none"} {
		res := reconcile(t, r, name)
		if h := e.shoot(name).GetSpec().GetHibernation(); h != nil && h.Enabled != nil {
			t.Errorf("%s: hibernation set", name)
		}
		if (name == "failed") != (res.RequeueAfter > 0) {
			t.Errorf("%s: requeue after %v", name, res.RequeueAfter)
		}
	}
	if res := reconcile(t, r, "gone"); res.RequeueAfter != 0 {
		t.Errorf("a missing shoot is requeued")
	}
}
