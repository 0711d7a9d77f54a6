package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trellis-dev/trellis/hub/componentconfig"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Candidate determination strategies (SchedulerConfiguration schedulers.shoot.candidateDeterminationStrategy).
const (
	StrategySameRegion      = componentconfig.StrategySameRegion
	StrategyMinimalDistance = componentconfig.StrategyMinimalDistance
)

// Names Gardener gives to what the scheduler reads.
const (
	// DefaultSchedulerName is the spec.schedulerName of the shoots this scheduler places; an unset one means it too.
	DefaultSchedulerName = "default-scheduler"
	// ConditionGardenletReady and ConditionBackupBucketsReady are the seed conditions a usable seed has True.
	ConditionGardenletReady     = "GardenletReady"
	ConditionBackupBucketsReady = "BackupBucketsReady"
	// ResourceShoots is the seed.status.allocatable resource counting shoots.
	ResourceShoots = "shoots"
	// PurposeTesting is the shoot purpose whose seed may be in any region.
	PurposeTesting = "testing"
	// FailureToleranceZone is the control-plane failure tolerance that needs a seed with three zones.
	FailureToleranceZone = "zone"
	// AnnotationHAVPN overrides whether a shoot's VPN is highly available (then its networks must not overlap the seed's).
	AnnotationHAVPN = "alpha.control-plane.shoot.gardener.cloud/high-availability-vpn"
)

// Rule names the step of Gardener's DetermineSeed that left no seed; Unschedulable errors carry it.
type Rule string

// The steps, in Gardener's order.
const (
	RuleUsable               Rule = "UsableSeeds"              // not deleting, visible, GardenletReady (+ BackupBucketsReady)
	RuleCloudProfileSelector Rule = "CloudProfileSeedSelector" // the cloud profile's spec.seedSelector
	RuleShootSelector        Rule = "ShootSeedSelector"        // the shoot's spec.seedSelector
	RuleProvider             Rule = "Provider"                 // provider type, or the cloud profile's providerTypes
	RuleZonalControlPlane    Rule = "ZonalControlPlane"        // failure tolerance zone needs ≥ 3 seed zones
	RuleAccessRestrictions   Rule = "AccessRestrictions"       // the seed supports the shoot's access restrictions
	RuleCandidates           Rule = "Candidates"               // disjoint networks, tolerated taints, free capacity
	RuleStrategy             Rule = "Strategy"                 // SameRegion / MinimalDistance / purpose testing
	RuleCloudProfile         Rule = "CloudProfile"             // the shoot's cloud profile could not be determined
)

// Unschedulable says why no seed fits a shoot. Its message is Gardener's, word for word, so that events and
// lastOperation descriptions read as they do in Gardener.
type Unschedulable struct {
	Rule Rule
	Err  error
}

func (e *Unschedulable) Error() string { return e.Err.Error() }
func (e *Unschedulable) Unwrap() error { return e.Err }

func unschedulable(rule Rule, format string, args ...any) error {
	return &Unschedulable{Rule: rule, Err: fmt.Errorf(format, args...)}
}

// Landscape is what a scheduling decision reads besides the shoot.
type Landscape struct {
	// Seeds are all seeds, in name order (the order of a list, which decides ties).
	Seeds []*corev1beta1.Seed
	// Usage is the number of shoots on each seed: spec.seedName, and status.seedName when it differs (Gardener's
	// CalculateSeedUsage).
	Usage map[string]int
	// CloudProfileName names the shoot's CloudProfile or NamespacedCloudProfile (the region ConfigMap refers to it).
	CloudProfileName string
	// CloudProfile is its spec (for a NamespacedCloudProfile: status.cloudProfileSpec).
	CloudProfile *corev1beta1.CloudProfileSpec
	// RegionConfig is the region distance ConfigMap of the cloud profile, nil when there is none.
	RegionConfig *kcorev1.ConfigMap
	// Strategy is StrategySameRegion (also for "") or StrategyMinimalDistance.
	Strategy string
}

