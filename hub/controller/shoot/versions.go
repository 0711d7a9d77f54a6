package shoot

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/Masterminds/semver/v3"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Version classifications of a CloudProfile.
const (
	classificationPreview     = "preview"
	classificationSupported   = "supported"
	classificationDeprecated  = "deprecated"
	classificationExpired     = "expired"
	classificationUnavailable = "unavailable"
)

// Update strategies of a CloudProfile's machine image: how far an automatic update may go.
const (
	updateStrategyPatch = "patch"
	updateStrategyMinor = "minor"
	updateStrategyMajor = "major"
)

// classification returns the classification v has at now. Versions with a lifecycle use its last stage that has
// started; others (the older form) are their classification (default supported) until their expiration date, and
// expired from then on — Gardener's CurrentLifecycleClassification.
func classification(v *corev1beta1.ExpirableVersion, now time.Time) string {
	stages := v.GetLifecycle()
	if len(stages) == 0 {
		c := v.GetClassification()
		if v.Classification == nil {
			c = classificationSupported
		}
		stages = []*corev1beta1.LifecycleStage{{Classification: c}}
		if v.GetExpirationDate() != nil {
			stages = append(stages, &corev1beta1.LifecycleStage{Classification: classificationExpired, StartTime: v.GetExpirationDate()})
		}
	}
	current := classificationUnavailable
	for _, st := range stages {
		if st.GetStartTime() == nil || st.GetStartTime().AsTime().Before(now) {
			current = st.GetClassification()
		}
	}
	return current
}

// version is an ExpirableVersion of a CloudProfile with its parsed semantic version.
type version struct {
	*corev1beta1.ExpirableVersion
	sem *semver.Version
}

// parseVersions parses the versions of a CloudProfile list, sorted ascending.
func parseVersions(evs []*corev1beta1.ExpirableVersion) ([]version, error) {
	out := make([]version, 0, len(evs))
	for _, ev := range evs {
		sv, err := semver.NewVersion(ev.GetVersion())
		if err != nil {
			return nil, fmt.Errorf("error while parsing version %q: %w", ev.GetVersion(), err)
		}
		out = append(out, version{ExpirableVersion: ev, sem: sv})
	}
	slices.SortStableFunc(out, func(a, b version) int { return a.sem.Compare(b.sem) })
	return out, nil
}

// imageVersions turns machine image versions into expirable versions.
func imageVersions(vs []*corev1beta1.MachineImageVersion) []*corev1beta1.ExpirableVersion {
	out := make([]*corev1beta1.ExpirableVersion, 0, len(vs))
	for _, v := range vs {
		out = append(out, &corev1beta1.ExpirableVersion{Version: v.GetVersion(), ExpirationDate: v.GetExpirationDate(),
			Classification: v.Classification, Lifecycle: v.GetLifecycle()})
	}
	return out
}

// selector picks versions for an update at now from current.
type selector struct {
	now     time.Time
	current *semver.Version
}

// filter returns true for a version that does not qualify.
type filter func(v version) bool

func (s selector) is(v version, class string) bool {
	return classification(v.ExpirableVersion, s.now) == class
}

// The filters of Gardener's version helpers.
func (s selector) expired(v version) bool    { return s.is(v, classificationExpired) }
func (s selector) deprecated(v version) bool { return s.is(v, classificationDeprecated) }
func (s selector) preview(v version) bool    { return s.is(v, classificationPreview) }
func (s selector) notHigher(v version) bool  { return !v.sem.GreaterThan(s.current) }
func (s selector) otherMajor(v version) bool { return v.sem.Major() != s.current.Major() }
func (s selector) otherMinor(v version) bool {
	return s.otherMajor(v) || v.sem.Minor() != s.current.Minor()
}

// qualifies says whether v is not in preview and no filter rejects it.
func (s selector) qualifies(v version, filters []filter) bool {
	if s.preview(v) {
		return false
	}
	for _, f := range filters {
		if f(v) {
			return false
		}
	}
	return true
}

// latest returns the highest version that is not in preview and that no filter rejects.
func (s selector) latest(vs []version, filters ...filter) (version, bool) {
	var best version
	found := false
	for _, v := range vs {
		if !s.qualifies(v, filters) {
			continue
		}
		if !found || v.sem.GreaterThan(best.sem) {
			best, found = v, true
		}
	}
	return best, found
}

