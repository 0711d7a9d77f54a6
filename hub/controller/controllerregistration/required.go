package controllerregistration

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Extension kinds, as Gardener names them (extensionsv1alpha1.*Resource).
const (
	KindBackupBucket          = "BackupBucket"
	KindBackupEntry           = "BackupEntry"
	KindContainerRuntime      = "ContainerRuntime"
	KindControlPlane          = "ControlPlane"
	KindDNSRecord             = "DNSRecord"
	KindExtension             = "Extension"
	KindInfrastructure        = "Infrastructure"
	KindNetwork               = "Network"
	KindOperatingSystemConfig = "OperatingSystemConfig"
	KindWorker                = "Worker"
)

// dnsUnmanaged is the DNS provider type that needs no extension.
const dnsUnmanaged = "unmanaged"

// Cluster types of autoEnable and clusterCompatibility.
const (
	clusterTypeShoot = "shoot"
	clusterTypeSeed  = "seed"
)

// ID is Gardener's identifier of an extension kind/type combination, "Kind/type" (gardenerutils.ExtensionsID).
func ID(kind, typ string) string { return kind + "/" + typ }

// ForShoot returns the kind/type combinations a shoot on seed needs, with Gardener's rules
// (gardenerutils.ComputeRequiredExtensionsForShoot):
//   - BackupBucket and BackupEntry of the seed's backup provider, when the seed has backup;
//   - ControlPlane of the seed's provider (its webhooks expose shoot control planes in the seed);
//   - unless the shoot is workerless: ControlPlane, Infrastructure and Worker of the shoot's provider, and Network of
//     its networking type;
//   - Extension of every type the shoot lists and does not disable, and of every type registered with
//     autoEnable "shoot" that the shoot does not disable (for workerless shoots only those with workerlessSupported);
//   - OperatingSystemConfig of every pool's machine image, ContainerRuntime of every pool's additional runtimes;
//   - DNSRecord of every primary DNS provider of the shoot, of the seed's internal domain (spec.dns.internal) and of
//     the shoot's external domain, unless its provider is "unmanaged".
//
// Where Gardener reads the internal and default domains from garden secrets, Trellis reads them from the seed
// (spec.dns.internal, spec.dns.defaults), as the agent's shoot flow does when it writes the DNS records.
func ForShoot(shoot *corev1beta1.Shoot, seed *corev1beta1.Seed, registrations []*corev1beta1.ControllerRegistration) sets.Set[string] {
	out := sets.New[string]()
	spec := shoot.GetSpec()
	if b := seed.GetSpec().GetBackup(); b != nil && b.GetProvider() != "" {
		out.Insert(ID(KindBackupBucket, b.GetProvider()), ID(KindBackupEntry, b.GetProvider()))
	}
	if t := seed.GetSpec().GetProvider().GetType(); t != "" {
		out.Insert(ID(KindControlPlane, t))
	}
	workerless := len(spec.GetProvider().GetWorkers()) == 0
	if !workerless {
		t := spec.GetProvider().GetType()
		out.Insert(ID(KindControlPlane, t), ID(KindInfrastructure, t), ID(KindWorker, t))
		if n := spec.GetNetworking().GetType(); n != "" {
			out.Insert(ID(KindNetwork, n))
		}
	}
	for t := range enabledExtensionTypes(clusterTypeShoot, spec.GetExtensions(), registrations, func(r *corev1beta1.ControllerResource) bool {
		return !workerless || r.GetWorkerlessSupported()
	}) {
		out.Insert(ID(KindExtension, t))
	}
	for _, w := range spec.GetProvider().GetWorkers() {
		if img := w.GetMachine().GetImage().GetName(); img != "" {
			out.Insert(ID(KindOperatingSystemConfig, img))
		}
		for _, cr := range w.GetCri().GetContainerRuntimes() {
			if cr.GetType() != "" {
				out.Insert(ID(KindContainerRuntime, cr.GetType()))
			}
		}
	}
	for _, p := range spec.GetDns().GetProviders() {
		if p.GetPrimary() && p.GetType() != "" && p.GetType() != dnsUnmanaged {
			out.Insert(ID(KindDNSRecord, p.GetType()))
		}
	}
	if t := internalDNSType(seed); t != "" && t != dnsUnmanaged {
		out.Insert(ID(KindDNSRecord, t))
	}
	if t := externalDNSType(shoot, seed); t != "" && t != dnsUnmanaged {
		out.Insert(ID(KindDNSRecord, t))
	}
	return out
}

