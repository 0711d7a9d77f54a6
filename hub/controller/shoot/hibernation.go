package shoot

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Events of the hibernation controller, as Gardener names them.
const (
	EventHibernated = "Hibernated"
	EventWokenUp    = "WokenUp"
)

const (
	// hibernationLookback bounds how far back a missed schedule is searched for, whatever the trigger deadline
	// (Gardener's seven days).
	hibernationLookback = 7 * 24 * time.Hour
	// nextScheduleDelta is added to the next scheduled time, so that a reconciliation woken a little early by clock
	// skew still finds the schedule passed.
	nextScheduleDelta = 100 * time.Millisecond
)

// hibernate tells whether a schedule hibernates (start) or wakes up (end) the shoot.
type hibernate bool

// schedule is one parsed start or end of spec.hibernation.schedules.
type schedule struct {
	spec      string
	cron      cron.Schedule
	location  *time.Location
	hibernate hibernate
}

// parseSchedules parses the schedules of a shoot: each start and end is a standard cron expression (five fields or a
// descriptor such as @daily) in the schedule's location (an IANA time zone, default UTC).
func parseSchedules(schedules []*corev1beta1.HibernationSchedule) ([]schedule, error) {
	var out []schedule
	for i, s := range schedules {
		locName := s.GetLocation()
		if locName == "" {
			locName = "UTC"
		}
		loc, err := time.LoadLocation(locName)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d]: location %q: %w", i, locName, err)
		}
		for _, e := range []struct {
			spec      *string
			hibernate hibernate
			field     string
		}{{s.Start, true, "start"}, {s.End, false, "end"}} {
			if e.spec == nil {
				continue
			}
			c, err := parseCron(*e.spec)
			if err != nil {
				return nil, fmt.Errorf("schedules[%d].%s: %w", i, e.field, err)
			}
			out = append(out, schedule{spec: *e.spec, cron: c, location: loc, hibernate: e.hibernate})
		}
	}
	return out, nil
}

// parseCron parses a standard cron expression. A TZ= or CRON_TZ= prefix is refused: the schedule's location says
// the time zone, as Gardener's parser (which knows no such prefix) has it.
func parseCron(spec string) (cron.Schedule, error) {
	if t := strings.TrimSpace(spec); strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, fmt.Errorf("cron expression %q: time zone prefixes are not supported, use the schedule's location", spec)
	}
	c, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %w", spec, err)
	}
	return c, nil
}

// next returns the first time after t the schedule fires; false when it never does.
func (s schedule) next(t time.Time) (time.Time, bool) {
	n := s.cron.Next(t.In(s.location))
	return n.UTC(), !n.IsZero()
}

// previous returns the last time in (from, to] the schedule fired; false when it did not.
func (s schedule) previous(from, to time.Time) (time.Time, bool) {
	if d, ok := s.cron.(cron.ConstantDelaySchedule); ok {
		// @every: the activations from from on are from+k·delay (rounded to the second); compute the last one
		// instead of stepping through up to a week of seconds.
		first, ok := s.next(from)
		if !ok || first.After(to) {
			return time.Time{}, false
		}
		return first.Add(to.Sub(first) / d.Delay * d.Delay), true
	}
	var last time.Time
	found := false
	for t, ok := s.next(from); ok && !t.After(to); t, ok = s.next(t) {
		last, found = t, true
	}
	return last, found
}

// nextScheduleAfter returns how long from now until the earliest next activation of the schedules (plus a little);
// 0 when none fires again.
func nextScheduleAfter(schedules []schedule, now time.Time) time.Duration {
	var earliest time.Time
	for _, s := range schedules {
		if n, ok := s.next(now); ok && (earliest.IsZero() || n.Before(earliest)) {
			earliest = n
		}
	}
	if earliest.IsZero() {
		return 0
	}
	return earliest.Add(nextScheduleDelta).Sub(now)
}

