package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

func defaultShoot(s *corev1beta1.Shoot) {
	if s.Spec == nil {
		s.Spec = &corev1beta1.ShootSpec{}
	}
	spec := s.Spec
	if spec.Purpose == nil {
		p := "evaluation"
		spec.Purpose = &p
	}
	// spec.cloudProfileName is deprecated in favour of spec.cloudProfile; Gardener keeps both in sync.
	if spec.CloudProfile == nil && spec.GetCloudProfileName() != "" {
		spec.CloudProfile = &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: spec.GetCloudProfileName()}
	}
	if spec.CloudProfile != nil && spec.CloudProfile.Kind == "" {
		spec.CloudProfile.Kind = "CloudProfile"
	}
	defaultShootMaintenanceAndHibernation(s)
}

var seeds = schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"}

// validateShoot checks a Shoot's own fields, its scheduling (validateSeedName) and its references: the namespace
// belongs to a Project, the cloud profile exists and offers the shoot's region, Kubernetes version and machine types,
// and the credentials binding exists. References are checked on create and when the spec changes, not on writes of
// metadata alone: an agent adding or removing its finalizer is not held up by a binding deleted meanwhile.
func validateShoot(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s.GetSpec().GetProvider().GetType() == "" {
		errs = append(errs, field.Required(spec.Child("provider", "type"), "the provider type is required"))
	}
	if s.GetSpec().GetRegion() == "" {
		errs = append(errs, field.Required(spec.Child("region"), "the region is required"))
	}
	// An empty version is defaulted from the cloud profile below.
	if v := s.GetSpec().GetKubernetes().GetVersion(); v != "" {
		if _, err := version.ParseGeneric(v); err != nil {
			errs = append(errs, field.Invalid(spec.Child("kubernetes", "version"), s.Spec.Kubernetes.Version, err.Error()))
		}
	}
	names := map[string]bool{}
	for i, w := range s.GetSpec().GetProvider().GetWorkers() {
		p := spec.Child("provider", "workers").Index(i)
		if w.GetName() == "" {
			errs = append(errs, field.Required(p.Child("name"), "a worker pool needs a name"))
		} else if names[w.GetName()] {
			errs = append(errs, field.Duplicate(p.Child("name"), w.GetName()))
		}
		names[w.GetName()] = true
		if w.GetMachine().GetType() == "" {
			errs = append(errs, field.Required(p.Child("machine", "type"), "the machine type is required"))
		}
		if w.Minimum != nil && w.Maximum != nil && w.GetMinimum() > w.GetMaximum() {
			errs = append(errs, field.Invalid(p.Child("minimum"), w.GetMinimum(), "must not be greater than maximum"))
		}
	}
	// Like the references below, the spec rules apply on create and when the spec changes: a shoot stored before a
	// rule existed still takes the agents' metadata writes (finalizers), e.g. while it is being deleted.
	// Compared once: the spec of a Shoot is most of it.
	specUnchanged := old != nil && shootSpecEqual(ctx, s, old)
	if !specUnchanged {
		errs = append(errs, validateShootSpecRules(s)...)
	}
	errs = append(errs, validateShootOperation(s, old)...)
	if old != nil {
		errs = append(errs, validateShootUpdate(s, old)...)
		errs = append(errs, validateShootSpecRulesUpdate(s, old)...)
	}
	errs = append(errs, validateSeedName(ctx, r, s, old)...)
	if len(errs) > 0 {
		return errs
	}
	if specUnchanged {
		return nil
	}
	return append(errs, admitShoot(ctx, r, s, old)...)
}