// autoUpdate returns the highest version above the current one that has not expired and that no filter rejects,
// preferring versions that are not deprecated (Gardener's getVersionForAutoUpdate).
func (s selector) autoUpdate(vs []version, filters ...filter) (string, bool) {
	base := append([]filter{s.expired, s.notHigher}, filters...)
	if v, ok := s.latest(vs, append(base, s.deprecated)...); ok {
		return v.GetVersion(), true
	}
	if v, ok := s.latest(vs, base...); ok {
		return v.GetVersion(), true
	}
	return "", false
}

// patchUpdate: the latest patch of the current minor.
func (s selector) patchUpdate(vs []version) (string, bool, error) {
	v, ok := s.autoUpdate(vs, s.otherMinor)
	return v, ok, nil
}

// minorUpdate: the latest patch of the current minor, else the latest version of the current major.
func (s selector) minorUpdate(vs []version) (string, bool, error) {
	if v, ok := s.autoUpdate(vs, s.otherMinor); ok {
		return v, true, nil
	}
	v, ok := s.autoUpdate(vs, s.otherMajor)
	return v, ok, nil
}

// majorUpdate: the latest patch of the current minor, else the latest version overall.
func (s selector) majorUpdate(vs []version) (string, bool, error) {
	if v, ok := s.autoUpdate(vs, s.otherMinor); ok {
		return v, true, nil
	}
	v, ok := s.autoUpdate(vs)
	return v, ok, nil
}

// consecutiveMinor is the forced update of an expired Kubernetes version: the latest version of the next minor
// (Kubernetes cannot skip one), a non-expired one if there is one (Gardener's
// GetVersionForForcefulUpdateToConsecutiveMinor).
func (s selector) consecutiveMinor(vs []version) (string, bool, error) {
	nextMinor := func(v version) bool {
		return v.sem.Major() != s.current.Major() || v.sem.Minor() != s.current.Minor()+1
	}
	if v, ok := s.latest(vs, nextMinor, s.expired); ok {
		return v.GetVersion(), true, nil
	}
	v, ok := s.latest(vs, nextMinor)
	return v.GetVersion(), ok, nil
}

// nextHigher is the forced update of an expired machine image version: the latest version of the next higher minor
// (part = minor, within the current major) or major (part = major) that has versions, preferring non-expired ones
// but not skipping a minor or major to get them (Gardener's getVersionForMachineImageForceUpdate).
func (s selector) nextHigher(vs []version, part func(*semver.Version) uint64, filters ...filter) (string, bool, error) {
	cur := part(s.current)
	higher := func(v version) bool { return part(v.sem) <= cur }
	filters = append(filters, higher)
	// The next higher part present in the profile, whatever its versions' classifications.
	var next uint64
	nextSet := false
	for _, v := range vs {
		if p := part(v.sem); p > cur && (!nextSet || p < next) {
			next, nextSet = p, true
		}
	}
	v, ok := s.lowestPartLatest(vs, part, append(slices.Clone(filters), s.expired)...)
	if !ok || part(v.sem) > next {
		v, ok = s.lowestPartLatest(vs, part, filters...)
	}
	return v.GetVersion(), ok, nil
}

// lowestPartLatest returns the highest qualifying version among those of the lowest qualifying part; vs is sorted.
func (s selector) lowestPartLatest(vs []version, part func(*semver.Version) uint64, filters ...filter) (version, bool) {
	var best version
	found := false
	for _, v := range vs {
		if !s.qualifies(v, filters) {
			continue
		}
		if found && part(v.sem) > part(best.sem) {
			break
		}
		best, found = v, true
	}
	return best, found
}

func minorOf(v *semver.Version) uint64 { return v.Minor() }
func majorOf(v *semver.Version) uint64 { return v.Major() }

// updateFunc returns the version to update to, whether there is one, or an error.
type updateFunc func(vs []version) (string, bool, error)

// errNoForcedUpdate is wrapped by the error of an expired version without a version to force it to.
var errNoForcedUpdate = errors.New("no suitable version found in CloudProfile - this is most likely a misconfiguration of the CloudProfile")

