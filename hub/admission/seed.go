package admission

import (
	"context"
	"fmt"
	"net"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

var (
	seedIngressKinds           = []string{"nginx"}
	seedExternalTrafficPolicy  = []string{"Cluster", "Local"}
	seedOperations             = []string{"renew-garden-access-secrets", "reconcile", "renew-kubeconfig", "renew-workload-identity-tokens"}
	ipFamilies                 = []string{"IPv4", "IPv6"}
	tolerationOperators        = []string{"Equal", "Exists"}
	taintEffects               = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	reservedKubeAPIServerRange = mustCIDR("240.0.0.0/8") // Gardener's ReservedKubeApiServerMappingRange
	defaultVPNRangeV6          = mustCIDR("fd8f:6d53:b97a:1::/96")
)

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// defaultSeed applies Gardener's SetDefaults_Seed: settings with their defaults, IPv4 as the IP family.
func defaultSeed(s *corev1beta1.Seed) {
	if s.Spec == nil {
		s.Spec = &corev1beta1.SeedSpec{}
	}
	spec := s.Spec
	if spec.Networks == nil {
		spec.Networks = &corev1beta1.SeedNetworks{}
	}
	if len(spec.Networks.IpFamilies) == 0 {
		spec.Networks.IpFamilies = []string{"IPv4"}
	}
	if spec.Settings == nil {
		spec.Settings = &corev1beta1.SeedSettings{}
	}
	st := spec.Settings
	if st.ExcessCapacityReservation == nil {
		st.ExcessCapacityReservation = &corev1beta1.SeedSettingExcessCapacityReservation{}
	}
	if ecr := st.ExcessCapacityReservation; (ecr.Enabled == nil || *ecr.Enabled) && len(ecr.Configs) == 0 {
		// Roughly one moderately large control plane.
		ecr.Configs = []*corev1beta1.SeedSettingExcessCapacityReservationConfig{{Resources: map[string]string{"cpu": "2", "memory": "6Gi"}}}
	}
	// The booleans below are plain (non-pointer) fields in Gardener's API: absent means false there.
	if st.Scheduling == nil {
		st.Scheduling = &corev1beta1.SeedSettingScheduling{Visible: ptrTo(true)}
	} else if st.Scheduling.Visible == nil {
		st.Scheduling.Visible = ptrTo(false)
	}
	if st.LoadBalancerServices == nil {
		st.LoadBalancerServices = &corev1beta1.SeedSettingLoadBalancerServices{}
	}
	if st.LoadBalancerServices.ZonalIngress == nil {
		st.LoadBalancerServices.ZonalIngress = &corev1beta1.SeedSettingLoadBalancerServicesZonalIngress{Enabled: ptrTo(true)}
	}
	if st.VerticalPodAutoscaler == nil {
		st.VerticalPodAutoscaler = &corev1beta1.SeedSettingVerticalPodAutoscaler{Enabled: ptrTo(true)}
	} else if st.VerticalPodAutoscaler.Enabled == nil {
		st.VerticalPodAutoscaler.Enabled = ptrTo(false)
	}
	if st.PersistentVolumeClaimAutoscaler == nil {
		st.PersistentVolumeClaimAutoscaler = &corev1beta1.SeedSettingPersistentVolumeClaimAutoscaler{Enabled: ptrTo(false)}
	} else if st.PersistentVolumeClaimAutoscaler.Enabled == nil {
		st.PersistentVolumeClaimAutoscaler.Enabled = ptrTo(false)
	}
	if st.DependencyWatchdog == nil {
		st.DependencyWatchdog = &corev1beta1.SeedSettingDependencyWatchdog{}
	}
	if st.DependencyWatchdog.Weeder == nil {
		st.DependencyWatchdog.Weeder = &corev1beta1.SeedSettingDependencyWatchdogWeeder{Enabled: ptrTo(true)}
	} else if st.DependencyWatchdog.Weeder.Enabled == nil {
		st.DependencyWatchdog.Weeder.Enabled = ptrTo(false)
	}
	if st.DependencyWatchdog.Prober == nil {
		st.DependencyWatchdog.Prober = &corev1beta1.SeedSettingDependencyWatchdogProber{Enabled: ptrTo(true)}
	} else if st.DependencyWatchdog.Prober.Enabled == nil {
		st.DependencyWatchdog.Prober.Enabled = ptrTo(false)
	}
	if st.TopologyAwareRouting == nil {
		st.TopologyAwareRouting = &corev1beta1.SeedSettingTopologyAwareRouting{Enabled: ptrTo(false)}
	} else if st.TopologyAwareRouting.Enabled == nil {
		st.TopologyAwareRouting.Enabled = ptrTo(false)
	}
}

func validateSeed(ctx context.Context, r Reader, s, old *corev1beta1.Seed) field.ErrorList {
	errs := nameIsDNSLabel(s.GetMetadata())
	errs = append(errs, operationAnnotation(s.GetMetadata(), old.GetMetadata(), seedOperations)...)
	errs = append(errs, validateSeedSpec(field.NewPath("spec"), s.GetSpec(), false)...)
	if old != nil {
		errs = append(errs, validateSeedSpecUpdate(field.NewPath("spec"), s.GetSpec(), old.GetSpec())...)
	}
	return errs
}

// validateSeedSpec is Gardener's ValidateSeedSpec; inTemplate relaxes the rules for the seed template of a
// ManagedSeed's gardenlet configuration.
func validateSeedSpec(p *field.Path, spec *corev1beta1.SeedSpec, inTemplate bool) field.ErrorList {
	var errs field.ErrorList
	prov := p.Child("provider")
	if !inTemplate && spec.GetProvider().GetType() == "" {
		errs = append(errs, field.Required(prov.Child("type"), "must provide a provider type"))
	}
	if !inTemplate && spec.GetProvider().GetRegion() == "" {
		errs = append(errs, field.Required(prov.Child("region"), "must provide a provider region"))
	}
	zones := map[string]bool{}
	for i, z := range spec.GetProvider().GetZones() {
		if zones[z] {
			errs = append(errs, field.Duplicate(prov.Child("zones").Index(i), z))
		}
		zones[z] = true
	}

	errs = append(errs, validateSeedNetworks(p.Child("networks"), spec.GetNetworks(), inTemplate)...)
	errs = append(errs, validateSeedBackup(p.Child("backup"), spec.GetBackup(), spec.GetProvider().GetType())...)
	errs = append(errs, validateSeedDNS(p, spec)...)

	ids := map[string]bool{}
	for i, t := range spec.GetTaints() {
		ip := p.Child("taints").Index(i)
		if t.GetKey() == "" {
			errs = append(errs, field.Required(ip.Child("key"), "cannot be empty"))
		}
		id := keyWithOptionalValue(t.GetKey(), t.Value)
		if ids[id] {
			errs = append(errs, field.Duplicate(ip, id))
		}
		ids[id] = true
	}

	if v := spec.GetVolume(); v != nil {
		vp := p.Child("volume")
		if v.MinimumSize != nil {
			errs = append(errs, quantity(vp.Child("minimumSize"), v.GetMinimumSize())...)
		}
		purposes := map[string]bool{}
		for i, pr := range v.GetProviders() {
			ip := vp.Child("providers").Index(i)
			if pr.GetPurpose() == "" {
				errs = append(errs, field.Required(ip.Child("purpose"), "cannot be empty"))
			}
			if pr.GetName() == "" {
				errs = append(errs, field.Required(ip.Child("name"), "cannot be empty"))
			}
			if purposes[pr.GetPurpose()] {
				errs = append(errs, field.Duplicate(ip.Child("purpose"), pr.GetPurpose()))
			}
			purposes[pr.GetPurpose()] = true
		}
	}

	errs = append(errs, validateSeedSettings(p.Child("settings"), spec.GetSettings(), spec.GetProvider().GetZones())...)
	errs = append(errs, validateExtensions(p.Child("extensions"), spec.GetExtensions(), true)...)
	errs = append(errs, validateNamedResources(p.Child("resources"), spec.GetResources())...)
	names := map[string]bool{}
	for i, ar := range spec.GetAccessRestrictions() {
		np := p.Child("accessRestrictions").Index(i).Child("name")
		if ar.GetName() == "" {
			errs = append(errs, field.Required(np, "must provide a name"))
		} else if names[ar.GetName()] {
			errs = append(errs, field.Duplicate(np, ar.GetName()))
		}
		names[ar.GetName()] = true
	}
	return errs
}

func validateSeedNetworks(p *field.Path, n *corev1beta1.SeedNetworks, inTemplate bool) field.ErrorList {
	if n == nil {
		n = &corev1beta1.SeedNetworks{}
	}
	var errs field.ErrorList
	fams := map[string]bool{}
	for i, f := range n.GetIpFamilies() {
		if !contains(ipFamilies, f) {
			errs = append(errs, field.NotSupported(p.Child("ipFamilies").Index(i), f, ipFamilies))
		}
		if fams[f] {
			errs = append(errs, field.Duplicate(p.Child("ipFamilies").Index(i), f))
		}
		fams[f] = true
	}
	if len(errs) > 0 {
		return errs // the CIDRs cannot be checked against unknown IP families
	}

	type named struct {
		path *field.Path
		net  *net.IPNet
	}
	var nets []named
	add := func(fp *field.Path, v string) {
		n, e := cidr(fp, v)
		errs = append(errs, e...)
		if n != nil {
			nets = append(nets, named{fp, n})
		}
	}
	if !inTemplate || n.GetPods() != "" {
		add(p.Child("pods"), n.GetPods())
	}
	if !inTemplate || n.GetServices() != "" {
		add(p.Child("services"), n.GetServices())
		if _, svc, err := net.ParseCIDR(n.GetServices()); err == nil && svc.IP.To4() != nil {
			if ones, _ := svc.Mask.Size(); ones < 8 {
				errs = append(errs, field.Invalid(p.Child("services"), n.GetServices(), "cannot be larger than /8"))
			}
		}
	}
	if n.Nodes != nil {
		add(p.Child("nodes"), n.GetNodes())
	}
	if sd := n.GetShootDefaults(); sd != nil {
		if sd.Pods != nil {
			add(p.Child("shootDefaults", "pods"), sd.GetPods())
		}
		if sd.Services != nil {
			add(p.Child("shootDefaults", "services"), sd.GetServices())
		}
	}
	for i, b := range n.GetBlockCidrs() {
		_, e := cidr(p.Child("blockCIDRs").Index(i), b)
		errs = append(errs, e...)
	}

	// Single-stack: every network is of the (primary) IP family.
	if fs := n.GetIpFamilies(); len(fs) < 2 {
		primary := "IPv4"
		if len(fs) == 1 {
			primary = fs[0]
		}
		for _, x := range nets {
			if (x.net.IP.To4() != nil) != (primary == "IPv4") {
				errs = append(errs, field.Invalid(x.path, x.net.String(), fmt.Sprintf("must be an %s CIDR", primary)))
			}
		}
	}
	for i := range nets {
		for j := 0; j < i; j++ {
			if overlaps(nets[i].net, nets[j].net) {
				errs = append(errs, field.Invalid(nets[i].path, nets[i].net.String(),
					fmt.Sprintf("must not overlap with %s (%s)", nets[j].path, nets[j].net)))
			}
		}
		for _, reserved := range []*net.IPNet{reservedKubeAPIServerRange, defaultVPNRangeV6} {
			if overlaps(nets[i].net, reserved) {
				errs = append(errs, field.Invalid(nets[i].path, nets[i].net.String(),
					fmt.Sprintf("must not overlap with %s, which Gardener reserves", reserved)))
			}
		}
	}
	return errs
}

func validateSeedBackup(p *field.Path, b *corev1beta1.Backup, seedProviderType string) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	if b.GetProvider() == "" {
		errs = append(errs, field.Required(p.Child("provider"), "must provide a backup cloud provider name"))
	}
	if b.GetProvider() != seedProviderType && b.GetRegion() == "" {
		errs = append(errs, field.Required(p.Child("region"), "must be specified if the backup provider differs from spec.provider.type"))
	}
	return append(errs, credentialsRef(p.Child("credentialsRef"), b.GetCredentialsRef(), gvkSecret, gvkWorkloadIdentity)...)
}