func validateShootUpdate(s, old *corev1beta1.Shoot) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if old.GetMetadata().GetDeletionTimestamp() != nil && !proto.Equal(s.GetSpec(), old.GetSpec()) {
		return field.ErrorList{field.Forbidden(spec, "the shoot is being deleted: its spec cannot change")}
	}
	if migrating(old) && !proto.Equal(withSeedName(s.GetSpec(), ""), withSeedName(old.GetSpec(), "")) {
		return field.ErrorList{field.Forbidden(spec, fmt.Sprintf("the shoot is being migrated from seed %q to seed %q (last operation %s %s): its spec cannot change until the restore succeeded",
			old.GetStatus().GetSeedName(), old.GetSpec().GetSeedName(), old.GetStatus().GetLastOperation().GetType(), old.GetStatus().GetLastOperation().GetState()))}
	}
	// The secret binding may give way to a credentials binding (Gardener's migration between the two); a credentials
	// binding may be replaced but not removed.
	if ob, nb := old.GetSpec().GetSecretBindingName(), s.GetSpec().GetSecretBindingName(); nb != ob && (ob == "" || nb != "" || s.GetSpec().GetCredentialsBindingName() == "") {
		errs = append(errs, field.Invalid(spec.Child("secretBindingName"), nb, "field is immutable (it may only be replaced by spec.credentialsBindingName)"))
	}
	if old.GetSpec().GetCredentialsBindingName() != "" && s.GetSpec().GetCredentialsBindingName() == "" {
		errs = append(errs, field.Forbidden(spec.Child("credentialsBindingName"), "the field cannot be unset"))
	}
	if s.GetSpec().GetExposureClassName() != old.GetSpec().GetExposureClassName() {
		errs = append(errs, field.Invalid(spec.Child("exposureClassName"), s.GetSpec().GetExposureClassName(), "field is immutable"))
	}
	if s.GetSpec().GetRegion() != old.GetSpec().GetRegion() {
		errs = append(errs, field.Invalid(spec.Child("region"), s.GetSpec().GetRegion(), "field is immutable"))
	}
	if s.GetSpec().GetProvider().GetType() != old.GetSpec().GetProvider().GetType() {
		errs = append(errs, field.Invalid(spec.Child("provider", "type"), s.GetSpec().GetProvider().GetType(), "field is immutable"))
	}
	if nt, ot := s.GetSpec().GetNetworking().GetType(), old.GetSpec().GetNetworking().GetType(); ot != "" && nt != ot {
		errs = append(errs, field.Invalid(spec.Child("networking", "type"), nt, "field is immutable"))
	}
	nv, err1 := version.ParseGeneric(s.GetSpec().GetKubernetes().GetVersion())
	ov, err2 := version.ParseGeneric(old.GetSpec().GetKubernetes().GetVersion())
	if err1 == nil && err2 == nil && nv.LessThan(ov) {
		errs = append(errs, field.Forbidden(spec.Child("kubernetes", "version"), "kubernetes version downgrade is not supported"))
	}
	return errs
}

// validateSeedName admits changes of spec.seedName, as Gardener's ShootValidator does:
//
//   - A set spec.seedName is never cleared.
//   - It moves from one seed to another only through the binding subresource (Subresource(ctx) "binding"): that is a
//     control-plane migration, and both seeds need backup configured (spec.backup) — the old one unless it no
//     longer exists. A binding that names the seed already assigned is refused.
//   - Scheduling (empty to a seed) is allowed on create, update and binding alike.
//   - The seed a shoot is scheduled or migrated to must exist and not be being deleted.
//
// old is nil on create.
func validateSeedName(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) field.ErrorList {
	p := field.NewPath("spec", "seedName")
	to, from := s.GetSpec().GetSeedName(), old.GetSpec().GetSeedName()
	binding := Subresource(ctx) == "binding"
	switch {
	case old != nil && binding && to == from:
		return field.ErrorList{field.Invalid(p, to, "the binding names the seed the shoot is already assigned to")}
	case from != "" && to == "":
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("spec.seedName is already set to %q and cannot be unset", from))}
	case from != "" && to != from && !binding:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("spec.seedName %q cannot be changed to %q by updating the shoot; use the shoots/binding subresource", from, to))}
	case to == "" || to == from:
		return nil
	}
	seed, ferr := readSeed(ctx, r, p, to)
	if ferr != nil {
		return field.ErrorList{ferr}
	}
	if seed.GetMetadata().GetDeletionTimestamp() != nil {
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("cannot schedule shoot %q on seed %q, which is being deleted", s.GetMetadata().GetName(), to))}
	}
	if from == "" {
		return nil
	}
	var errs field.ErrorList
	if seed.GetSpec().GetBackup() == nil {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("cannot change the seed: backup is not configured for seed %q", to)))
	}
	if old, err := r.Get(ctx, seeds, "", from); err == nil && old.(*corev1beta1.Seed).GetSpec().GetBackup() == nil {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("cannot change the seed: backup is not configured for the current seed %q", from)))
	} else if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, field.InternalError(p, fmt.Errorf("read Seed %s: %w", from, err)))
	}
	return errs
}

