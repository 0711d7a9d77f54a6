package seedgraph

import (
	"strings"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	coordinationv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/objectnames"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Well-known names of Gardener's.
const (
	// LeaseNamespace holds the seeds' heartbeat Leases, one per seed, named after it.
	LeaseNamespace = "gardener-system-seed-lease"
	// SeedNamespacePrefix prefixes the garden namespace of each seed ("seed-<name>").
	SeedNamespacePrefix = "seed-"
	projectNameLabel    = "project.gardener.cloud/name"
	// gardenNamespace holds the Gardenlets (and ManagedSeeds), named as their seeds.
	gardenNamespace = "garden"
)

// edges returns the seeds an object belongs to by its own fields, the objects it references (they belong to every
// seed it belongs to) and the objects it inherits from (it belongs to every seed they belong to).
func edges(obj store.Object) (direct []string, out, in []Ref) {
	md := obj.GetMetadata()
	ns, name := md.GetNamespace(), md.GetName()
	add := func(seeds ...string) {
		for _, s := range seeds {
			if s != "" && !contains(direct, s) {
				direct = append(direct, s)
			}
		}
	}
	ref := func(resource, namespace, name string) {
		if name == "" {
			return
		}
		r := Ref{Resource: resource, Namespace: namespace, Name: name}
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	// credentials references a Secret or WorkloadIdentity (defaultNS when the reference has no namespace).
	credentials := func(kind, namespace, name, defaultNS string) {
		if namespace == "" {
			namespace = defaultNS
		}
		switch kind {
		case "", "Secret":
			ref(resources.Secrets, namespace, name)
		case "WorkloadIdentity":
			ref(resources.WorkloadIdentities, namespace, name)
		}
	}
	objectRef := func(r *metav1.ObjectReference, defaultNS string) {
		if r != nil {
			credentials(r.GetKind(), r.GetNamespace(), r.GetName(), defaultNS)
		}
	}
	namedResource := func(r *corev1beta1.NamedResourceReference, namespace string) {
		rr := r.GetResourceRef()
		switch rr.GetKind() {
		case "Secret":
			ref(resources.Secrets, namespace, rr.GetName())
		case "ConfigMap":
			ref(resources.ConfigMaps, namespace, rr.GetName())
		case "WorkloadIdentity":
			ref(resources.WorkloadIdentities, namespace, rr.GetName())
		}
	}

	switch o := obj.(type) {
	case *corev1beta1.Seed:
		add(name)
		spec := o.GetSpec()
		objectRef(spec.GetBackup().GetCredentialsRef(), "garden")
		objectRef(spec.GetDns().GetProvider().GetCredentialsRef(), "garden")
		objectRef(spec.GetDns().GetInternal().GetCredentialsRef(), "garden")
		for _, d := range spec.GetDns().GetDefaults() {
			objectRef(d.GetCredentialsRef(), "garden")
		}
		for _, r := range spec.GetResources() {
			namedResource(r, "garden")
		}
		ref(resources.Namespaces, "", SeedNamespacePrefix+name)
	case *corev1beta1.Shoot:
		spec := o.GetSpec()
		add(spec.GetSeedName(), o.GetStatus().GetSeedName())
		ref(resources.SecretBindings, ns, spec.GetSecretBindingName())
		ref(resources.CredentialsBindings, ns, spec.GetCredentialsBindingName())
		if cp := spec.GetCloudProfile(); cp.GetName() != "" {
			if cp.GetKind() == "NamespacedCloudProfile" {
				ref(resources.NamespacedCloudProfiles, ns, cp.GetName())
			} else {
				ref(resources.CloudProfiles, "", cp.GetName())
			}
		} else {
			ref(resources.CloudProfiles, "", spec.GetCloudProfileName())
		}
		ref(resources.ExposureClasses, "", spec.GetExposureClassName())
		for _, p := range spec.GetDns().GetProviders() {
			ref(resources.Secrets, ns, p.GetSecretName())
			if c := p.GetCredentialsRef(); c != nil {
				credentials(c.GetKind(), "", c.GetName(), ns)
			}
		}
		for _, r := range spec.GetResources() {
			namedResource(r, ns)
		}
		if cm := spec.GetKubernetes().GetKubeApiServer().GetAuditConfig().GetAuditPolicy().GetConfigMapRef(); cm != nil {
			ref(resources.ConfigMaps, ns, cm.GetName())
		}
		ref(resources.ShootStates, ns, name)
		ref(resources.Namespaces, "", ns)
		// The shoot's BackupEntry, by Gardener's name for it (<technical ID>--<shoot UID>; the entry also names the
		// shoot as its owner once it exists): its seeds' agents may read it before they create it.
		if id := o.GetStatus().GetTechnicalId(); id != "" && md.GetUid() != "" {
			ref(resources.BackupEntries, ns, objectnames.BackupEntryName(id, md.GetUid()))
		}
	case *corev1beta1.BackupBucket:
		add(o.GetSpec().GetSeedName())
		objectRef(o.GetSpec().GetCredentialsRef(), "")
		if g := o.GetStatus().GetGeneratedSecretRef(); g != nil {
			ref(resources.Secrets, g.GetNamespace(), g.GetName())
		}
	case *corev1beta1.BackupEntry:
		add(o.GetSpec().GetSeedName(), o.GetStatus().GetSeedName())
		ref(resources.BackupBuckets, "", o.GetSpec().GetBucketName())
		// As in Gardener's graph, an entry also belongs to the seeds of the shoot owning it: the destination seed of
		// a control-plane migration takes over the entry the source seed wrote.
		if n := OwnerShoot(md); n != "" {
			in = append(in, Ref{Resource: resources.Shoots, Namespace: ns, Name: n})
		}
	case *operationsv1alpha1.Bastion:
		add(o.GetSpec().GetSeedName())
	case *corev1beta1.ControllerInstallation:
		add(o.GetSpec().GetSeedRef().GetName())
		ref(resources.ControllerRegistrations, "", o.GetSpec().GetRegistrationRef().GetName())
		ref(resources.ControllerDeployments, "", o.GetSpec().GetDeploymentRef().GetName())
	case *seedmanagementv1alpha1.ManagedSeed:
		// A ManagedSeed belongs to the seed it registers and to the seed hosting its shoot.
		add(name)
		if n := o.GetSpec().GetShoot().GetName(); n != "" {
			in = append(in, Ref{Resource: resources.Shoots, Namespace: ns, Name: n})
		}
	case *seedmanagementv1alpha1.Gardenlet:
		// A Gardenlet in the garden namespace belongs to the seed of its name: the agent of that seed deploys itself
		// from it (Gardener's gardenlet controller watches its own Gardenlet only).
		if ns == gardenNamespace {
			add(name)
		}
	case *corev1beta1.SecretBinding:
		if r := o.GetSecretRef(); r != nil {
			credentials("Secret", r.GetNamespace(), r.GetName(), ns)
		}
	case *securityv1alpha1.CredentialsBinding:
		if r := o.GetCredentialsRef(); r != nil {
			credentials(r.GetKind(), r.GetNamespace(), r.GetName(), ns)
		}
	case *corev1beta1.NamespacedCloudProfile:
		if p := o.GetSpec().GetParent(); p.GetKind() == "" || p.GetKind() == "CloudProfile" {
			ref(resources.CloudProfiles, "", p.GetName())
		}
	case *kcorev1.Namespace:
		if s, ok := strings.CutPrefix(name, SeedNamespacePrefix); ok {
			add(s)
		}
		ref(resources.Projects, "", md.GetLabels()[projectNameLabel])
	case *kcorev1.Secret:
		if s, ok := strings.CutPrefix(ns, SeedNamespacePrefix); ok {
			add(s)
		}
	case *coordinationv1.Lease:
		if ns == LeaseNamespace {
			add(name)
		}
	case *certificatesv1.CertificateSigningRequest:
		if s, ok := auth.SeedOfUserName(o.GetSpec().GetUsername()); ok {
			add(s)
		}
	case *corev1.ControllerDeployment:
		// The registry credentials and CA bundle of an OCI chart, in the garden namespace: the agents that install
		// the chart pull it.
		oci := o.GetHelm().GetOciRepository()
		ref(resources.Secrets, "garden", oci.GetPullSecretRef().GetName())
		ref(resources.Secrets, "garden", oci.GetCaBundleSecretRef().GetName())
	case *corev1beta1.CloudProfile, *corev1beta1.ExposureClass, *corev1beta1.Project,
		*corev1beta1.ShootState, *corev1beta1.ControllerRegistration, *kcorev1.ConfigMap, *securityv1alpha1.WorkloadIdentity:
		// Members only through references.
	}
	return direct, out, in
}

// OwnerShoot returns the name of the Shoot (core.gardener.cloud) among an object's owner references, "" if none:
// a BackupEntry's shoot, as Gardener's GetShootNameFromOwnerReferences finds it.
func OwnerShoot(md *metav1.ObjectMeta) string {
	for _, r := range md.GetOwnerReferences() {
		if group, _, _ := strings.Cut(r.GetApiVersion(), "/"); group == "core.gardener.cloud" && r.GetKind() == "Shoot" {
			return r.GetName()
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
