package admission

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// This file holds the Shoot rules that follow Gardener's pkg/apis/core/validation/shoot.go and its shoot admission
// plugins (validator, tolerationrestriction, managedseed); docs/api.md lists them with their Gardener source. Messages
// and field paths are Gardener's.

var managedSeeds = schema.GroupResource{Group: "seedmanagement.gardener.cloud", Resource: "managedseeds"}

// Gardener's limits.
const (
	// shootNameLengthLimit bounds len(project name + shoot name) on create (Gardener's validator).
	shootNameLengthLimit = 21
	// defaultVPNRange is the VPN network of every shoot, which its networks must not overlap.
	defaultVPNRange = "192.168.123.0/24"
	// Maintenance time windows last between 30 minutes and 6 hours.
	maintenanceWindowShortest = 30 * time.Minute
	maintenanceWindowLongest  = 6 * time.Hour
	// maintenanceTimeLayout is Gardener's HHMMSS+ZONE format of maintenance window bounds, e.g. 220000+0100.
	maintenanceTimeLayout = "150405-0700"
)

// failureToleranceTypes are Gardener's control-plane failure tolerance types.
var failureToleranceTypes = []string{"node", "zone"}

// defaultShootMaintenanceAndHibernation fills in Gardener's defaults (SetDefaults_Maintenance, SetDefaults_Shoot):
// a one-hour maintenance window beginning at a full hour between 00:00 and 22:00 UTC, automatic Kubernetes and machine image
// updates, and UTC as the location of hibernation schedules. Gardener picks the window at random; it is derived from
// the shoot's namespace and name here, so that defaulting the same shoot twice gives the same window.
func defaultShootMaintenanceAndHibernation(s *corev1beta1.Shoot) {
	spec := s.Spec
	if spec.Maintenance == nil {
		spec.Maintenance = &corev1beta1.Maintenance{}
	}
	m := spec.Maintenance
	if m.TimeWindow == nil {
		h := fnv.New32a()
		h.Write([]byte(s.GetMetadata().GetNamespace() + "/" + s.GetMetadata().GetName()))
		begin := int(h.Sum32() % 23) // 0 … 22, Gardener's rand.IntnRange(0, 23)
		m.TimeWindow = &corev1beta1.MaintenanceTimeWindow{
			Begin: fmt.Sprintf("%02d0000+0000", begin),
			End:   fmt.Sprintf("%02d0000+0000", begin+1),
		}
	}
	if m.AutoUpdate == nil {
		m.AutoUpdate = &corev1beta1.MaintenanceAutoUpdate{}
	}
	if m.AutoUpdate.KubernetesVersion == nil {
		m.AutoUpdate.KubernetesVersion = ptrTo(true)
	}
	if m.AutoUpdate.MachineImageVersion == nil {
		m.AutoUpdate.MachineImageVersion = ptrTo(true)
	}
	for _, sch := range spec.GetHibernation().GetSchedules() {
		if sch.Location == nil {
			sch.Location = ptrTo("UTC")
		}
	}
}

// validateShootSpecRules checks what a Shoot's spec says on its own: DNS domain, network CIDRs, hibernation schedules,
// maintenance window, tolerations and the control plane's failure tolerance.
func validateShootSpecRules(s *corev1beta1.Shoot) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if dns := s.GetSpec().GetDns(); dns != nil && dns.Domain != nil {
		errs = append(errs, dnsSubdomain(spec.Child("dns", "domain"), dns.GetDomain())...)
	}
	errs = append(errs, validateShootNetworks(spec.Child("networking"), s.GetSpec().GetNetworking())...)
	errs = append(errs, validateHibernationSchedules(spec.Child("hibernation", "schedules"), s.GetSpec().GetHibernation().GetSchedules())...)
	errs = append(errs, validateMaintenanceTimeWindow(spec.Child("maintenance", "timeWindow"), s.GetSpec().GetMaintenance().GetTimeWindow())...)
	errs = append(errs, tolerations(spec.Child("tolerations"), s.GetSpec().GetTolerations())...)
	errs = append(errs, validateKubelet(spec.Child("kubernetes", "kubelet"), s.GetSpec().GetKubernetes().GetKubelet())...)
	for i, w := range s.GetSpec().GetProvider().GetWorkers() {
		errs = append(errs, validateKubelet(spec.Child("provider", "workers").Index(i).Child("kubernetes", "kubelet"), w.GetKubernetes().GetKubelet())...)
	}
	if ft := s.GetSpec().GetControlPlane().GetHighAvailability().GetFailureTolerance(); ft != nil && !slices.Contains(failureToleranceTypes, ft.GetType()) {
		errs = append(errs, field.NotSupported(spec.Child("controlPlane", "highAvailability", "failureTolerance", "type"), ft.GetType(), failureToleranceTypes))
	}
	return errs
}

