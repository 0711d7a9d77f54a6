package admission

import (
	"context"
	"fmt"
	"regexp"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

var (
	// kubernetesVersionRegex is Gardener's k8sVersionCPRegex: cloud profiles offer full versions only.
	kubernetesVersionRegex       = regexp.MustCompile(`^([0-9]+\.){2}[0-9]+$`)
	versionClassifications       = []string{"preview", "supported", "deprecated"}
	lifecycleClassifications     = []string{"unavailable", "preview", "supported", "deprecated", "expired"}
	machineImageUpdateStrategies = []string{"patch", "minor", "major"}
	architectures                = []string{"amd64", "arm64"}
	criNames                     = []string{"containerd"}
)

const architectureCapability = "architecture"

// defaultCloudProfile applies Gardener's SetDefaults_CloudProfile, _MachineImage, _MachineImageVersion,
// _MachineType and _VolumeType.
func defaultCloudProfile(cp *corev1beta1.CloudProfile) {
	if cp.Spec == nil {
		cp.Spec = &corev1beta1.CloudProfileSpec{}
	}
	spec := cp.Spec
	withCapabilities := len(spec.MachineCapabilities) > 0
	for _, img := range spec.MachineImages {
		if img.UpdateStrategy == nil {
			img.UpdateStrategy = ptrTo("major")
		}
		for _, v := range img.Versions {
			if len(v.Cri) == 0 {
				v.Cri = []*corev1beta1.CRI{{Name: "containerd"}}
			}
			if !withCapabilities && len(v.Architectures) == 0 {
				v.Architectures = []string{"amd64"}
			}
		}
	}
	for _, mt := range spec.MachineTypes {
		if !withCapabilities && mt.Architecture == nil {
			mt.Architecture = ptrTo("amd64")
		}
	}
	defaultMachineAndVolumeTypes(spec.MachineTypes, spec.VolumeTypes)
}

func defaultMachineAndVolumeTypes(mts []*corev1beta1.MachineType, vts []*corev1beta1.VolumeType) {
	for _, mt := range mts {
		if mt.Usable == nil {
			mt.Usable = ptrTo(true)
		}
	}
	for _, vt := range vts {
		if vt.Usable == nil {
			vt.Usable = ptrTo(true)
		}
	}
}

func validateCloudProfile(_ context.Context, _ Reader, cp, old *corev1beta1.CloudProfile) field.ErrorList {
	p := field.NewPath("spec")
	spec := cp.GetSpec()
	if spec == nil {
		spec = &corev1beta1.CloudProfileSpec{}
	}
	var errs field.ErrorList
	if spec.GetType() == "" {
		errs = append(errs, field.Required(p.Child("type"), "must provide a provider type"))
	}
	caps := spec.GetMachineCapabilities()
	errs = append(errs, validateCapabilityDefinitions(p.Child("machineCapabilities"), caps)...)

	kp := p.Child("kubernetes", "versions")
	versions := spec.GetKubernetes().GetVersions()
	if len(versions) == 0 {
		errs = append(errs, field.Required(kp, "must provide at least one Kubernetes version"))
	}
	errs = append(errs, validateKubernetesVersions(kp, versions, false)...)

	ip := p.Child("machineImages")
	if len(spec.GetMachineImages()) == 0 {
		errs = append(errs, field.Required(ip, "must provide at least one machine image"))
	}
	errs = append(errs, validateMachineImages(ip, spec.GetMachineImages(), len(caps) > 0, false)...)

	mp := p.Child("machineTypes")
	if len(spec.GetMachineTypes()) == 0 {
		errs = append(errs, field.Required(mp, "must provide at least one machine type"))
	}
	errs = append(errs, validateMachineTypes(mp, spec.GetMachineTypes(), len(caps) > 0, true)...)
	errs = append(errs, validateVolumeTypes(p.Child("volumeTypes"), spec.GetVolumeTypes())...)
	errs = append(errs, validateRegions(p.Child("regions"), spec.GetRegions())...)
	errs = append(errs, validateCloudProfileBastion(p.Child("bastion"), spec)...)
	errs = append(errs, validateLimits(p.Child("limits"), spec.GetLimits())...)
	errs = append(errs, seedSelector(p.Child("seedSelector"), spec.GetSeedSelector())...)
	if spec.CaBundle != nil {
		errs = append(errs, pemCertificates(p.Child("caBundle"), spec.GetCaBundle())...)
	}
	if old != nil {
		errs = append(errs, validateLimitsUpdate(p.Child("limits"), spec.GetLimits(), old.GetSpec().GetLimits())...)
	}
	return errs
}

// validateKubernetesVersions checks versions[]: <major>.<minor>.<patch>, unique, known classifications, one supported
// version per minor, and (for cloud profiles) no expiration date on the latest version.
func validateKubernetesVersions(p *field.Path, versions []*corev1beta1.ExpirableVersion, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	var latest *version.Version
	latestIdx := -1
	for i, v := range versions {
		vp := p.Index(i)
		switch {
		case !kubernetesVersionRegex.MatchString(v.GetVersion()):
			errs = append(errs, field.Invalid(vp.Child("version"), v.GetVersion(), "must be a Kubernetes version <major>.<minor>.<patch>, e.g. 1.33.2"))
		case seen[v.GetVersion()]:
			errs = append(errs, field.Duplicate(vp.Child("version"), v.GetVersion()))
		default:
			seen[v.GetVersion()] = true
			if sv, err := version.ParseGeneric(v.GetVersion()); err == nil && (latest == nil || latest.LessThan(sv)) {
				latest, latestIdx = sv, i
			}
		}
		if namespaced && v.Classification != nil {
			errs = append(errs, field.Forbidden(vp.Child("classification"), "must not provide a classification to a Kubernetes version in NamespacedCloudProfile"))
		} else {
			errs = append(errs, validateClassification(vp, v.Classification, v.GetLifecycle())...)
		}
	}
	if !namespaced {
		errs = append(errs, oneSupportedPerMinor(p, len(versions), func(i int) (string, *string) {
			return versions[i].GetVersion(), versions[i].Classification
		})...)
		if latestIdx >= 0 && versions[latestIdx].ExpirationDate != nil {
			errs = append(errs, field.Invalid(p.Index(latestIdx).Child("expirationDate"), versions[latestIdx].GetExpirationDate().AsTime(),
				fmt.Sprintf("expiration date of latest kubernetes version ('%s') must not be set", versions[latestIdx].GetVersion())))
		}
	}
	return errs
}

func validateClassification(p *field.Path, c *string, lifecycle []*corev1beta1.LifecycleStage) field.ErrorList {
	var errs field.ErrorList
	if c != nil && !contains(versionClassifications, *c) {
		errs = append(errs, field.NotSupported(p.Child("classification"), *c, versionClassifications))
	}
	for j, st := range lifecycle {
		if !contains(lifecycleClassifications, st.GetClassification()) {
			errs = append(errs, field.NotSupported(p.Child("lifecycle").Index(j).Child("classification"), st.GetClassification(), lifecycleClassifications))
		}
	}
	return errs
}

// oneSupportedPerMinor refuses a second version classified supported within the same minor version.
func oneSupportedPerMinor(p *field.Path, n int, at func(int) (string, *string)) field.ErrorList {
	var errs field.ErrorList
	minors := map[string]bool{}
	for i := range n {
		v, c := at(i)
		if c == nil || *c != "supported" {
			continue
		}
		sv, err := version.ParseGeneric(v)
		if err != nil {
			continue
		}
		minor := fmt.Sprintf("%d.%d", sv.Major(), sv.Minor())
		if minors[minor] {
			errs = append(errs, field.Forbidden(p.Index(i), fmt.Sprintf("unable to add version %q with classification \"supported\". Only one \"supported\" version is allowed per minor version", v)))
		}
		minors[minor] = true
	}
	return errs
}

// validateMachineImages checks machineImages[]: unique names, semantic versions unique per image, classifications,
// update strategies, container runtimes and architectures.
func validateMachineImages(p *field.Path, images []*corev1beta1.MachineImage, withCapabilities, allowEmptyVersions bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, img := range images {
		ip := p.Index(i)
		switch {
		case img.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "machine image name must not be empty"))
		case names[img.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), img.GetName()))
		}
		names[img.GetName()] = true
		if len(img.GetVersions()) == 0 && !allowEmptyVersions {
			errs = append(errs, field.Required(ip.Child("versions"), fmt.Sprintf("must provide at least one version for the machine image '%s'", img.GetName())))
		}
		if s := img.UpdateStrategy; s != nil && !contains(machineImageUpdateStrategies, *s) {
			errs = append(errs, field.NotSupported(ip.Child("updateStrategy"), *s, machineImageUpdateStrategies))
		} else if s == nil && !allowEmptyVersions {
			errs = append(errs, field.Required(ip.Child("updateStrategy"), "must provide an update strategy"))
		}
		seen := map[string]bool{}
		for j, v := range img.GetVersions() {
			vp := ip.Child("versions").Index(j)
			switch {
			case v.GetVersion() == "":
				errs = append(errs, field.Required(vp.Child("version"), "must provide a version"))
			case !isSemver(v.GetVersion()):
				errs = append(errs, field.Invalid(vp.Child("version"), v.GetVersion(), "could not parse version. Use a semantic version. In case there is no semantic version for this image use the extensibility provider (define mapping in the CloudProfile) to map to the actual non semantic version"))
			case seen[v.GetVersion()]:
				errs = append(errs, field.Duplicate(vp.Child("version"), v.GetVersion()))
			}
			seen[v.GetVersion()] = true
			errs = append(errs, validateClassification(vp, v.Classification, v.GetLifecycle())...)
			if ipu := v.GetInPlaceUpdates(); ipu != nil && ipu.MinVersionForUpdate != nil && !isSemver(ipu.GetMinVersionForUpdate()) {
				errs = append(errs, field.Invalid(vp.Child("inPlaceUpdates", "minVersionForUpdate"), ipu.GetMinVersionForUpdate(), "could not parse version. Use a semantic version."))
			}
			if !allowEmptyVersions || len(v.GetCri()) > 0 {
				errs = append(errs, validateCRIs(vp.Child("cri"), v.GetCri())...)
			}
			for k, a := range v.GetArchitectures() {
				if withCapabilities {
					errs = append(errs, field.Forbidden(vp.Child("architectures"), "must not be set when machineCapabilities are defined"))
					break
				}
				if !contains(architectures, a) {
					errs = append(errs, field.NotSupported(vp.Child("architectures").Index(k), a, architectures))
				}
			}
			if !withCapabilities && !allowEmptyVersions && len(v.GetArchitectures()) == 0 {
				errs = append(errs, field.Required(vp.Child("architectures"), "must provide at least one architecture"))
			}
			if !withCapabilities && len(v.GetCapabilityFlavors()) > 0 {
				errs = append(errs, field.Forbidden(vp.Child("capabilityFlavors"), "must not be set when no machineCapabilities are defined"))
			}
		}
		if !allowEmptyVersions {
			errs = append(errs, oneSupportedPerMinor(ip.Child("versions"), len(img.GetVersions()), func(j int) (string, *string) {
				return img.GetVersions()[j].GetVersion(), img.GetVersions()[j].Classification
			})...)
		}
	}
	return errs
}