// validateSeedDNS checks spec.dns (the DNS provider of the seed's ingress domain, the internal domain and the
// default domains) and spec.ingress, which needs a DNS provider.
func validateSeedDNS(p *field.Path, spec *corev1beta1.SeedSpec) field.ErrorList {
	var errs field.ErrorList
	dns := p.Child("dns")
	if pr := spec.GetDns().GetProvider(); pr != nil {
		if pr.GetType() == "" {
			errs = append(errs, field.Required(dns.Child("provider", "type"), "DNS provider type must be set"))
		}
		errs = append(errs, credentialsRef(dns.Child("provider", "credentialsRef"), pr.GetCredentialsRef(), gvkSecret, gvkWorkloadIdentity)...)
	}
	if in := spec.GetDns().GetInternal(); in != nil {
		errs = append(errs, validateSeedDNSProviderConfig(dns.Child("internal"), in)...)
	}
	domains := map[string]bool{}
	for i, d := range spec.GetDns().GetDefaults() {
		dp := dns.Child("defaults").Index(i)
		errs = append(errs, validateSeedDNSProviderConfig(dp, d)...)
		if d.GetDomain() != "" && domains[d.GetDomain()] {
			errs = append(errs, field.Duplicate(dp.Child("domain"), d.GetDomain()))
		}
		domains[d.GetDomain()] = true
	}

	// Gardener requires spec.ingress on Seeds; the hub accepts seeds without one (they get no ingress domain).
	if in := spec.GetIngress(); in != nil {
		ip := p.Child("ingress")
		if in.GetDomain() == "" {
			errs = append(errs, field.Required(ip.Child("domain"), "cannot be empty"))
		} else {
			errs = append(errs, dnsSubdomain(ip.Child("domain"), in.GetDomain())...)
		}
		if k := in.GetController().GetKind(); !contains(seedIngressKinds, k) {
			errs = append(errs, field.NotSupported(ip.Child("controller", "kind"), k, seedIngressKinds))
		}
		if spec.GetDns().GetProvider() == nil {
			errs = append(errs, field.Required(dns.Child("provider"), "ingress controller requires dns.provider to be set"))
		}
	}
	return errs
}

