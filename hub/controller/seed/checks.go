package seed

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Condition types this package keeps.
const (
	ConditionBackupBucketsReady = "BackupBucketsReady"
	ConditionExtensionsReady    = "ExtensionsReady"
)

// backupBucketsCheck keeps a Seed's BackupBucketsReady condition (Gardener's seed/backupbucketscheck).
type backupBucketsCheck struct {
	seeds, buckets *store.Collection
	syncPeriod     time.Duration
	threshold      time.Duration
	clock          clock.PassiveClock
}

func (r *backupBucketsCheck) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	seed, ok, err := controller.Get[*corev1beta1.Seed](ctx, r.seeds, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	objs, err := r.buckets.ByIndex(ctx, "seed", key.Name)
	if err != nil {
		return controller.Result{}, err
	}
	var count int
	var problems []string
	for _, o := range objs {
		b := o.(*corev1beta1.BackupBucket)
		if b.GetSpec().GetSeedName() != key.Name {
			continue
		}
		count++
		if le := b.GetStatus().GetLastError(); le != nil {
			problems = append(problems, fmt.Sprintf("\n* Name: %s, Error: %s", b.GetMetadata().GetName(), le.GetDescription()))
		}
	}
	now := r.clock.Now()
	old := condition(seed.GetStatus().GetConditions(), ConditionBackupBucketsReady)
	var next *metav1.Condition
	switch {
	case len(problems) > 0:
		sort.Strings(problems)
		next = progressingOr(old, ConditionBackupBucketsReady, statusFalse, "BackupBucketsError",
			"The following BackupBuckets have issues:"+strings.Join(problems, ""), r.threshold, now)
	case count > 0:
		next = updated(old, ConditionBackupBucketsReady, statusTrue, "BackupBucketsAvailable", "Backup Buckets are available.", now)
	case old == nil:
		// A seed that never had a bucket gets no condition: Gardener's check is triggered by the seed's buckets only,
		// so it never writes one there (a ManagedSeed's seed without spec.backup stays without it, and so does the
		// shoot that copies its seed's conditions, whose health it would otherwise make "unknown").
		return controller.Result{RequeueAfter: r.syncPeriod}, nil
	default:
		next = progressingOr(old, ConditionBackupBucketsReady, statusUnknown, "BackupBucketsGone", "Backup Buckets are gone.", r.threshold, now)
	}
	if next != old {
		if err := writeCondition(ctx, r.seeds, key.Name, next); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: r.syncPeriod}, nil
}

// extensionsCheck keeps a Seed's ExtensionsReady condition (Gardener's seed/extensionscheck).
type extensionsCheck struct {
	seeds, installations *store.Collection
	syncPeriod           time.Duration
	threshold            time.Duration
	clock                clock.PassiveClock
}

// installationConditions are the conditions of an installation the check reads, and what each must be.
var installationConditions = []struct{ typ, want string }{
	{"Valid", statusTrue}, {"Installed", statusTrue}, {"Healthy", statusTrue}, {"Progressing", statusFalse},
}

func (r *extensionsCheck) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	seed, ok, err := controller.Get[*corev1beta1.Seed](ctx, r.seeds, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	objs, err := r.installations.ByIndex(ctx, "seed", key.Name)
	if err != nil {
		return controller.Result{}, err
	}
	failing := map[string]map[string]string{} // condition type → installation → message
	for _, t := range installationConditions {
		failing[t.typ] = map[string]string{}
	}
	for _, o := range objs {
		ci := o.(*corev1beta1.ControllerInstallation)
		name := ci.GetMetadata().GetName()
		conds := ci.GetStatus().GetConditions()
		if len(conds) == 0 {
			failing["Installed"][name] = "extension was not yet installed"
			continue
		}
		found := 0
		for _, t := range installationConditions {
			c := condition(conds, t.typ)
			if c == nil {
				continue
			}
			found++
			if c.GetStatus() != t.want {
				failing[t.typ][name] = c.GetMessage()
			}
		}
		if _, unhealthy := failing["Healthy"][name]; !unhealthy && found != len(installationConditions) {
			failing["Healthy"][name] = "not all required conditions found in ControllerInstallation"
		}
	}
	now := r.clock.Now()
	old := condition(seed.GetStatus().GetConditions(), ConditionExtensionsReady)
	next := updated(old, ConditionExtensionsReady, statusTrue, "AllExtensionsReady", "All extensions installed into the seed cluster are ready and healthy.", now)
	for _, c := range []struct{ typ, reason, what string }{
		{"Valid", "NotAllExtensionsValid", "Some extensions are not valid"},
		{"Installed", "NotAllExtensionsInstalled", "Some extensions are not installed"},
		{"Healthy", "NotAllExtensionsHealthy", "Some extensions are not healthy"},
		{"Progressing", "SomeExtensionsProgressing", "Some extensions are progressing"},
	} {
		if m := failing[c.typ]; len(m) > 0 {
			next = progressingOr(old, ConditionExtensionsReady, statusFalse, c.reason, c.what+": "+describe(m), r.threshold, now)
			break
		}
	}
	if next != old {
		if err := writeCondition(ctx, r.seeds, key.Name, next); err != nil {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: r.syncPeriod}, nil
}

// describe lists installations and their messages, sorted: "name: message; name: message".
func describe(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + m[n]
	}
	return strings.Join(parts, "; ")
}