func readSeed(ctx context.Context, r Reader, p *field.Path, name string) (*corev1beta1.Seed, *field.Error) {
	obj, err := r.Get(ctx, seeds, "", name)
	if err != nil {
		return nil, refError(p, "Seed", name, err)
	}
	seed, ok := obj.(*corev1beta1.Seed)
	if !ok {
		return nil, field.InternalError(p, fmt.Errorf("Seed %s is a %T", name, obj))
	}
	return seed, nil
}

// migrating reports whether a stored shoot is in a control-plane migration, as Gardener's ShootValidator sees it: it
// was bound to another seed than the one its status names and has not started migrating yet, or its last operation is
// a Migrate, or a Restore that has not succeeded.
func migrating(s *corev1beta1.Shoot) bool {
	op := s.GetStatus().GetLastOperation()
	spec, status := s.GetSpec().GetSeedName(), s.GetStatus().GetSeedName()
	return (op != nil && op.GetType() != "Migrate" && spec != "" && status != "" && spec != status) ||
		op.GetType() == "Migrate" || (op.GetType() == "Restore" && op.GetState() != "Succeeded")
}

// withSeedName returns a copy of spec with spec.seedName set to name ("": unset).
func withSeedName(spec *corev1beta1.ShootSpec, name string) *corev1beta1.ShootSpec {
	c := proto.Clone(spec).(*corev1beta1.ShootSpec)
	if c == nil {
		c = &corev1beta1.ShootSpec{}
	}
	if name == "" {
		c.SeedName = nil
	} else {
		c.SeedName = &name
	}
	return c
}