// determineVersion applies an update strategy: the automatic update when there is one, otherwise, for an expired
// current version, the forced update. "" without error means the current version stays (Gardener's
// DetermineVersionForStrategy).
func determineVersion(vs []version, sel selector, auto, force updateFunc, currentExpired bool) (string, error) {
	v, ok, err := auto(vs)
	if err != nil {
		return "", fmt.Errorf("failed to determine a higher patch version for automatic update: %w", err)
	}
	if ok {
		return v, nil
	}
	if !currentExpired {
		return "", nil
	}
	v, ok, err = force(vs)
	if err != nil {
		return "", fmt.Errorf("failed to determine version for forceful update: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("cannot perform forceful update of expired version %q: %w", sel.current.Original(), errNoForcedUpdate)
	}
	return v, nil
}

// kubernetesUpdate decides the Kubernetes version maintenance of one version (control plane or worker pool): whether
// and why it must change, and to what. An update with an empty to and no error leaves the version as it is.
type versionUpdate struct {
	from, to, reason string
	err              error
}

// maintainKubernetesVersion returns the update of Kubernetes version current, nil when there is nothing to do.
func maintainKubernetesVersion(current string, autoUpdate bool, profile []*corev1beta1.ExpirableVersion, now time.Time) (*versionUpdate, error) {
	cur, err := semver.NewVersion(current)
	if err != nil {
		return nil, fmt.Errorf("parse Kubernetes version %q: %w", current, err)
	}
	vs, err := parseVersions(profile)
	if err != nil {
		return nil, err
	}
	idx := slices.IndexFunc(vs, func(v version) bool { return v.sem.Equal(cur) })
	var reason string
	expired := true
	switch {
	case idx < 0:
		reason = "Version does not exist in CloudProfile"
	case classification(vs[idx].ExpirableVersion, now) == classificationExpired:
		reason = "Kubernetes version expired - force update required"
	case autoUpdate:
		reason, expired = "Automatic update of Kubernetes version configured", false
	default:
		return nil, nil
	}
	sel := selector{now: now, current: cur}
	to, err := determineVersion(vs, sel, sel.patchUpdate, sel.consecutiveMinor, expired)
	if err != nil {
		return &versionUpdate{from: current, reason: reason,
			err: fmt.Errorf("could not determine higher suitable version than %q: %w", current, err)}, nil
	}
	if to == "" {
		return nil, nil
	}
	return &versionUpdate{from: current, to: to, reason: reason}, nil
}

// maintainImageVersion returns the update of a worker's machine image version current among the versions that fit
// the worker, nil when there is nothing to do.
func maintainImageVersion(imageName, current, strategy string, fitting []*corev1beta1.ExpirableVersion, autoUpdate bool, now time.Time) (*versionUpdate, error) {
	vs, err := parseVersions(fitting)
	if err != nil {
		return nil, err
	}
	idx := slices.IndexFunc(vs, func(v version) bool { return v.GetVersion() == current })
	var reason string
	expired := true
	switch {
	case idx < 0:
		reason = "Version does not exist in CloudProfile"
	case classification(vs[idx].ExpirableVersion, now) == classificationExpired:
		reason = fmt.Sprintf("Machine image version expired - force update required (image update strategy: %s)", strategy)
	case autoUpdate:
		reason, expired = fmt.Sprintf("Automatic update of the machine image version is configured (image update strategy: %s)", strategy), false
	default:
		return nil, nil
	}
	cur, err := semver.NewVersion(current)
	if err != nil {
		return &versionUpdate{from: current, reason: reason, err: fmt.Errorf("parse machine image version %q: %w", current, err)}, nil
	}
	sel := selector{now: now, current: cur}
	var auto, force updateFunc
	switch strategy {
	case updateStrategyPatch:
		auto = sel.patchUpdate
		force = func(vs []version) (string, bool, error) { return sel.nextHigher(vs, minorOf, sel.otherMajor) }
	case updateStrategyMinor:
		auto = sel.minorUpdate
		force = func(vs []version) (string, bool, error) { return sel.nextHigher(vs, majorOf) }
	default:
		auto = sel.majorUpdate
		force = func([]version) (string, bool, error) {
			return "", false, fmt.Errorf("either the machine image %q is reaching end of life and migration to another machine image is required or there is a misconfiguration in the CloudProfile. If it is the latter, make sure the machine image in the CloudProfile has at least one version that is not expired, not in preview and greater or equal to the current Shoot image version %q", imageName, current)
		}
	}
	to, err := determineVersion(vs, sel, auto, force, expired)
	if err != nil {
		return &versionUpdate{from: current, reason: reason, err: fmt.Errorf("failed to update machine image %q: failed to determine the target version for maintenance of machine image %q with strategy %q: %w",
			imageName, imageName, strategy, err)}, nil
	}
	if to == "" {
		return nil, nil
	}
	return &versionUpdate{from: current, to: to, reason: reason}, nil
}

// capVersion returns v, or limit when v is higher: a worker pool's Kubernetes version never passes the control
// plane's (a forced update of the pool to the next minor may, when the control plane stayed).
func capVersion(v, limit string) string {
	a, err := semver.NewVersion(v)
	if err != nil {
		return v
	}
	if b, err := semver.NewVersion(limit); err == nil && a.GreaterThan(b) {
		return b.String()
	}
	return a.String()
}