// podPIDsLimitMinimum is Gardener's PodPIDsLimitMinimum.
const podPIDsLimitMinimum = 100

// validateKubelet follows Gardener's ValidateKubeletConfig for the shoot's and the worker pools' kubelet: counts are
// not negative, the pod PID limit at least 100, durations parse, image GC thresholds are percentages with low < high.
func validateKubelet(p *field.Path, k *corev1beta1.KubeletConfig) field.ErrorList {
	if k == nil {
		return nil
	}
	errs := nonNegative(p.Child("maxPods"), k.MaxPods)
	if k.PodPidsLimit != nil && k.GetPodPidsLimit() < podPIDsLimitMinimum {
		errs = append(errs, field.Invalid(p.Child("podPIDsLimit"), k.GetPodPidsLimit(), fmt.Sprintf("podPIDsLimit value must be at least %d", podPIDsLimitMinimum)))
	}
	errs = append(errs, nonNegative(p.Child("evictionMaxPodGracePeriod"), k.EvictionMaxPodGracePeriod)...)
	errs = append(errs, duration(p.Child("evictionPressureTransitionPeriod"), k.EvictionPressureTransitionPeriod)...)
	for _, c := range []struct {
		name string
		v    *int32
	}{{"imageGCHighThresholdPercent", k.ImageGcHighThresholdPercent}, {"imageGCLowThresholdPercent", k.ImageGcLowThresholdPercent}} {
		if c.v != nil && (*c.v < 0 || *c.v > 100) {
			errs = append(errs, field.Invalid(p.Child(c.name), *c.v, "must be in the range [0, 100]"))
		}
	}
	if k.ImageGcHighThresholdPercent != nil && k.ImageGcLowThresholdPercent != nil && k.GetImageGcLowThresholdPercent() >= k.GetImageGcHighThresholdPercent() {
		errs = append(errs, field.Invalid(p.Child("imageGCLowThresholdPercent"), k.GetImageGcLowThresholdPercent(), "imageGCLowThresholdPercent must be less than imageGCHighThresholdPercent"))
	}
	return errs
}

// validateShootSpecRulesUpdate holds Gardener's immutability rules of the fields above: the pod and service networks
// once set, and the failure tolerance type once set (Gardener's ValidateShootHAConfigUpdate).
func validateShootSpecRulesUpdate(s, old *corev1beta1.Shoot) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	nn, on := s.GetSpec().GetNetworking(), old.GetSpec().GetNetworking()
	if on != nil && on.Pods != nil {
		errs = append(errs, immutable(spec.Child("networking", "pods"), nn.GetPods(), on.GetPods())...)
	}
	if on != nil && on.Services != nil {
		errs = append(errs, immutable(spec.Child("networking", "services"), nn.GetServices(), on.GetServices())...)
	}
	ot := old.GetSpec().GetControlPlane().GetHighAvailability().GetFailureTolerance()
	nt := s.GetSpec().GetControlPlane().GetHighAvailability().GetFailureTolerance()
	if ot != nil && nt != nil && ot.GetType() != nt.GetType() {
		errs = append(errs, field.Forbidden(spec.Child("controlPlane", "highAvailability", "failureTolerance", "type"), "Shoot is already highly available with a different failure tolerance type"))
	}
	return errs
}

// shootNetwork is one of a shoot's networks: its field, its kind in Gardener's messages and its prefix.
type shootNetwork struct {
	path   *field.Path
	kind   string // node, pod, service
	prefix netip.Prefix
}