func validateSeedDNSProviderConfig(p *field.Path, c *corev1beta1.SeedDNSProviderConfig) field.ErrorList {
	var errs field.ErrorList
	if c.GetType() == "" {
		errs = append(errs, field.Required(p.Child("type"), "DNS provider type must be set"))
	}
	if c.GetDomain() == "" {
		errs = append(errs, field.Required(p.Child("domain"), "must provide a domain"))
	} else {
		errs = append(errs, dnsSubdomain(p.Child("domain"), c.GetDomain())...)
	}
	return append(errs, credentialsRef(p.Child("credentialsRef"), c.GetCredentialsRef(), gvkSecret, gvkWorkloadIdentity)...)
}

func validateSeedSettings(p *field.Path, st *corev1beta1.SeedSettings, zones []string) field.ErrorList {
	if st == nil {
		return nil
	}
	var errs field.ErrorList
	for i, c := range st.GetExcessCapacityReservation().GetConfigs() {
		cp := p.Child("excessCapacityReservation", "configs").Index(i)
		if len(c.GetResources()) == 0 {
			errs = append(errs, field.Required(cp.Child("resources"), "cannot be empty"))
		}
		for k, v := range c.GetResources() {
			errs = append(errs, quantity(cp.Child("resources").Key(k), v)...)
		}
		errs = append(errs, podTolerations(cp.Child("tolerations"), c.GetTolerations())...)
	}
	if lb := st.GetLoadBalancerServices(); lb != nil {
		lp := p.Child("loadBalancerServices")
		errs = append(errs, apivalidation.ValidateAnnotations(lb.GetAnnotations(), lp.Child("annotations"))...)
		if pol := lb.ExternalTrafficPolicy; pol != nil && !contains(seedExternalTrafficPolicy, *pol) {
			errs = append(errs, field.NotSupported(lp.Child("externalTrafficPolicy"), *pol, seedExternalTrafficPolicy))
		}
		if len(zones) <= 1 && len(lb.GetZones()) > 0 {
			errs = append(errs, field.Forbidden(lp.Child("zones"), "zone-specific load balancer settings only allowed with at least two zones in spec.provider.zones"))
		}
		seen := map[string]bool{}
		for i, z := range lb.GetZones() {
			zp := lp.Child("zones").Index(i)
			if !contains(zones, z.GetName()) {
				errs = append(errs, field.NotFound(zp.Child("name"), z.GetName()))
			}
			if seen[z.GetName()] {
				errs = append(errs, field.Duplicate(zp.Child("name"), z.GetName()))
			}
			seen[z.GetName()] = true
			errs = append(errs, apivalidation.ValidateAnnotations(z.GetAnnotations(), zp.Child("annotations"))...)
			if pol := z.ExternalTrafficPolicy; pol != nil && !contains(seedExternalTrafficPolicy, *pol) {
				errs = append(errs, field.NotSupported(zp.Child("externalTrafficPolicy"), *pol, seedExternalTrafficPolicy))
			}
		}
	}
	for k, v := range st.GetVerticalPodAutoscaler().GetMaxAllowed() {
		errs = append(errs, quantity(p.Child("verticalPodAutoscaler", "maxAllowed").Key(k), v)...)
	}
	// Gardener forbids topology-aware routing on seeds with fewer than two zones; Gardener's own example seed enables
	// it with one zone, so the hub accepts it.
	return errs
}