func validateCRIs(p *field.Path, cris []*corev1beta1.CRI) field.ErrorList {
	if len(cris) == 0 {
		return field.ErrorList{field.Required(p, "must provide at least one supported container runtime")}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i, c := range cris {
		cp := p.Index(i)
		if !contains(criNames, c.GetName()) {
			errs = append(errs, field.NotSupported(cp.Child("name"), c.GetName(), criNames))
		} else if names[c.GetName()] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.GetName()))
		}
		names[c.GetName()] = true
		types := map[string]bool{}
		for j, r := range c.GetContainerRuntimes() {
			if types[r.GetType()] {
				errs = append(errs, field.Duplicate(cp.Child("containerRuntimes").Index(j).Child("type"), r.GetType()))
			}
			types[r.GetType()] = true
		}
	}
	return errs
}

// validateMachineTypes checks machineTypes[]: unique names, non-negative quantities, architectures and storage.
func validateMachineTypes(p *field.Path, mts []*corev1beta1.MachineType, withCapabilities, requireArchitecture bool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, mt := range mts {
		ip := p.Index(i)
		switch {
		case mt.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "must provide a name"))
		case names[mt.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), mt.GetName()))
		}
		names[mt.GetName()] = true
		errs = append(errs, quantity(ip.Child("cpu"), mt.GetCpu())...)
		errs = append(errs, quantity(ip.Child("gpu"), mt.GetGpu())...)
		errs = append(errs, quantity(ip.Child("memory"), mt.GetMemory())...)
		switch a := mt.Architecture; {
		case withCapabilities && a != nil && *a != "":
			errs = append(errs, field.Forbidden(ip.Child("architecture"), "must not be set when machineCapabilities are defined"))
		case withCapabilities:
		case a == nil && requireArchitecture:
			errs = append(errs, field.Required(ip.Child("architecture"), "must provide an architecture"))
		case a != nil && !contains(architectures, *a):
			errs = append(errs, field.NotSupported(ip.Child("architecture"), *a, architectures))
		}
		if !withCapabilities && mt.Capabilities != nil {
			errs = append(errs, field.Forbidden(ip.Child("capabilities"), "must not provide capabilities when no machineCapabilities are defined"))
		}
		if st := mt.GetStorage(); st != nil {
			sp := ip.Child("storage")
			switch {
			case st.Size == nil && st.MinSize == nil:
				errs = append(errs, field.Invalid(sp, "", `must either configure "size" or "minSize"`))
			case st.Size != nil && st.MinSize != nil:
				errs = append(errs, field.Invalid(sp, "", `not allowed to configure both "size" and "minSize"`))
			case st.Size != nil:
				errs = append(errs, quantity(sp.Child("size"), st.GetSize())...)
			default:
				errs = append(errs, quantity(sp.Child("minSize"), st.GetMinSize())...)
			}
		}
	}
	return errs
}