// validateShootNetworks parses the shoot's CIDRs and checks that they are disjoint (Gardener's cidrvalidation
// ValidateShootNetworkDisjointedness); it returns the parsed networks for the check against the seed.
func validateShootNetworks(p *field.Path, n *corev1beta1.Networking) field.ErrorList {
	nets, errs := parseShootNetworks(p, n)
	byKind := map[string]shootNetwork{}
	for _, sn := range nets {
		byKind[sn.kind] = sn
	}
	pods, hasPods := byKind["pod"]
	svcs, hasSvcs := byKind["service"]
	nodes, hasNodes := byKind["node"]
	if hasPods && hasSvcs && pods.prefix.Overlaps(svcs.prefix) {
		errs = append(errs, field.Invalid(svcs.path, svcs.prefix.String(), "shoot pod network intersects with shoot service network"))
	}
	if hasPods && hasNodes && pods.prefix.Overlaps(nodes.prefix) {
		errs = append(errs, field.Invalid(pods.path, pods.prefix.String(), "shoot pod network intersects with shoot node network"))
	}
	if hasSvcs && hasNodes && svcs.prefix.Overlaps(nodes.prefix) {
		errs = append(errs, field.Invalid(svcs.path, svcs.prefix.String(), "shoot service network intersects with shoot node network"))
	}
	return errs
}

// parseShootNetworks returns the set networks of n, in Gardener's order (nodes, services, pods), and an error for
// each that is no CIDR.
func parseShootNetworks(p *field.Path, n *corev1beta1.Networking) ([]shootNetwork, field.ErrorList) {
	var (
		out  []shootNetwork
		errs field.ErrorList
	)
	if n == nil {
		return nil, nil
	}
	for _, c := range []struct {
		name, kind string
		v          *string
	}{{"nodes", "node", n.Nodes}, {"services", "service", n.Services}, {"pods", "pod", n.Pods}} {
		if c.v == nil {
			continue
		}
		pr, err := netip.ParsePrefix(*c.v)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child(c.name), *c.v, fmt.Sprintf("invalid CIDR address: %s", *c.v)))
			continue
		}
		out = append(out, shootNetwork{path: p.Child(c.name), kind: c.kind, prefix: pr.Masked()})
	}
	return out, errs
}

// validateShootNetworksAgainstSeed checks the shoot's networks against the seed's and the VPN network (Gardener's
// cidrvalidation ValidateNetworkDisjointedness), when the shoot is scheduled or moved to seed.
func validateShootNetworksAgainstSeed(s *corev1beta1.Shoot, seed *corev1beta1.Seed) field.ErrorList {
	nets, _ := parseShootNetworks(field.NewPath("spec", "networking"), s.GetSpec().GetNetworking())
	sn := seed.GetSpec().GetNetworks()
	seedNets := []struct{ kind, cidr string }{{"node", sn.GetNodes()}, {"pod", sn.GetPods()}, {"service", sn.GetServices()}}
	var errs field.ErrorList
	for _, n := range nets {
		for _, s := range seedNets {
			if pr, err := netip.ParsePrefix(s.cidr); err == nil && pr.Overlaps(n.prefix) {
				errs = append(errs, field.Invalid(n.path, n.prefix.String(), fmt.Sprintf("shoot %s network intersects with seed %s network", n.kind, s.kind)))
			}
		}
		if netip.MustParsePrefix(defaultVPNRange).Overlaps(n.prefix) {
			errs = append(errs, field.Invalid(n.path, n.prefix.String(), fmt.Sprintf("shoot %s network intersects with default vpn network (%s)", n.kind, defaultVPNRange)))
		}
	}
	return errs
}

// validateHibernationSchedules follows Gardener's ValidateHibernationSchedules: each schedule has a start or an end,
// both are standard cron specs used once across all schedules, and the location is a time zone.
func validateHibernationSchedules(p *field.Path, schedules []*corev1beta1.HibernationSchedule) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	spec := func(p *field.Path, v string) {
		if _, err := cron.ParseStandard(v); err != nil {
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("not a valid cron spec: %v", err)))
		} else if seen[v] {
			errs = append(errs, field.Duplicate(p, v))
		} else {
			seen[v] = true
		}
	}
	for i, s := range schedules {
		ip := p.Index(i)
		if s.Start == nil && s.End == nil {
			errs = append(errs, field.Required(ip.Child("start/end"), "either start or end has to be provided"))
		}
		if s.Start != nil {
			spec(ip.Child("start"), *s.Start)
		}
		if s.End != nil {
			spec(ip.Child("end"), *s.End)
		}
		if s.Location != nil {
			if _, err := time.LoadLocation(*s.Location); err != nil {
				errs = append(errs, field.Invalid(ip.Child("location"), *s.Location, fmt.Sprintf("not a valid location: %v", err)))
			}
		}
	}
	return errs
}