// podTolerations validates Kubernetes pod tolerations (operator, effect, key and value combinations).
func podTolerations(p *field.Path, ts []*corev1beta1.PodToleration) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		ip := p.Index(i)
		if t.GetKey() != "" {
			for _, msg := range validation.IsQualifiedName(t.GetKey()) {
				errs = append(errs, field.Invalid(ip.Child("key"), t.GetKey(), msg))
			}
		}
		switch t.GetOperator() {
		case "", "Equal":
			if t.GetKey() == "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.GetOperator(), "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
			}
			for _, msg := range validation.IsValidLabelValue(t.GetValue()) {
				errs = append(errs, field.Invalid(ip.Child("value"), t.GetValue(), msg))
			}
		case "Exists":
			if t.GetValue() != "" {
				errs = append(errs, field.Invalid(ip.Child("value"), t.GetValue(), "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.GetOperator(), tolerationOperators))
		}
		if e := t.GetEffect(); e != "" && !contains(taintEffects, e) {
			errs = append(errs, field.NotSupported(ip.Child("effect"), e, taintEffects))
		}
		if t.TolerationSeconds != nil && t.GetEffect() != "NoExecute" {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.GetEffect(), "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
	}
	return errs
}

// validateExtensions checks extensions[].type (required, unique); seeds may not disable extensions.
func validateExtensions(p *field.Path, exts []*corev1beta1.Extension, forSeed bool) field.ErrorList {
	var errs field.ErrorList
	types := map[string]bool{}
	for i, e := range exts {
		tp := p.Index(i).Child("type")
		switch {
		case e.GetType() == "":
			errs = append(errs, field.Required(tp, "field must not be empty"))
		case types[e.GetType()]:
			errs = append(errs, field.Duplicate(tp, e.GetType()))
		}
		types[e.GetType()] = true
		if forSeed && e.Disabled != nil {
			errs = append(errs, field.Forbidden(p.Index(i).Child("disabled"), "must not be set"))
		}
	}
	return errs
}

// validateNamedResources checks resources[]: unique names and complete references.
func validateNamedResources(p *field.Path, rs []*corev1beta1.NamedResourceReference) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, r := range rs {
		ip := p.Index(i)
		switch {
		case r.GetName() == "":
			errs = append(errs, field.Required(ip.Child("name"), "field must not be empty"))
		case names[r.GetName()]:
			errs = append(errs, field.Duplicate(ip.Child("name"), r.GetName()))
		}
		names[r.GetName()] = true
		ref := r.GetResourceRef()
		rp := ip.Child("resourceRef")
		if ref.GetApiVersion() == "" {
			errs = append(errs, field.Required(rp.Child("apiVersion"), "must provide an apiVersion"))
		}
		if ref.GetKind() == "" {
			errs = append(errs, field.Required(rp.Child("kind"), "must provide a kind"))
		}
		if ref.GetName() == "" {
			errs = append(errs, field.Required(rp.Child("name"), "must provide a name"))
		}
	}
	return errs
}