// internalDNSType is the provider type of the seed's internal domain ("" without one).
func internalDNSType(seed *corev1beta1.Seed) string {
	in := seed.GetSpec().GetDns().GetInternal()
	if in.GetDomain() == "" {
		return ""
	}
	if in.GetType() != "" {
		return in.GetType()
	}
	return seed.GetSpec().GetProvider().GetType()
}

// externalDNSType is the provider type of the shoot's external domain ("" without a domain): its primary DNS
// provider's, else that of the seed's default domain the shoot's domain lies in, else the internal domain's
// (gardenerutils.ConstructExternalDomain with Trellis' seed-held domains).
func externalDNSType(shoot *corev1beta1.Shoot, seed *corev1beta1.Seed) string {
	dns := shoot.GetSpec().GetDns()
	if dns.GetDomain() == "" {
		return ""
	}
	for _, p := range dns.GetProviders() {
		if p.GetPrimary() && p.GetType() != "" {
			return p.GetType()
		}
	}
	for _, d := range seed.GetSpec().GetDns().GetDefaults() {
		if d.GetDomain() != "" && (dns.GetDomain() == d.GetDomain() || strings.HasSuffix(dns.GetDomain(), "."+d.GetDomain())) {
			return d.GetType()
		}
	}
	return internalDNSType(seed)
}

// ForSeed returns the kind/type combinations a seed needs for itself (gardenerutils.ComputeRequiredExtensionsForSeed):
// DNSRecord of its DNS provider, Extension of the types it lists and does not disable and of those registered with
// autoEnable "seed", and ControlPlane, Infrastructure and Worker of its provider. A seed being deleted needs nothing
// for itself, so that its installations can go.
func ForSeed(seed *corev1beta1.Seed, registrations []*corev1beta1.ControllerRegistration) sets.Set[string] {
	out := sets.New[string]()
	if seed.GetMetadata().GetDeletionTimestamp() != nil {
		return out
	}
	if p := seed.GetSpec().GetDns().GetProvider(); p.GetType() != "" {
		out.Insert(ID(KindDNSRecord, p.GetType()))
	}
	for t := range enabledExtensionTypes(clusterTypeSeed, seed.GetSpec().GetExtensions(), registrations, nil) {
		out.Insert(ID(KindExtension, t))
	}
	if t := seed.GetSpec().GetProvider().GetType(); t != "" {
		out.Insert(ID(KindControlPlane, t), ID(KindInfrastructure, t), ID(KindWorker, t))
	}
	return out
}

// ForBackupBuckets returns BackupBucket of the provider type of every bucket placed on the seed.
func ForBackupBuckets(seedName string, buckets []*corev1beta1.BackupBucket) sets.Set[string] {
	out := sets.New[string]()
	for _, b := range buckets {
		if b.GetSpec().GetSeedName() == seedName && b.GetSpec().GetProvider().GetType() != "" {
			out.Insert(ID(KindBackupBucket, b.GetSpec().GetProvider().GetType()))
		}
	}
	return out
}

// ForBackupEntries returns BackupEntry of the provider type of every entry's bucket; entries whose bucket is unknown
// are returned as missing (Gardener logs and skips them).
func ForBackupEntries(entries []*corev1beta1.BackupEntry, buckets map[string]*corev1beta1.BackupBucket) (out sets.Set[string], missing []string) {
	out = sets.New[string]()
	for _, e := range entries {
		b, ok := buckets[e.GetSpec().GetBucketName()]
		if !ok {
			missing = append(missing, e.GetMetadata().GetNamespace()+"/"+e.GetMetadata().GetName())
			continue
		}
		if t := b.GetSpec().GetProvider().GetType(); t != "" {
			out.Insert(ID(KindBackupEntry, t))
		}
	}
	return out, missing
}

// enabledExtensionTypes are the Extension types enabled for a cluster of clusterType: those it lists without
// disabling them, and those registered with autoEnable clusterType (and passing filter) that it does not disable
// (Gardener's computeEnabledTypesForKindExtension).
func enabledExtensionTypes(clusterType string, listed []*corev1beta1.Extension, registrations []*corev1beta1.ControllerRegistration, filter func(*corev1beta1.ControllerResource) bool) sets.Set[string] {
	enabled, disabled := sets.New[string](), sets.New[string]()
	for _, e := range listed {
		if e.GetDisabled() {
			disabled.Insert(e.GetType())
		} else if e.GetType() != "" {
			enabled.Insert(e.GetType())
		}
	}
	for _, cr := range registrations {
		for _, r := range cr.GetSpec().GetResources() {
			if r.GetKind() != KindExtension || disabled.Has(r.GetType()) || !slices.Contains(r.GetAutoEnable(), clusterType) {
				continue
			}
			if filter != nil && !filter(r) {
				continue
			}
			enabled.Insert(r.GetType())
		}
	}
	return enabled
}