// validateMaintenanceTimeWindow follows Gardener's validateMaintenance: begin and end are HHMMSS+ZONE times and the
// window lasts between 30 minutes and 6 hours (it may span midnight).
func validateMaintenanceTimeWindow(p *field.Path, w *corev1beta1.MaintenanceTimeWindow) field.ErrorList {
	if w == nil {
		return nil
	}
	d, err := maintenanceWindowDuration(w.GetBegin(), w.GetEnd())
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(p.Child("begin/end"), w.GetBegin()+"-"+w.GetEnd(), err.Error())}
	case d > maintenanceWindowLongest:
		return field.ErrorList{field.Invalid(p, d.String(), fmt.Sprintf("time window must not be greater than %s", maintenanceWindowLongest))}
	case d < maintenanceWindowShortest:
		return field.ErrorList{field.Invalid(p, d.String(), fmt.Sprintf("time window must not be smaller than %s", maintenanceWindowShortest))}
	}
	return nil
}

func maintenanceWindowDuration(begin, end string) (time.Duration, error) {
	b, err := time.Parse(maintenanceTimeLayout, begin)
	if err != nil {
		return 0, fmt.Errorf("could not parse begin time: %w", err)
	}
	e, err := time.Parse(maintenanceTimeLayout, end)
	if err != nil {
		return 0, fmt.Errorf("could not parse end time: %w", err)
	}
	d := e.UTC().Sub(b.UTC())
	for d < 0 {
		d += 24 * time.Hour
	}
	for d >= 24*time.Hour {
		d -= 24 * time.Hour
	}
	return d, nil
}

// admitShootProject applies the rules that read the shoot's Project (Gardener's validator and tolerationrestriction
// plugins): on create, the project must not be being deleted, len(project name + shoot name) is at most 21 and the
// project's default tolerations are added; tolerations new to the shoot must be among the project's whitelist (or
// its defaults).
func admitShootProject(s, old *corev1beta1.Shoot, project *corev1beta1.Project) field.ErrorList {
	var errs field.ErrorList
	name, pname := s.GetMetadata().GetName(), project.GetMetadata().GetName()
	if old == nil {
		if project.GetMetadata().GetDeletionTimestamp() != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"), fmt.Sprintf("cannot create shoot '%s' in project '%s' that is already marked for deletion", name, pname)))
		}
		if len(pname+name) > shootNameLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, fmt.Sprintf("the length of the shoot name and the project name must not exceed %d characters (project: %s; shoot: %s)", shootNameLengthLimit, pname, name)))
		}
		for _, d := range project.GetSpec().GetTolerations().GetDefaults() {
			if !slices.ContainsFunc(s.Spec.Tolerations, func(t *metav1.Toleration) bool { return t.GetKey() == d.GetKey() }) {
				s.Spec.Tolerations = append(s.Spec.Tolerations, &metav1.Toleration{Key: d.GetKey(), Value: d.Value})
			}
		}
	}
	allowed := map[string]bool{}
	var allowedList []string
	for _, t := range append(slices.Clone(project.GetSpec().GetTolerations().GetWhitelist()), project.GetSpec().GetTolerations().GetDefaults()...) {
		id := keyWithOptionalValue(t.GetKey(), t.Value)
		if !allowed[id] {
			allowedList = append(allowedList, id)
		}
		allowed[id] = true
	}
	var had map[string]bool
	if old != nil {
		had = map[string]bool{}
		for _, t := range old.GetSpec().GetTolerations() {
			had[keyWithOptionalValue(t.GetKey(), t.Value)] = true
		}
	}
	p := field.NewPath("spec", "tolerations")
	for i, t := range s.GetSpec().GetTolerations() {
		id := keyWithOptionalValue(t.GetKey(), t.Value)
		if had[id] || allowed[id] || allowed[t.GetKey()] {
			continue
		}
		errs = append(errs, field.Forbidden(p.Index(i), fmt.Sprintf("only the following tolerations are allowed: %v", allowedList)))
	}
	return errs
}