// dueSchedule returns the schedule whose last activation is the most recent one since the shoot was last
// hibernated or woken up by a schedule (its creation if never), but not earlier than the trigger deadline and a week
// before now; nil when none fired in that time.
func dueSchedule(schedules []schedule, s *corev1beta1.Shoot, deadline time.Duration, now time.Time) *schedule {
	earliest := s.GetMetadata().GetCreationTimestamp().AsTime()
	if t := s.GetStatus().GetLastHibernationTriggerTime(); t != nil {
		earliest = t.AsTime()
	}
	if d := now.Add(-deadline); deadline > 0 && d.After(earliest) {
		earliest = d
	}
	if w := now.Add(-hibernationLookback); earliest.Before(w) {
		earliest = w
	}
	var due *schedule
	var dueAt time.Time
	for i := range schedules {
		t, ok := schedules[i].previous(earliest, now)
		if ok && (due == nil || t.After(dueAt)) {
			due, dueAt = &schedules[i], t
		}
	}
	return due
}

// failedAndUpToDate reports whether the shoot's last operation failed for its current spec: it is left alone until
// its owner acts (Gardener's IsShootFailedAndUpToDate).
func failedAndUpToDate(s *corev1beta1.Shoot) bool {
	return s.GetStatus().GetLastOperation().GetState() == lastOperationStateFailed &&
		s.GetMetadata().GetGeneration() == s.GetStatus().GetObservedGeneration()
}

// hibernationDigest: the schedules and the deletion.
func hibernationDigest(o store.Object) string {
	return hash(&corev1beta1.Hibernation{Schedules: o.(*corev1beta1.Shoot).GetSpec().GetHibernation().GetSchedules()}) + deletionDigest(o)
}

// hibernationReconciler hibernates and wakes up shoots by their schedules.
type hibernationReconciler struct {
	shoots   *store.Collection
	deadline time.Duration
	clock    clock.PassiveClock
	recorder *controller.Recorder
	log      *slog.Logger
}

// Reconcile acts on the most recent schedule that fired since the last one acted on, and looks again at the next.
func (r *hibernationReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.shoots, k)
	if err != nil || s == nil || s.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, err
	}
	specs := s.GetSpec().GetHibernation().GetSchedules()
	if len(specs) == 0 {
		return controller.Result{}, nil
	}
	schedules, err := parseSchedules(specs)
	if err != nil {
		// Only a change of the schedules can help; that enqueues the shoot again.
		r.log.Info("invalid hibernation schedules; waiting for a change", "shoot", k.String(), "err", err)
		return controller.Result{}, nil
	}
	now := r.clock.Now()
	if failedAndUpToDate(s) {
		return controller.Result{RequeueAfter: nextScheduleAfter(schedules, now)}, nil
	}
	if due := dueSchedule(schedules, s, r.deadline, now); due != nil {
		if err := r.apply(ctx, s, due.hibernate, now); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: nextScheduleAfter(schedules, now)}, nil
}

// apply sets spec.hibernation.enabled and then status.lastHibernationTriggerTime. Should the status write fail, the
// retry finds the same schedule due and sets the same value again.
func (r *hibernationReconciler) apply(ctx context.Context, s *corev1beta1.Shoot, enabled hibernate, now time.Time) error {
	k := key(s)
	deleting := false
	updated, err := updateShoot(ctx, r.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
		if deleting = cur.GetMetadata().GetDeletionTimestamp() != nil; deleting {
			return false
		}
		if cur.Spec == nil {
			cur.Spec = &corev1beta1.ShootSpec{}
		}
		if cur.Spec.Hibernation == nil {
			cur.Spec.Hibernation = &corev1beta1.Hibernation{}
		}
		if cur.Spec.Hibernation.Enabled != nil && *cur.Spec.Hibernation.Enabled == bool(enabled) {
			return false // already as the schedule wants it: only the trigger time moves
		}
		cur.Spec.Hibernation.Enabled = proto.Bool(bool(enabled))
		return true
	})
	if err != nil || updated == nil || deleting {
		return err
	}
	if enabled {
		r.recorder.Eventf(ctx, updated, controller.EventNormal, EventHibernated, "Hibernating cluster due to schedule")
	} else {
		r.recorder.Eventf(ctx, updated, controller.EventNormal, EventWokenUp, "Waking up cluster due to schedule")
	}
	r.log.Info("hibernation set by schedule", "shoot", k.String(), "enabled", bool(enabled))
	_, err = updateShoot(ctx, r.shoots, k, true, func(cur *corev1beta1.Shoot) bool {
		if cur.Status == nil {
			cur.Status = &corev1beta1.ShootStatus{}
		}
		cur.Status.LastHibernationTriggerTime = timestamppb.New(now)
		return true
	})
	return err
}