func validateSeedSpecUpdate(p *field.Path, spec, old *corev1beta1.SeedSpec) field.ErrorList {
	var errs field.ErrorList
	np := p.Child("networks")
	errs = append(errs, immutableList(np.Child("ipFamilies"), spec.GetNetworks().GetIpFamilies(), old.GetNetworks().GetIpFamilies())...)
	errs = append(errs, immutable(np.Child("pods"), spec.GetNetworks().GetPods(), old.GetNetworks().GetPods())...)
	errs = append(errs, immutable(np.Child("services"), spec.GetNetworks().GetServices(), old.GetNetworks().GetServices())...)
	if old.GetNetworks().GetNodes() != "" {
		errs = append(errs, immutable(np.Child("nodes"), spec.GetNetworks().GetNodes(), old.GetNetworks().GetNodes())...)
	}
	if old.GetIngress() != nil && spec.GetIngress() != nil {
		errs = append(errs, immutable(p.Child("ingress", "domain"), spec.GetIngress().GetDomain(), old.GetIngress().GetDomain())...)
	}
	if ob := old.GetBackup(); ob != nil {
		if nb := spec.GetBackup(); nb != nil {
			errs = append(errs, immutable(p.Child("backup", "provider"), nb.GetProvider(), ob.GetProvider())...)
			errs = append(errs, immutable(p.Child("backup", "region"), nb.GetRegion(), ob.GetRegion())...)
		} else {
			errs = append(errs, field.Forbidden(p.Child("backup"), "backup cannot be removed once configured"))
		}
	}
	return errs
}