// admitShootCloudProfile applies the rules that read the cloud profile to each worker (Gardener's validator): it
// defaults the machine image and its version, and checks the machine image, machine type, zones and volume types.
// Values the shoot already had (old) pass even when the profile no longer offers them, as in Gardener.
func admitShootCloudProfile(s, old *corev1beta1.Shoot, profile *corev1beta1.CloudProfileSpec, now time.Time) field.ErrorList {
	var errs field.ErrorList
	zones := map[string]*corev1beta1.AvailabilityZone{}
	var zoneNames []string
	for _, rg := range profile.GetRegions() {
		if rg.GetName() == s.GetSpec().GetRegion() {
			for _, z := range rg.GetZones() {
				zones[z.GetName()] = z
				zoneNames = append(zoneNames, z.GetName())
			}
		}
	}
	workers := field.NewPath("spec", "provider", "workers")
	for i, w := range s.GetSpec().GetProvider().GetWorkers() {
		p := workers.Index(i)
		ow := oldWorker(old, w.GetName())
		errs = append(errs, admitMachineImage(p.Child("machine", "image"), w, ow, profile, now)...)

		var oldZones []string
		if ow != nil {
			oldZones = ow.GetZones()
		}
		for j, z := range w.GetZones() {
			if zones[z] == nil && !slices.Contains(oldZones, z) {
				errs = append(errs, field.NotSupported(p.Child("zones").Index(j), z, zoneNames))
			}
		}
		unavailable := func(list func(*corev1beta1.AvailabilityZone) []string, name string) bool {
			for _, z := range w.GetZones() {
				if zones[z] != nil && slices.Contains(list(zones[z]), name) {
					return true
				}
			}
			return false
		}

		if t := w.GetMachine().GetType(); ow == nil || ow.GetMachine().GetType() != t {
			var valid []string
			for _, m := range profile.GetMachineTypes() {
				if (m.Usable == nil || m.GetUsable()) && !unavailable((*corev1beta1.AvailabilityZone).GetUnavailableMachineTypes, m.GetName()) {
					valid = append(valid, m.GetName())
				}
			}
			if !slices.Contains(valid, t) {
				errs = append(errs, field.NotSupported(p.Child("machine", "type"), t, valid))
			}
		}

		if len(profile.GetVolumeTypes()) == 0 {
			continue
		}
		var validVolumes []string
		for _, v := range profile.GetVolumeTypes() {
			if (v.Usable == nil || v.GetUsable()) && !unavailable((*corev1beta1.AvailabilityZone).GetUnavailableVolumeTypes, v.GetName()) {
				validVolumes = append(validVolumes, v.GetName())
			}
		}
		if t := w.GetVolume(); t != nil && t.Type != nil && (ow == nil || ow.GetVolume().GetType() != t.GetType()) && !slices.Contains(validVolumes, t.GetType()) {
			errs = append(errs, field.NotSupported(p.Child("volume", "type"), t.GetType(), validVolumes))
		}
		for j, dv := range w.GetDataVolumes() {
			if t := dv.Type; t != nil && !slices.Contains(validVolumes, *t) && !oldDataVolumeType(ow, dv.GetName(), *t) {
				errs = append(errs, field.NotSupported(p.Child("dataVolumes").Index(j).Child("type"), *t, validVolumes))
			}
		}
	}
	return errs
}

func oldWorker(old *corev1beta1.Shoot, name string) *corev1beta1.Worker {
	for _, w := range old.GetSpec().GetProvider().GetWorkers() {
		if w.GetName() == name {
			return w
		}
	}
	return nil
}

func oldDataVolumeType(ow *corev1beta1.Worker, name, typ string) bool {
	for _, dv := range ow.GetDataVolumes() {
		if dv.GetName() == name && dv.GetType() == typ {
			return true
		}
	}
	return false
}