func validateVolumeTypes(p *field.Path, vts []*corev1beta1.VolumeType) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, vt := range vts {
		ip := p.Index(i)
		switch {
		case vt.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "must provide a name"))
		case names[vt.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), vt.GetName()))
		}
		names[vt.GetName()] = true
		if vt.GetClass() == "" {
			errs = append(errs, field.Required(ip.Child("class"), "must provide a class"))
		}
		if vt.MinSize != nil {
			errs = append(errs, quantity(ip.Child("minSize"), vt.GetMinSize())...)
		}
	}
	return errs
}

func validateRegions(p *field.Path, regions []*corev1beta1.Region) field.ErrorList {
	var errs field.ErrorList
	if len(regions) == 0 {
		errs = append(errs, field.Required(p, "must provide at least one region"))
	}
	names := map[string]bool{}
	for i, r := range regions {
		ip := p.Index(i)
		switch {
		case r.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "must provide a region name"))
		case names[r.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), r.GetName()))
		}
		names[r.GetName()] = true
		zones := map[string]bool{}
		for j, z := range r.GetZones() {
			zp := ip.Child("zones").Index(j).Child("name")
			switch {
			case z.GetName() == "":
				errs = append(errs, field.Required(zp, "zone name cannot be empty"))
			case zones[z.GetName()]:
				errs = append(errs, field.Duplicate(zp, z.GetName()))
			}
			zones[z.GetName()] = true
		}
		errs = append(errs, metav1validation.ValidateLabels(r.GetLabels(), ip.Child("labels"))...)
	}
	return errs
}