// DetermineSeed returns the seed Gardener's scheduler picks for shoot, or an *Unschedulable error saying which rule
// left none. The steps run in Gardener's order: usable seeds, the cloud profile's and the shoot's seed selectors,
// provider, zones for a zonal control plane, access restrictions, the candidates' networks, taints and capacity,
// the strategy, and finally the seed with the fewest shoots (the first in name order among equals). log receives
// Gardener's informational messages (nil: none).
func DetermineSeed(shoot *corev1beta1.Shoot, in Landscape, log *slog.Logger) (*corev1beta1.Seed, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seeds, err := filterUsable(in.Seeds)
	if err != nil {
		return nil, err
	}
	if seeds, err = filterBySelector(seeds, in.CloudProfile.GetSeedSelector(), "CloudProfile", RuleCloudProfileSelector); err != nil {
		return nil, err
	}
	if seeds, err = filterBySelector(seeds, shoot.GetSpec().GetSeedSelector(), "Shoot", RuleShootSelector); err != nil {
		return nil, err
	}
	if seeds, err = filterByProvider(seeds, shoot, in.CloudProfile.GetSeedSelector().GetProviderTypes()); err != nil {
		return nil, err
	}
	if seeds, err = filterForZonalControlPlane(seeds, shoot); err != nil {
		return nil, err
	}
	if seeds, err = filterByAccessRestrictions(seeds, shoot); err != nil {
		return nil, err
	}
	if seeds, err = filterCandidates(seeds, shoot, in.Usage); err != nil {
		return nil, err
	}
	if seeds, err = applyStrategy(seeds, shoot, in, log); err != nil {
		return nil, err
	}
	return leastUsed(seeds, in.Usage), nil
}

// Usable reports whether a seed takes new shoots at all: not being deleted, visible for scheduling, GardenletReady
// True and, when it has spec.backup, BackupBucketsReady True. Unlike Gardener it does not ask for
// status.lastOperation: Trellis seeds have no seed flow that would write one.
func Usable(seed *corev1beta1.Seed) bool {
	if seed.GetMetadata().GetDeletionTimestamp() != nil || !visible(seed) {
		return false
	}
	if conditionStatus(seed, ConditionGardenletReady) != "True" {
		return false
	}
	return seed.GetSpec().GetBackup() == nil || conditionStatus(seed, ConditionBackupBucketsReady) == "True"
}

// visible is Gardener's defaulted spec.settings.scheduling.visible: a seed without a scheduling section is visible
// (the API's defaulting writes visible: true), one with a section but no value is not (a plain bool in Gardener).
func visible(seed *corev1beta1.Seed) bool {
	s := seed.GetSpec().GetSettings().GetScheduling()
	return s == nil || s.GetVisible()
}

func conditionStatus(seed *corev1beta1.Seed, typ string) string {
	for _, c := range seed.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c.GetStatus()
		}
	}
	return ""
}

func filterUsable(seeds []*corev1beta1.Seed) ([]*corev1beta1.Seed, error) {
	out := keep(seeds, Usable)
	if len(out) == 0 {
		return nil, unschedulable(RuleUsable, "none of the %d seeds is valid for scheduling (not deleting, visible and ready)", len(seeds))
	}
	return out, nil
}