// admitMachineImage defaults and checks a worker's machine image as Gardener's validator does. Without an image, the
// first image of the profile with a version for the worker's architecture is chosen; without a version, or with a
// partial one (<major> or <major>.<minor>), the highest matching version that is neither preview nor expired. The
// image must then be one of the profile's, in a version that supports the architecture and is not expired unless the
// shoot already ran it.
func admitMachineImage(p *field.Path, w, ow *corev1beta1.Worker, profile *corev1beta1.CloudProfileSpec, now time.Time) field.ErrorList {
	arch := w.GetMachine().GetArchitecture()
	if arch == "" {
		arch = "amd64"
	}
	supports := func(v *corev1beta1.MachineImageVersion) bool {
		return len(v.GetArchitectures()) == 0 || slices.Contains(v.GetArchitectures(), arch)
	}
	if w.Machine == nil {
		w.Machine = &corev1beta1.Machine{}
	}
	if w.Machine.Image == nil {
		for _, img := range profile.GetMachineImages() {
			if slices.ContainsFunc(img.GetVersions(), supports) {
				w.Machine.Image = &corev1beta1.ShootMachineImage{Name: img.GetName()}
				break
			}
		}
		if w.Machine.Image == nil {
			return field.ErrorList{field.Invalid(p, nil, fmt.Sprintf("the cloud profile has no machine image for architecture %s", arch))}
		}
	}
	image := w.Machine.Image
	var offered *corev1beta1.MachineImage
	var names []string
	for _, img := range profile.GetMachineImages() {
		names = append(names, img.GetName())
		if img.GetName() == image.GetName() {
			offered = img
		}
	}
	if offered == nil {
		return field.ErrorList{field.NotSupported(p.Child("name"), image.GetName(), names)}
	}
	if want := image.GetVersion(); strings.Count(want, ".") < 2 {
		var best *version.Version
		for _, v := range offered.GetVersions() {
			expired, preview := versionStage(v.GetExpirationDate(), v.Classification, v.GetLifecycle(), now)
			pv, err := version.ParseGeneric(v.GetVersion())
			if err != nil || expired || preview || !supports(v) || (want != "" && !strings.HasPrefix(v.GetVersion()+".", want+".")) {
				continue
			}
			if best == nil || best.LessThan(pv) {
				best, image.Version = pv, ptrTo(v.GetVersion())
			}
		}
		if best == nil {
			return field.ErrorList{field.Invalid(p.Child("version"), want, fmt.Sprintf("machine image %s has no version matching %q that is supported, not expired and available for architecture %s", image.GetName(), want, arch))}
		}
	}
	unchanged := ow != nil && ow.GetMachine().GetImage().GetName() == image.GetName() && ow.GetMachine().GetImage().GetVersion() == image.GetVersion()
	var valid []string
	for _, v := range offered.GetVersions() {
		expired, _ := versionStage(v.GetExpirationDate(), v.Classification, v.GetLifecycle(), now)
		if v.GetVersion() == image.GetVersion() && unchanged {
			return nil
		}
		if !expired && supports(v) {
			valid = append(valid, v.GetVersion())
		}
	}
	if !slices.Contains(valid, image.GetVersion()) {
		return field.ErrorList{field.NotSupported(p.Child("version"), image.GetVersion(), valid)}
	}
	return nil
}

// versionStage reports whether a cloud profile version is expired or in preview at now, from its lifecycle stages
// (the last one started wins) or the deprecated expirationDate and classification.
func versionStage(expiration *timestamppb.Timestamp, classification *string, lifecycle []*corev1beta1.LifecycleStage, now time.Time) (expired, preview bool) {
	if len(lifecycle) > 0 {
		stage := ""
		for _, l := range lifecycle {
			if l.GetStartTime() == nil || !l.GetStartTime().AsTime().After(now) {
				stage = l.GetClassification()
			}
		}
		return stage == "expired", stage == "preview" || stage == "unavailable"
	}
	expired = expiration != nil && expiration.AsTime().Before(now)
	return expired, classification != nil && *classification == "preview"
}

// validateShootDelete refuses the deletion of a Shoot without Gardener's deletion confirmation, and of a Shoot a
// ManagedSeed registers as a seed (Gardener's ManagedSeed admission plugin for shoots).
func validateShootDelete(ctx context.Context, r Reader, s *corev1beta1.Shoot) error {
	if err := confirmDeletion(ctx, r, s); err != nil {
		return err
	}
	md := s.GetMetadata()
	list, err := r.List(ctx, managedSeeds, md.GetNamespace())
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("could not get ManagedSeed for shoot '%s/%s': %w", md.GetNamespace(), md.GetName(), err))
	}
	for _, o := range list {
		if ms, ok := o.(*seedmanagementv1alpha1.ManagedSeed); ok && ms.GetSpec().GetShoot().GetName() == md.GetName() {
			return apierrors.NewForbidden(shoots, md.GetName(),
				fmt.Errorf("cannot delete shoot %s/%s since it is still referenced by a managed seed", md.GetNamespace(), md.GetName()))
		}
	}
	return nil
}