// admitShoot checks the Shoot's references against the objects they name (old is nil on create).
func admitShoot(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	ns := s.GetMetadata().GetNamespace()
	if project, err := namespaceProject(ctx, r, ns); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, admitShootProject(s, old, project)...)
	}
	if seedName := s.GetSpec().GetSeedName(); seedName != "" && seedName != old.GetSpec().GetSeedName() {
		// validateSeedName found the seed.
		if seed, ferr := readSeed(ctx, r, spec.Child("seedName"), seedName); ferr == nil {
			errs = append(errs, validateShootNetworksAgainstSeed(s, seed)...)
		}
	}

	profileSpec, profilePath, perr := shootCloudProfile(ctx, r, s)
	if perr != nil {
		return append(errs, perr)
	}
	if profileSpec.GetType() != "" && profileSpec.GetType() != s.GetSpec().GetProvider().GetType() {
		errs = append(errs, field.Invalid(spec.Child("provider", "type"), s.GetSpec().GetProvider().GetType(),
			fmt.Sprintf("must match the type of cloud profile %s (%s)", profilePath, profileSpec.GetType())))
	}
	var regions []string
	for _, rg := range profileSpec.GetRegions() {
		regions = append(regions, rg.GetName())
	}
	if len(regions) > 0 && !slices.Contains(regions, s.GetSpec().GetRegion()) {
		errs = append(errs, field.NotSupported(spec.Child("region"), s.GetSpec().GetRegion(), regions))
	}
	defaultKubernetesVersion(s, profileSpec)
	// An expired version is refused unless the shoot already runs it (Gardener's validator).
	now := time.Now()
	var versions []string
	v := s.GetSpec().GetKubernetes().GetVersion()
	for _, ev := range profileSpec.GetKubernetes().GetVersions() {
		if expired, _ := versionStage(ev.GetExpirationDate(), ev.Classification, ev.GetLifecycle(), now); !expired || ev.GetVersion() == old.GetSpec().GetKubernetes().GetVersion() {
			versions = append(versions, ev.GetVersion())
		}
	}
	if !slices.Contains(versions, v) {
		errs = append(errs, field.NotSupported(spec.Child("kubernetes", "version"), v, versions))
	}
	errs = append(errs, admitShootCloudProfile(s, old, profileSpec, now)...)

	if name := s.GetSpec().GetCredentialsBindingName(); name != "" {
		if err := mustExist(ctx, r, credentialsBindings, ns, name, spec.Child("credentialsBindingName")); err != nil {
			errs = append(errs, err)
		}
	}
	if name := s.GetSpec().GetSecretBindingName(); name != "" {
		if err := mustExist(ctx, r, secretBindings, ns, name, spec.Child("secretBindingName")); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// shootCloudProfile resolves the Shoot's CloudProfile or NamespacedCloudProfile (whose status holds the merged spec).
func shootCloudProfile(ctx context.Context, r Reader, s *corev1beta1.Shoot) (*corev1beta1.CloudProfileSpec, *field.Path, *field.Error) {
	spec := field.NewPath("spec")
	ref := s.GetSpec().GetCloudProfile()
	path := spec.Child("cloudProfile", "name")
	if ref == nil {
		return nil, path, field.Required(path, "a cloud profile is required (spec.cloudProfile or spec.cloudProfileName)")
	}
	if s.GetSpec().GetCloudProfileName() != "" && ref.GetKind() == "CloudProfile" && ref.GetName() != s.GetSpec().GetCloudProfileName() {
		return nil, path, field.Invalid(spec.Child("cloudProfileName"), s.GetSpec().GetCloudProfileName(), "must match spec.cloudProfile.name")
	}
	switch ref.GetKind() {
	case "CloudProfile":
		obj, err := r.Get(ctx, cloudProfiles, "", ref.GetName())
		if err != nil {
			return nil, path, refError(path, "CloudProfile", ref.GetName(), err)
		}
		return obj.(*corev1beta1.CloudProfile).GetSpec(), path, nil
	case "NamespacedCloudProfile":
		obj, err := r.Get(ctx, namespacedCloudProfiles, s.GetMetadata().GetNamespace(), ref.GetName())
		if err != nil {
			return nil, path, refError(path, "NamespacedCloudProfile", ref.GetName(), err)
		}
		ncp := obj.(*corev1beta1.NamespacedCloudProfile)
		if merged := ncp.GetStatus().GetCloudProfileSpec(); merged != nil {
			return merged, path, nil
		}
		parent, err := r.Get(ctx, cloudProfiles, "", ncp.GetSpec().GetParent().GetName())
		if err != nil {
			return nil, path, refError(path, "CloudProfile", ncp.GetSpec().GetParent().GetName(), err)
		}
		return parent.(*corev1beta1.CloudProfile).GetSpec(), path, nil
	}
	return nil, path, field.NotSupported(spec.Child("cloudProfile", "kind"), ref.GetKind(), []string{"CloudProfile", "NamespacedCloudProfile"})
}

func refError(p *field.Path, kind, name string, err error) *field.Error {
	if apierrors.IsNotFound(err) {
		return field.NotFound(p, name)
	}
	return field.InternalError(p, fmt.Errorf("read %s %s: %w", kind, name, err))
}

func mustExist(ctx context.Context, r Reader, gr schemaGR, ns, name string, p *field.Path) *field.Error {
	if _, err := r.Get(ctx, gr, ns, name); err != nil {
		return refError(p, gr.Resource, name, err)
	}
	return nil
}

// namespaceProject returns the Project whose spec.namespace is ns, and an error when there is none.
func namespaceProject(ctx context.Context, r Reader, ns string) (*corev1beta1.Project, *field.Error) {
	p := field.NewPath("metadata", "namespace")
	list, err := r.List(ctx, projects, "")
	if err != nil {
		return nil, field.InternalError(p, err)
	}
	for _, o := range list {
		if pr := o.(*corev1beta1.Project); pr.GetSpec().GetNamespace() == ns {
			return pr, nil
		}
	}
	return nil, field.Invalid(p, ns, "the namespace does not belong to a Project")
}

// defaultKubernetesVersion completes an empty or partial (<major> or <major>.<minor>) version to the highest matching
// version of the cloud profile that has not expired, as Gardener's admission does.
func defaultKubernetesVersion(s *corev1beta1.Shoot, profile *corev1beta1.CloudProfileSpec) {
	if s.Spec.Kubernetes == nil {
		s.Spec.Kubernetes = &corev1beta1.Kubernetes{}
	}
	want := s.Spec.Kubernetes.Version
	if strings.Count(want, ".") == 2 {
		return
	}
	var best *version.Version
	now := time.Now()
	for _, ev := range profile.GetKubernetes().GetVersions() {
		v, err := version.ParseSemantic(ev.GetVersion())
		if err != nil {
			continue
		}
		if exp := ev.GetExpirationDate(); exp != nil && exp.AsTime().Before(now) {
			continue
		}
		if want != "" && !strings.HasPrefix(ev.GetVersion()+".", want+".") {
			continue
		}
		if best == nil || best.LessThan(v) {
			best = v
		}
	}
	if best != nil {
		s.Spec.Kubernetes.Version = best.String()
	}
}
