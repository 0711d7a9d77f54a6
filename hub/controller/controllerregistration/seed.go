package controllerregistration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Labels on ControllerInstallations, as Gardener names them: hashes of what the installation was made from (like
// pod-template-hash on Pods), so that a change of the seed's spec, the registration's spec or the deployment changes
// the installation and the agent deploys again.
const (
	LabelSeedSpecHash         = "seed-spec-hash"
	LabelRegistrationSpecHash = "registration-spec-hash"
	LabelDeploymentHash       = "deployment-hash"
)

// Deployment policies of a ControllerRegistration.
const (
	PolicyOnDemand             = "OnDemand"
	PolicyAlways               = "Always"
	PolicyAlwaysExceptNoShoots = "AlwaysExceptNoShoots"
)

// ConditionRequired is the ControllerInstallation condition the agent keeps: True while extension objects of the
// installation's kinds and types exist in the seed.
const ConditionRequired = "Required"

// seedReconciler is the main reconciler: for one seed it computes the ControllerRegistrations the seed needs and
// creates, updates and deletes its ControllerInstallations to match (Gardener's controllerregistration/seed).
type seedReconciler struct {
	c   *collections
	log *slog.Logger

	mu sync.Mutex
	// missing is what each seed was last found to need without a registration, so that it is logged once per change.
	missing map[string]string
}

// Reconcile brings the seed key.Name's ControllerInstallations in line with what it needs.
func (r *seedReconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	seed, ok, err := controller.Get[*corev1beta1.Seed](ctx, r.c.seeds, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	// Installations are read after a consistent read, so that a leader that just took over does not create a second
	// installation its predecessor has just created (Gardener reads them live for the same reason).
	if err := r.c.installations.Sync(ctx); err != nil {
		return controller.Result{}, err
	}
	in, err := r.gather(ctx, seed)
	if err != nil {
		return controller.Result{}, err
	}
	wanted, missing := in.wantedRegistrations()
	// Gardener fails the whole reconciliation when a needed kind/type has no registration; deploying what can be
	// deployed helps more, and a new registration enqueues every seed, so there is nothing to retry.
	r.reportMissing(key.Name, missing)
	for _, ci := range in.orphans {
		// The registration's finalizer keeps this from happening unless someone made the installation by hand or
		// removed the finalizer. Gardener fails the seed's reconciliation; the installation is left to the operator
		// here, and the rest is reconciled.
		r.log.Warn("a ControllerInstallation of the seed references a ControllerRegistration that does not exist; leaving it alone",
			"seed", key.Name, "controllerInstallation", ci.GetMetadata().GetName(), "controllerRegistration", ci.GetSpec().GetRegistrationRef().GetName())
	}
	var errs []error
	for _, name := range sets.List(wanted) {
		if err := r.deploy(ctx, in, name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(in.installations)) {
		if wanted.Has(name) {
			continue
		}
		ci := in.installations[name]
		if ci.GetMetadata().GetDeletionTimestamp() != nil {
			continue
		}
		r.log.Info("deleting unneeded ControllerInstallation", "seed", key.Name, "controllerRegistration", name, "controllerInstallation", ci.GetMetadata().GetName())
		if _, _, err := r.c.installations.Delete(ctx, "", ci.GetMetadata().GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete ControllerInstallation %s: %w", ci.GetMetadata().GetName(), err))
		}
	}
	return controller.Result{}, errors.Join(errs...)
}

// reportMissing logs the kind/types a seed needs that no registration provides, when they change.
func (r *seedReconciler) reportMissing(seed string, missing []string) {
	now := strings.Join(missing, ",")
	r.mu.Lock()
	before := r.missing[seed]
	if now == "" {
		delete(r.missing, seed)
	} else {
		r.missing[seed] = now
	}
	r.mu.Unlock()
	switch {
	case now == before:
	case now == "":
		r.log.Info("every extension controller the seed needs is registered", "seed", seed)
	default:
		r.log.Warn("the seed needs extension controllers no ControllerRegistration provides", "seed", seed, "kindTypes", missing)
	}
}

// seedInput is everything a seed's reconciliation decides on.
type seedInput struct {
	seed          *corev1beta1.Seed
	registrations map[string]*corev1beta1.ControllerRegistration
	// installations are the seed's ControllerInstallations by registration name.
	installations map[string]*corev1beta1.ControllerInstallation
	// orphans are installations of the seed whose registration does not exist; they are left alone.
	orphans []*corev1beta1.ControllerInstallation
	// pairs are the kind/type combinations the seed needs.
	pairs  sets.Set[string]
	shoots int
}

// gather reads what the reconciliation of seed needs.
func (r *seedReconciler) gather(ctx context.Context, seed *corev1beta1.Seed) (*seedInput, error) {
	name := seed.GetMetadata().GetName()
	regs, err := listAll[*corev1beta1.ControllerRegistration](ctx, r.c.registrations)
	if err != nil {
		return nil, err
	}
	in := &seedInput{seed: seed, registrations: map[string]*corev1beta1.ControllerRegistration{}, installations: map[string]*corev1beta1.ControllerInstallation{}}
	for _, cr := range regs {
		in.registrations[cr.GetMetadata().GetName()] = cr
	}
	cis, err := byIndex[*corev1beta1.ControllerInstallation](ctx, r.c.installations, name)
	if err != nil {
		return nil, err
	}
	for _, ci := range cis {
		if ci.GetSpec().GetSeedRef().GetName() != name {
			continue
		}
		reg := ci.GetSpec().GetRegistrationRef().GetName()
		if _, ok := in.registrations[reg]; !ok {
			in.orphans = append(in.orphans, ci)
			continue
		}
		// Two installations of one registration on one seed should not exist; keep the older one.
		if cur, ok := in.installations[reg]; !ok || ci.GetMetadata().GetCreationTimestamp().AsTime().Before(cur.GetMetadata().GetCreationTimestamp().AsTime()) {
			in.installations[reg] = ci
		}
	}
	buckets, err := listAll[*corev1beta1.BackupBucket](ctx, r.c.buckets)
	if err != nil {
		return nil, err
	}
	bucketsByName := map[string]*corev1beta1.BackupBucket{}
	for _, b := range buckets {
		bucketsByName[b.GetMetadata().GetName()] = b
	}
	entries, err := byIndex[*corev1beta1.BackupEntry](ctx, r.c.entries, name)
	if err != nil {
		return nil, err
	}
	var onSeed []*corev1beta1.BackupEntry
	for _, e := range entries {
		if e.GetSpec().GetSeedName() == name || e.GetStatus().GetSeedName() == name {
			onSeed = append(onSeed, e)
		}
	}
	shoots, err := byIndex[*corev1beta1.Shoot](ctx, r.c.shoots, name)
	if err != nil {
		return nil, err
	}
	in.pairs = ForSeed(seed, regs).Union(ForBackupBuckets(name, buckets))
	forEntries, missing := ForBackupEntries(onSeed, bucketsByName)
	if len(missing) > 0 {
		r.log.Warn("backup entries reference unknown buckets", "seed", name, "backupEntries", missing)
	}
	in.pairs = in.pairs.Union(forEntries)
	for _, sh := range shoots {
		if sh.GetSpec().GetSeedName() != name && sh.GetStatus().GetSeedName() != name {
			continue
		}
		in.shoots++
		in.pairs = in.pairs.Union(ForShoot(sh, seed, regs))
	}
	return in, nil
}

// wantedRegistrations are the registrations the seed should have an installation of (Gardener's
// computeWantedControllerRegistrationNames): those with policy Always (unless the seed is being deleted) or
// AlwaysExceptNoShoots while the seed has shoots, if they are not being deleted; every registration of a needed
// kind/type; every registration whose installation on the seed reports Required=True (its extension objects still
// exist, so its controller must stay to clean up); all filtered by their seedSelector. missing lists needed kind/types
// no registration provides.
func (in *seedInput) wantedRegistrations() (wanted sets.Set[string], missing []string) {
	wanted = sets.New[string]()
	byPair := map[string][]string{}
	seedDeleting := in.seed.GetMetadata().GetDeletionTimestamp() != nil
	for name, cr := range in.registrations {
		policy := cr.GetSpec().GetDeployment().GetPolicy()
		if cr.GetMetadata().GetDeletionTimestamp() == nil {
			if policy == PolicyAlways && !seedDeleting {
				wanted.Insert(name)
			}
			if policy == PolicyAlwaysExceptNoShoots && in.shoots > 0 {
				wanted.Insert(name)
			}
		}
		for _, r := range cr.GetSpec().GetResources() {
			id := ID(r.GetKind(), r.GetType())
			byPair[id] = append(byPair[id], name)
		}
	}
	for _, id := range sets.List(in.pairs) {
		names, ok := byPair[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		wanted.Insert(names...)
	}
	for name, ci := range in.installations {
		if isRequired(ci) {
			wanted.Insert(name)
		}
	}
	for name := range wanted {
		if !seedSelectorMatches(in.registrations[name], in.seed) {
			wanted.Delete(name)
		}
	}
	return wanted, missing
}

// isRequired reports whether the agent reports the installation's extension objects as still existing.
func isRequired(ci *corev1beta1.ControllerInstallation) bool {
	for _, c := range ci.GetStatus().GetConditions() {
		if c.GetType() == ConditionRequired {
			return c.GetStatus() == "True"
		}
	}
	return false
}

// seedSelectorMatches reports whether the registration's spec.deployment.seedSelector selects the seed; no selector
// selects every seed, an invalid one none.
func seedSelectorMatches(cr *corev1beta1.ControllerRegistration, seed *corev1beta1.Seed) bool {
	sel := cr.GetSpec().GetDeployment().GetSeedSelector()
	if sel == nil {
		return true
	}
	ks := &kmetav1.LabelSelector{MatchLabels: sel.GetMatchLabels()}
	for _, e := range sel.GetMatchExpressions() {
		ks.MatchExpressions = append(ks.MatchExpressions, kmetav1.LabelSelectorRequirement{Key: e.GetKey(), Operator: kmetav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues()})
	}
	s, err := kmetav1.LabelSelectorAsSelector(ks)
	return err == nil && s.Matches(labels.Set(seed.GetMetadata().GetLabels()))
}

// deploy creates or updates the seed's installation of registration name.
func (r *seedReconciler) deploy(ctx context.Context, in *seedInput, name string) error {
	cr := in.registrations[name]
	if cr.GetMetadata().GetDeletionTimestamp() != nil {
		// An operator offboarding an extension deletes its registration and then its installations by hand; no new
		// ones are made meanwhile (as in Gardener).
		return nil
	}
	var cd *corev1.ControllerDeployment
	if refs := cr.GetSpec().GetDeployment().GetDeploymentRefs(); len(refs) > 0 {
		obj, err := r.c.deployments.Get(ctx, "", refs[0].GetName())
		if err != nil {
			return fmt.Errorf("cannot deploy ControllerInstallation for %s because the referenced ControllerDeployment cannot be retrieved: %w", name, err)
		}
		cd = obj.(*corev1.ControllerDeployment)
	}
	existing := in.installations[name]
	if existing != nil && existing.GetMetadata().GetDeletionTimestamp() != nil {
		return fmt.Errorf("cannot deploy new ControllerInstallation for %q because the deletion of the old ControllerInstallation is still pending", name)
	}
	spec := &corev1beta1.ControllerInstallationSpec{
		SeedRef:         &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Name: in.seed.GetMetadata().GetName()},
		RegistrationRef: &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration", Name: name},
	}
	hashes := map[string]string{
		LabelSeedSpecHash:         hash(in.seed.GetSpec()),
		LabelRegistrationSpecHash: hash(cr.GetSpec()),
	}
	if cd != nil {
		spec.DeploymentRef = &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1", Kind: "ControllerDeployment", Name: cd.GetMetadata().GetName()}
		hashes[LabelDeploymentHash] = hash(&corev1.ControllerDeployment{Helm: cd.GetHelm(), InjectGardenKubeconfig: cd.InjectGardenKubeconfig, Resources: cd.GetResources()})
	}
	if existing == nil {
		ci := &corev1beta1.ControllerInstallation{
			ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerInstallation",
			Metadata: &metav1.ObjectMeta{GenerateName: name + "-", Labels: hashes},
			Spec:     spec,
		}
		out, err := r.c.installations.Create(ctx, ci)
		if err != nil {
			return fmt.Errorf("create ControllerInstallation for %s: %w", name, err)
		}
		r.log.Info("created ControllerInstallation", "seed", in.seed.GetMetadata().GetName(), "controllerRegistration", name, "controllerInstallation", out.GetMetadata().GetName())
		return nil
	}
	_, err := r.c.installations.GuaranteedUpdate(ctx, "", existing.GetMetadata().GetName(), false, func(cur store.Object) (store.Object, error) {
		ci := cur.(*corev1beta1.ControllerInstallation)
		if ci.GetMetadata().GetDeletionTimestamp() != nil {
			return nil, nil
		}
		if ci.Metadata.Labels == nil {
			ci.Metadata.Labels = map[string]string{}
		}
		maps.Copy(ci.Metadata.Labels, hashes)
		if cd == nil {
			delete(ci.Metadata.Labels, LabelDeploymentHash)
		}
		// The references' names are immutable; what changes is the deployment reference.
		ci.Spec.DeploymentRef = spec.DeploymentRef
		return ci, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update ControllerInstallation %s: %w", existing.GetMetadata().GetName(), err)
	}
	return nil
}

// hash is the first 16 hex digits of the SHA-256 of m's deterministic protobuf encoding.
func hash(m proto.Message) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // only invalid UTF-8 fails, which the store never holds
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// listAll lists every object of a collection as T.
func listAll[T store.Object](ctx context.Context, c *store.Collection) ([]T, error) {
	res, err := c.List(ctx, "", store.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(res.Items))
	for _, o := range res.Items {
		out = append(out, o.(T))
	}
	return out, nil
}

// byIndex returns the objects of a collection that belong to the seed (index "seed") as T.
func byIndex[T store.Object](ctx context.Context, c *store.Collection, seed string) ([]T, error) {
	objs, err := c.ByIndex(ctx, "seed", seed)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetMetadata().GetName() < out[j].GetMetadata().GetName() })
	return out, nil
}