func validateCapabilityDefinitions(p *field.Path, defs []*corev1beta1.CapabilityDefinition) field.ErrorList {
	if len(defs) == 0 {
		return nil
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i, d := range defs {
		ip := p.Index(i)
		switch {
		case d.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "empty capability name is not allowed"))
		case names[d.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), d.GetName()))
		}
		names[d.GetName()] = true
		if len(d.GetValues()) == 0 {
			errs = append(errs, field.Required(ip.Child("values"), "must not be empty"))
		}
		for j, v := range d.GetValues() {
			if v == "" {
				errs = append(errs, field.Required(ip.Child("values").Index(j), "must not be empty"))
			} else if d.GetName() == architectureCapability && !contains(architectures, v) {
				errs = append(errs, field.NotSupported(ip.Child("values").Index(j), v, architectures))
			}
		}
	}
	if !names[architectureCapability] {
		errs = append(errs, field.Required(p, "must define the capability "+architectureCapability))
	}
	return errs
}

func validateCloudProfileBastion(p *field.Path, spec *corev1beta1.CloudProfileSpec) field.ErrorList {
	b := spec.GetBastion()
	if b == nil {
		return nil
	}
	if b.MachineType == nil && b.MachineImage == nil {
		return field.ErrorList{field.Invalid(p, "", "bastion section needs a machine type or machine image")}
	}
	var errs field.ErrorList
	if mt := b.GetMachineType(); mt != nil {
		found := false
		for _, m := range spec.GetMachineTypes() {
			found = found || m.GetName() == mt.GetName()
		}
		if !found {
			errs = append(errs, field.Invalid(p.Child("machineType", "name"), mt.GetName(), "machine type not found in spec.machineTypes"))
		}
	}
	if mi := b.GetMachineImage(); mi != nil {
		var img *corev1beta1.MachineImage
		for _, m := range spec.GetMachineImages() {
			if m.GetName() == mi.GetName() {
				img = m
			}
		}
		switch {
		case img == nil:
			errs = append(errs, field.Invalid(p.Child("machineImage", "name"), mi.GetName(), "image name not found in spec.machineImages"))
		case mi.Version != nil:
			found := false
			for _, v := range img.GetVersions() {
				found = found || v.GetVersion() == mi.GetVersion()
			}
			if !found {
				errs = append(errs, field.Invalid(p.Child("machineImage", "version"), mi.GetVersion(), "image version not found in spec.machineImages"))
			}
		}
	}
	return errs
}

func validateLimits(p *field.Path, l *corev1beta1.Limits) field.ErrorList {
	if l != nil && l.MaxNodesTotal != nil && *l.MaxNodesTotal <= 0 {
		return field.ErrorList{field.Invalid(p.Child("maxNodesTotal"), *l.MaxNodesTotal, "maxNodesTotal must be greater than 0")}
	}
	return nil
}

// validateLimitsUpdate allows adding, removing and increasing maxNodesTotal, not decreasing it.
func validateLimitsUpdate(p *field.Path, l, old *corev1beta1.Limits) field.ErrorList {
	if l == nil || old == nil || l.MaxNodesTotal == nil || old.MaxNodesTotal == nil {
		return nil
	}
	if n, o := l.GetMaxNodesTotal(), old.GetMaxNodesTotal(); n < o {
		return field.ErrorList{field.Invalid(p.Child("maxNodesTotal"), n, "maxNodesTotal cannot be decreased")}
	}
	return nil
}