// labelSelector turns a SeedSelector's label part into a labels.Selector (an empty one selects everything).
func labelSelector(sel *corev1beta1.SeedSelector) (labels.Selector, *kmetav1.LabelSelector, error) {
	ks := &kmetav1.LabelSelector{MatchLabels: sel.GetMatchLabels()}
	for _, e := range sel.GetMatchExpressions() {
		ks.MatchExpressions = append(ks.MatchExpressions, kmetav1.LabelSelectorRequirement{
			Key: e.GetKey(), Operator: kmetav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
	}
	s, err := kmetav1.LabelSelectorAsSelector(ks)
	return s, ks, err
}

func filterBySelector(seeds []*corev1beta1.Seed, sel *corev1beta1.SeedSelector, kind string, rule Rule) ([]*corev1beta1.Seed, error) {
	if sel == nil {
		return seeds, nil
	}
	s, ks, err := labelSelector(sel)
	if err != nil {
		return nil, &Unschedulable{Rule: rule, Err: fmt.Errorf("label selector conversion failed: %v for seedSelector: %w", *ks, err)}
	}
	out := keep(seeds, func(seed *corev1beta1.Seed) bool { return s.Matches(labels.Set(seed.GetMetadata().GetLabels())) })
	if len(out) == 0 {
		return nil, unschedulable(rule, "none out of the %d seeds has the matching labels required by seed selector of '%s' (selector: '%s')", len(seeds), kind, s.String())
	}
	return out, nil
}

func filterByProvider(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot, enabled []string) ([]*corev1beta1.Seed, error) {
	typ := shoot.GetSpec().GetProvider().GetType()
	out := keep(seeds, func(seed *corev1beta1.Seed) bool {
		return matchProvider(seed.GetSpec().GetProvider().GetType(), typ, enabled)
	})
	if len(out) == 0 {
		return nil, unschedulable(RuleProvider, "none out of the %d seeds has a matching provider for %q", len(seeds), typ)
	}
	return out, nil
}

// matchProvider: the shoot's own provider type, unless the cloud profile's seedSelector.providerTypes lists types
// (or "*"): then exactly those.
func matchProvider(seedType, shootType string, enabled []string) bool {
	if len(enabled) == 0 {
		return seedType == shootType
	}
	return slices.Contains(enabled, "*") || slices.Contains(enabled, seedType)
}

// multiZonal reports whether the shoot asks for a control plane spread over zones.
func multiZonal(shoot *corev1beta1.Shoot) bool {
	return shoot.GetSpec().GetControlPlane().GetHighAvailability().GetFailureTolerance().GetType() == FailureToleranceZone
}

func filterForZonalControlPlane(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot) ([]*corev1beta1.Seed, error) {
	if !multiZonal(shoot) {
		return seeds, nil
	}
	out := keep(seeds, func(seed *corev1beta1.Seed) bool { return len(seed.GetSpec().GetProvider().GetZones()) >= 3 })
	if len(out) == 0 {
		return nil, unschedulable(RuleZonalControlPlane, "none of the %d seeds has at least 3 zones for hosting a shoot control plane with failure tolerance type 'zone'", len(seeds))
	}
	return out, nil
}

// accessRestrictionsSupported: every access restriction of the shoot is one the seed offers.
func accessRestrictionsSupported(seed []*corev1beta1.AccessRestriction, shoot []*corev1beta1.AccessRestrictionWithOptions) bool {
	if len(shoot) == 0 {
		return true
	}
	if len(shoot) > len(seed) {
		return false
	}
	for _, r := range shoot {
		if !slices.ContainsFunc(seed, func(s *corev1beta1.AccessRestriction) bool { return s.GetName() == r.GetName() }) {
			return false
		}
	}
	return true
}

func filterByAccessRestrictions(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot) ([]*corev1beta1.Seed, error) {
	out := keep(seeds, func(seed *corev1beta1.Seed) bool {
		return accessRestrictionsSupported(seed.GetSpec().GetAccessRestrictions(), shoot.GetSpec().GetAccessRestrictions())
	})
	if len(out) == 0 {
		return nil, unschedulable(RuleAccessRestrictions, "none of the %d seeds supports the access restrictions configured in the shoot specification", len(seeds))
	}
	return out, nil
}

// taintsTolerated is Gardener's TaintsAreTolerated: every taint has a toleration of its key, with its value when the
// taint has one (a toleration without a value tolerates only taints without one). As in Gardener, more taints than
// tolerations are never tolerated.
func taintsTolerated(taints []*corev1beta1.SeedTaint, tolerations []*metav1.Toleration) bool {
	if len(taints) == 0 {
		return true
	}
	if len(taints) > len(tolerations) {
		return false
	}
	values := make(map[string]string, len(tolerations))
	for _, t := range tolerations {
		values[t.GetKey()] = t.GetValue()
	}
	for _, t := range taints {
		v, ok := values[t.GetKey()]
		if !ok || (t.Value != nil && t.GetValue() != v) {
			return false
		}
	}
	return true
}

// allocatableShoots returns seed.status.allocatable.shoots; ok is false when the seed states none (or one that is not
// a quantity), and then its capacity is not limited.
func allocatableShoots(seed *corev1beta1.Seed) (int64, bool) {
	v, ok := seed.GetStatus().GetAllocatable()[ResourceShoots]
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, false
	}
	return q.Value(), true
}

func filterCandidates(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot, usage map[string]int) ([]*corev1beta1.Seed, error) {
	var out []*corev1beta1.Seed
	reasons := map[string]string{}
	for _, seed := range seeds {
		name := seed.GetMetadata().GetName()
		if shoot.GetSpec().GetNetworking() != nil {
			if msgs := networkConflicts(seed, shoot); len(msgs) > 0 {
				reasons[name] = fmt.Sprintf("invalid networks: %s", msgs)
				continue
			}
		}
		if !taintsTolerated(seed.GetSpec().GetTaints(), shoot.GetSpec().GetTolerations()) {
			reasons[name] = "shoot does not tolerate the seed's taints"
			continue
		}
		if n, ok := allocatableShoots(seed); ok && int64(usage[name]) >= n {
			reasons[name] = "seed does not have available capacity for shoots"
			continue
		}
		out = append(out, seed)
	}
	if len(out) == 0 {
		var b strings.Builder
		b.WriteString("{")
		for i, name := range slices.Sorted(maps.Keys(reasons)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s => %s", name, reasons[name])
		}
		b.WriteString("}")
		return nil, unschedulable(RuleCandidates, "0/%d seed cluster candidate(s) are eligible for scheduling: %s", len(seeds), b.String())
	}
	return out, nil
}

func applyStrategy(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot, in Landscape, log *slog.Logger) ([]*corev1beta1.Seed, error) {
	strategy := in.Strategy
	if strategy == "" {
		strategy = StrategySameRegion
	}
	typ, region := shoot.GetSpec().GetProvider().GetType(), shoot.GetSpec().GetRegion()
	var out []*corev1beta1.Seed
	switch {
	case shoot.GetSpec().GetPurpose() == PurposeTesting:
		out = keep(seeds, func(seed *corev1beta1.Seed) bool { return seed.GetSpec().GetProvider().GetType() == typ })
	case strategy == StrategySameRegion:
		out = keep(seeds, func(seed *corev1beta1.Seed) bool {
			return seed.GetSpec().GetProvider().GetType() == typ && seed.GetSpec().GetProvider().GetRegion() == region
		})
	case strategy == StrategyMinimalDistance:
		var err error
		if out, err = regionConfigMinimalDistance(seeds, shoot, in.RegionConfig, log); err != nil {
			return nil, err
		}
		if len(out) == 0 {
			log.Info("No candidates found with minimal distance of region config. Falling back to Levenshtein minimal distance")
			out = levenshteinMinimalDistance(seeds, shoot)
		}
	default:
		return nil, unschedulable(RuleStrategy, "failed to determine seed candidates. shoot purpose: '%s', strategy: '%s', valid strategies are: %v",
			shoot.GetSpec().GetPurpose(), strategy, []string{StrategySameRegion, StrategyMinimalDistance})
	}
	if len(out) == 0 {
		return nil, unschedulable(RuleStrategy, "no matching seed candidate found for Configuration (Cloud Profile '%s', Region '%s', SeedDeterminationStrategy '%s')",
			in.CloudProfileName, region, strategy)
	}
	return out, nil
}

// regionConfigMinimalDistance keeps the seeds whose region the region ConfigMap puts nearest to the shoot's region
// (all of them at a tie); none when there is no ConfigMap or it has no entry for the shoot's region. The shoot's own
// region is at distance 0 unless the entry says otherwise; seed regions the entry does not list are skipped.
func regionConfigMinimalDistance(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot, cm *kcorev1.ConfigMap, log *slog.Logger) ([]*corev1beta1.Seed, error) {
	region := shoot.GetSpec().GetRegion()
	if cm == nil || cm.GetData()[region] == "" {
		log.Info("Region ConfigMap not provided or Shoot region not available", "region", region)
		return nil, nil
	}
	distances, err := ParseRegionDistances(cm.GetData()[region])
	if err != nil {
		return nil, unschedulable(RuleStrategy, "failed to determine seed candidates. Wrong format in region ConfigMap %s/%s, Region %q: %w",
			cm.GetMetadata().GetNamespace(), cm.GetMetadata().GetName(), region, err)
	}
	if _, ok := distances[region]; !ok {
		distances[region] = 0
	}
	var out []*corev1beta1.Seed
	best := math.MaxInt32
	for _, seed := range seeds {
		d, ok := distances[seed.GetSpec().GetProvider().GetRegion()]
		if !ok {
			log.Info("Seed region not available in scheduler region ConfigMap for shoot region", "seedName", seed.GetMetadata().GetName(),
				"shootRegion", region, "seedRegion", seed.GetSpec().GetProvider().GetRegion())
			continue
		}
		switch {
		case d == best:
			out = append(out, seed)
		case d < best:
			best, out = d, []*corev1beta1.Seed{seed}
		}
	}
	return out, nil
}

// levenshteinMinimalDistance keeps the seeds nearest by regionDistance, 2 farther for another provider type.
func levenshteinMinimalDistance(seeds []*corev1beta1.Seed, shoot *corev1beta1.Shoot) []*corev1beta1.Seed {
	var out []*corev1beta1.Seed
	best := 1000
	for _, seed := range seeds {
		d := regionDistance(seed.GetSpec().GetProvider().GetRegion(), shoot.GetSpec().GetRegion())
		if seed.GetSpec().GetProvider().GetType() != shoot.GetSpec().GetProvider().GetType() {
			d += 2
		}
		switch {
		case d == best:
			out = append(out, seed)
		case d < best:
			best, out = d, []*corev1beta1.Seed{seed}
		}
	}
	return out
}

// leastUsed returns the first seed with the fewest shoots.
func leastUsed(seeds []*corev1beta1.Seed, usage map[string]int) *corev1beta1.Seed {
	var best *corev1beta1.Seed
	for _, seed := range seeds {
		if best == nil || usage[seed.GetMetadata().GetName()] < usage[best.GetMetadata().GetName()] {
			best = seed
		}
	}
	return best
}

func keep(seeds []*corev1beta1.Seed, match func(*corev1beta1.Seed) bool) []*corev1beta1.Seed {
	var out []*corev1beta1.Seed
	for _, s := range seeds {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// errNoCloudProfile is Gardener's error for a shoot naming no cloud profile.
var errNoCloudProfile = errors.New("could not determine cloudprofile from shoot")
