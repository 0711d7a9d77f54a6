package seedgraph

import (
	"slices"
	"sort"
	"strconv"
	"testing"

	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/objectnames"
	"github.com/trellis-dev/trellis/proto/resources"
	"google.golang.org/protobuf/proto"
)

func meta(ns, name string, rv int64) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.FormatInt(rv, 10)}
}

func shoot(name, seed string, rv int64) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{Metadata: meta("garden-dev", name, rv), Spec: &corev1beta1.ShootSpec{
		SeedName: proto.String(seed), SecretBindingName: proto.String("provider"), CloudProfileName: proto.String("local"),
	}}
}

type recorder struct{ refs []Ref }

func (r *recorder) Notify(ref Ref) { r.refs = append(r.refs, ref) }

func keys(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Ref.Resource+":"+m.Ref.Key())
	}
	sort.Strings(out)
	return out
}

func TestMembershipThroughReferences(t *testing.T) {
	g := New()
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "provider-secret", 1)})
	g.Apply(resources.SecretBindings, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "provider", 2), SecretRef: &metav1.SecretReference{Name: "provider-secret"}})
	g.Apply(resources.CloudProfiles, &corev1beta1.CloudProfile{Metadata: meta("", "local", 3)})
	g.Apply(resources.Seeds, &corev1beta1.Seed{Metadata: meta("", "a", 4)})
	g.Apply(resources.Seeds, &corev1beta1.Seed{Metadata: meta("", "b", 5)})
	if g.Belongs("a", resources.Secrets, "garden-dev", "provider-secret") {
		t.Fatal("a secret nobody on seed a references belongs to seed a")
	}
	ra, rb := &recorder{}, &recorder{}
	var initial []Member
	cancelA := g.Subscribe("a", ra, func(ms []Member, _ int64) { initial = ms })
	defer cancelA()
	defer g.Subscribe("b", rb, nil)()
	if got := keys(initial); !slices.Equal(got, []string{"seeds.core.gardener.cloud:a"}) {
		t.Fatalf("initial members of a = %v", got)
	}

	g.Apply(resources.Shoots, shoot("s1", "a", 10))
	want := []string{"cloudprofiles.core.gardener.cloud:local", "secretbindings.core.gardener.cloud:garden-dev/provider",
		"secrets:garden-dev/provider-secret", "seeds.core.gardener.cloud:a", "shoots.core.gardener.cloud:garden-dev/s1"}
	if got := keys(g.Members("a")); !slices.Equal(got, want) {
		t.Fatalf("members of a = %v, want %v", got, want)
	}
	m, ok := g.Get("a", Ref{Resource: resources.Secrets, Namespace: "garden-dev", Name: "provider-secret"})
	if !ok || m.Version != 10 {
		t.Fatalf("secret joined seed a with the shoot at revision 10, got version %d ok=%v", m.Version, ok)
	}
	if !slices.Contains(ra.refs, Ref{Resource: resources.Secrets, Namespace: "garden-dev", Name: "provider-secret"}) {
		t.Fatalf("subscriber of a was not told about the secret: %v", ra.refs)
	}

	// A second shoot on a referencing the same objects changes nothing for them; moving the first to b moves them.
	g.Apply(resources.Shoots, shoot("s2", "a", 11))
	g.Apply(resources.Shoots, shoot("s1", "b", 12))
	if !g.Belongs("a", resources.Secrets, "garden-dev", "provider-secret") || !g.Belongs("b", resources.Secrets, "garden-dev", "provider-secret") {
		t.Fatal("secret referenced from shoots on a and b must belong to both")
	}
	if g.Belongs("a", resources.Shoots, "garden-dev", "s1") {
		t.Fatal("shoot moved to b still belongs to a")
	}
	m, _ = g.Get("a", Ref{Resource: resources.Secrets, Namespace: "garden-dev", Name: "provider-secret"})
	if m.Version != 10 || !m.Shared {
		t.Fatalf("secret kept belonging to a since 10 and is shared with b: version = %d, shared = %v", m.Version, m.Shared)
	}
	if m, _ := g.Get("b", Ref{Resource: resources.Shoots, Namespace: "garden-dev", Name: "s1"}); m.Shared {
		t.Fatal("shoot s1 belongs to b alone but is reported shared")
	}
	g.Remove(resources.Shoots, "garden-dev", "s2", 13)
	if m, _ := g.Get("b", Ref{Resource: resources.Secrets, Namespace: "garden-dev", Name: "provider-secret"}); m.Shared || m.Version != 12 {
		t.Fatalf("secret left a: it belongs to b alone since 12, got version %d shared %v", m.Version, m.Shared)
	}
	if g.Belongs("a", resources.Secrets, "garden-dev", "provider-secret") || g.Belongs("a", resources.CloudProfiles, "", "local") {
		t.Fatal("after the last shoot of a is gone its references must leave a")
	}
	if got := keys(g.Members("a")); !slices.Equal(got, []string{"seeds.core.gardener.cloud:a"}) {
		t.Fatalf("members of a = %v", got)
	}

	// Deleting a referenced object removes it from the seed's view; recreating it brings it back.
	ra.refs = nil
	g.Remove(resources.Secrets, "garden-dev", "provider-secret", 14)
	if g.Belongs("b", resources.Secrets, "garden-dev", "provider-secret") {
		t.Fatal("deleted secret still belongs")
	}
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "provider-secret", 15)})
	m, ok = g.Get("b", Ref{Resource: resources.Secrets, Namespace: "garden-dev", Name: "provider-secret"})
	if !ok || m.Version != 15 {
		t.Fatalf("recreated secret: version %d ok=%v", m.Version, ok)
	}
	for _, r := range ra.refs {
		if r.Resource == resources.Secrets {
			t.Fatalf("seed a heard about a secret that is not its own: %v", ra.refs)
		}
	}

	// Once nothing exists, nothing is kept: a node without object, edges or seeds is dropped.
	g.Remove(resources.Shoots, "garden-dev", "s1", 16)
	for _, r := range []Ref{{resources.Secrets, "garden-dev", "provider-secret"}, {resources.SecretBindings, "garden-dev", "provider"},
		{resources.CloudProfiles, "", "local"}, {resources.Seeds, "", "a"}, {resources.Seeds, "", "b"}} {
		g.Remove(r.Resource, r.Namespace, r.Name, 17)
	}
	if len(g.nodes) != 0 {
		t.Fatalf("nodes left after every object was removed: %d", len(g.nodes))
	}
}

func TestManagedSeedInheritsItsShootsSeed(t *testing.T) {
	g := New()
	ms := &seedmanagementv1alpha1.ManagedSeed{Metadata: meta("garden", "ms", 1), Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "host"}}}
	g.Apply(resources.ManagedSeeds, ms)
	if !g.Belongs("ms", resources.ManagedSeeds, "garden", "ms") || g.Belongs("a", resources.ManagedSeeds, "garden", "ms") {
		t.Fatal("managed seed belongs to itself only while its shoot is unknown")
	}
	h := shoot("host", "a", 2)
	h.Metadata.Namespace = "garden"
	g.Apply(resources.Shoots, h)
	if !g.Belongs("a", resources.ManagedSeeds, "garden", "ms") {
		t.Fatal("managed seed must belong to the seed hosting its shoot")
	}
	g.Remove(resources.ManagedSeeds, "garden", "ms", 3)
	if g.Belongs("a", resources.ManagedSeeds, "garden", "ms") {
		t.Fatal("deleted managed seed still belongs")
	}
	g.Remove(resources.Shoots, "garden", "host", 4)
	if objects, seeds := g.Stats(); objects != 0 || seeds != 0 {
		t.Fatalf("graph keeps %d nodes and %d seeds after everything is gone", objects, seeds)
	}
}

// TestGardenletBelongsToItsSeed: a Gardenlet in the garden namespace belongs to the seed of its name (its agent
// deploys itself from it); one elsewhere belongs to no seed.
func TestGardenletBelongsToItsSeed(t *testing.T) {
	g := New()
	g.Apply(resources.Gardenlets, &seedmanagementv1alpha1.Gardenlet{Metadata: meta("garden", "a", 1)})
	g.Apply(resources.Gardenlets, &seedmanagementv1alpha1.Gardenlet{Metadata: meta("garden-dev", "b", 2)})
	if !g.Belongs("a", resources.Gardenlets, "garden", "a") || g.Belongs("b", resources.Gardenlets, "garden", "a") {
		t.Fatal("garden/a belongs to seed a only")
	}
	if g.Belongs("b", resources.Gardenlets, "garden-dev", "b") {
		t.Fatal("a Gardenlet outside the garden namespace belongs to no seed")
	}
	g.Remove(resources.Gardenlets, "garden", "a", 3)
	if g.Belongs("a", resources.Gardenlets, "garden", "a") {
		t.Fatal("a deleted Gardenlet still belongs")
	}
}

func TestSeedOwnObjects(t *testing.T) {
	g := New()
	g.Apply(resources.Namespaces, &kcorev1.Namespace{Metadata: meta("", "seed-a", 1)})
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("seed-a", "internal-domain", 2)})
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("seed-b", "internal-domain", 3)})
	if !g.Belongs("a", resources.Secrets, "seed-a", "internal-domain") || g.Belongs("a", resources.Secrets, "seed-b", "internal-domain") {
		t.Fatal("secrets of namespace seed-<name> belong to that seed only")
	}
	if !g.Belongs("a", resources.Namespaces, "", "seed-a") {
		t.Fatal("namespace seed-a belongs to a")
	}
}

// TestMigratingShootBelongsToBothSeeds: a shoot bound to seed b whose status still names seed a (a control-plane
// migration) belongs to both seeds with its references, and to b alone once the source agent clears
// status.seedName.
func TestMigratingShootBelongsToBothSeeds(t *testing.T) {
	g := New()
	g.Apply(resources.SecretBindings, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "provider", 1)})
	g.Apply(resources.ShootStates, &corev1beta1.ShootState{Metadata: meta("garden-dev", "m", 1)})
	s := shoot("m", "b", 2)
	s.Status = &corev1beta1.ShootStatus{SeedName: proto.String("a")}
	g.Apply(resources.Shoots, s)
	for _, seed := range []string{"a", "b"} {
		if !g.Belongs(seed, resources.Shoots, "garden-dev", "m") || !g.Belongs(seed, resources.SecretBindings, "garden-dev", "provider") ||
			!g.Belongs(seed, resources.ShootStates, "garden-dev", "m") {
			t.Fatalf("migrating shoot, its binding and its ShootState must belong to seed %s", seed)
		}
	}
	s = proto.Clone(s).(*corev1beta1.Shoot)
	s.Metadata.ResourceVersion = "3"
	s.Status.SeedName = nil
	g.Apply(resources.Shoots, s)
	if g.Belongs("a", resources.Shoots, "garden-dev", "m") || g.Belongs("a", resources.SecretBindings, "garden-dev", "provider") || !g.Belongs("b", resources.Shoots, "garden-dev", "m") {
		t.Fatal("once migrated the shoot and its references belong to the destination seed alone")
	}
}

// TestBackupEntryInheritsItsShootsSeeds: an entry owned by a shoot belongs to the shoot's seeds, so the destination
// of a migration may take over the entry the source wrote; an entry names its own seeds too.
func TestBackupEntryInheritsItsShootsSeeds(t *testing.T) {
	g := New()
	g.Apply(resources.BackupBuckets, &corev1beta1.BackupBucket{Metadata: meta("", "bucket-a", 1), Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String("a")}})
	e := &corev1beta1.BackupEntry{Metadata: meta("garden-dev", "shoot--dev--m--uid", 1),
		Spec: &corev1beta1.BackupEntrySpec{SeedName: proto.String("a"), BucketName: "bucket-a"}, Status: &corev1beta1.BackupEntryStatus{SeedName: proto.String("a")}}
	e.Metadata.OwnerReferences = []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: "m"}}
	g.Apply(resources.BackupEntries, e)
	g.Apply(resources.Shoots, shoot("m", "a", 2))
	if !g.Belongs("a", resources.BackupEntries, "garden-dev", "shoot--dev--m--uid") || g.Belongs("b", resources.BackupEntries, "garden-dev", "shoot--dev--m--uid") {
		t.Fatal("entry of seed a, shoot on a: belongs to a only")
	}
	moved := shoot("m", "b", 3)
	moved.Status = &corev1beta1.ShootStatus{SeedName: proto.String("a")}
	g.Apply(resources.Shoots, moved)
	if !g.Belongs("b", resources.BackupEntries, "garden-dev", "shoot--dev--m--uid") || !g.Belongs("b", resources.BackupBuckets, "", "bucket-a") {
		t.Fatal("the destination seed of the entry's shoot must see the entry and its bucket")
	}
	other := &corev1beta1.BackupEntry{Metadata: meta("garden-dev", "foreign", 4), Spec: &corev1beta1.BackupEntrySpec{SeedName: proto.String("a"), BucketName: "bucket-a"}}
	other.Metadata.OwnerReferences = []*metav1.OwnerReference{{ApiVersion: "v1", Kind: "Shoot", Name: "m"}}
	g.Apply(resources.BackupEntries, other)
	if g.Belongs("b", resources.BackupEntries, "garden-dev", "foreign") {
		t.Fatal("only an owner of kind core.gardener.cloud Shoot counts")
	}
}

// TestHasPathToMissingObjects: the seeds of the objects that reference an object have a path to it whether or not it
// exists (a BackupBucket's generated secret after it was deleted, a shoot's BackupEntry before it is created), other
// seeds have none, and an object nobody references has no path even for its own name's sake.
func TestHasPathToMissingObjects(t *testing.T) {
	g := New()
	const secret = "generated-bucket-b1"
	bucket := &corev1beta1.BackupBucket{Metadata: meta("", "b1", 1), Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String("a")},
		Status: &corev1beta1.BackupBucketStatus{GeneratedSecretRef: &metav1.SecretReference{Namespace: "garden", Name: secret}}}
	g.Apply(resources.BackupBuckets, bucket)
	if !g.HasPath("a", resources.Secrets, "garden", secret) || g.Belongs("a", resources.Secrets, "garden", secret) {
		t.Fatal("the generated secret the bucket of a names, before it exists: a path from a, no membership")
	}
	if g.HasPath("b", resources.Secrets, "garden", secret) || g.HasPath("a", resources.Secrets, "garden", "unreferenced") {
		t.Fatal("a path from a seed whose objects do not name the secret, or to a secret nobody names")
	}
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("garden", secret, 2)})
	if !g.HasPath("a", resources.Secrets, "garden", secret) || !g.Belongs("a", resources.Secrets, "garden", secret) || g.HasPath("b", resources.Secrets, "garden", secret) {
		t.Fatal("the existing generated secret belongs to a (and has a path from a alone)")
	}
	g.Remove(resources.Secrets, "garden", secret, 3)
	if !g.HasPath("a", resources.Secrets, "garden", secret) || g.Belongs("a", resources.Secrets, "garden", secret) {
		t.Fatal("after the secret was deleted, the bucket of a still names it: a path, no membership")
	}
	// A deleted object's own declarations go with it: a missing shoot that named seed a relates nothing to a.
	g.Apply(resources.Shoots, shoot("gone", "a", 4))
	g.Remove(resources.Shoots, "garden-dev", "gone", 5)
	if g.HasPath("a", resources.Shoots, "garden-dev", "gone") || g.HasPath("a", resources.SecretBindings, "garden-dev", "provider") {
		t.Fatal("a deleted shoot keeps a path to its seed, or its references keep one")
	}
	cleared := proto.Clone(bucket).(*corev1beta1.BackupBucket)
	cleared.Metadata.ResourceVersion, cleared.Status = "6", nil
	g.Apply(resources.BackupBuckets, cleared)
	if g.HasPath("a", resources.Secrets, "garden", secret) {
		t.Fatal("a path to the secret after the bucket stopped naming it")
	}
	g.Remove(resources.BackupBuckets, "", "b1", 7)
	if objects, _ := g.Stats(); objects != 0 {
		t.Fatalf("graph keeps %d nodes after everything is gone", objects)
	}

	// A shoot names its BackupEntry (<technical ID>--<UID>) once its status has the technical ID.
	s := shoot("s", "a", 8)
	s.Metadata.Uid = "uid-s"
	g.Apply(resources.Shoots, s)
	entry := objectnames.BackupEntryName("shoot--dev--s", "uid-s")
	if g.HasPath("a", resources.BackupEntries, "garden-dev", entry) {
		t.Fatal("a path to the entry before the shoot has a technical ID")
	}
	s = proto.Clone(s).(*corev1beta1.Shoot)
	s.Metadata.ResourceVersion, s.Status = "9", &corev1beta1.ShootStatus{TechnicalId: "shoot--dev--s"}
	g.Apply(resources.Shoots, s)
	if !g.HasPath("a", resources.BackupEntries, "garden-dev", entry) || g.HasPath("b", resources.BackupEntries, "garden-dev", entry) ||
		g.HasPath("a", resources.BackupEntries, "garden-dev", objectnames.BackupEntryName("shoot--dev--s", "other-uid")) {
		t.Fatal("the shoot's entry before it exists: a path from the shoot's seed alone, to that name alone")
	}
	g.Apply(resources.BackupEntries, &corev1beta1.BackupEntry{Metadata: meta("garden-dev", entry, 10), Spec: &corev1beta1.BackupEntrySpec{BucketName: "b1"}})
	if !g.Belongs("a", resources.BackupEntries, "garden-dev", entry) {
		t.Fatal("the shoot's entry belongs to the shoot's seed by its name")
	}
}

// An installation brings its registration and deployment to its seed, and the deployment the registry credentials
// and CA bundle of its OCI chart (in the garden namespace), so that the seed's agent can pull the chart.
func TestInstallationBringsDeploymentAndRegistrySecrets(t *testing.T) {
	g := New()
	g.Apply(resources.Seeds, &corev1beta1.Seed{Metadata: meta("", "a", 1)})
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("garden", "pull", 2)})
	g.Apply(resources.Secrets, &kcorev1.Secret{Metadata: meta("garden", "ca", 3)})
	g.Apply(resources.ControllerRegistrations, &corev1beta1.ControllerRegistration{Metadata: meta("", "ext", 4)})
	g.Apply(resources.ControllerDeployments, &corev1.ControllerDeployment{Metadata: meta("", "ext", 5), Helm: &corev1.HelmControllerDeployment{
		OciRepository: &corev1.OCIRepository{Ref: proto.String("registry.example.com/ext:1.0.0"),
			PullSecretRef: &metav1.LocalObjectReference{Name: "pull"}, CaBundleSecretRef: &metav1.LocalObjectReference{Name: "ca"}}}})
	if g.Belongs("a", resources.Secrets, "garden", "pull") {
		t.Fatal("the pull secret belongs to seed a before any installation there")
	}
	g.Apply(resources.ControllerInstallations, &corev1beta1.ControllerInstallation{Metadata: meta("", "ext-abcde", 6), Spec: &corev1beta1.ControllerInstallationSpec{
		SeedRef: &metav1.ObjectReference{Name: "a"}, RegistrationRef: &metav1.ObjectReference{Name: "ext"}, DeploymentRef: &metav1.ObjectReference{Name: "ext"}}})
	want := []string{"controllerdeployments.core.gardener.cloud:ext", "controllerinstallations.core.gardener.cloud:ext-abcde",
		"controllerregistrations.core.gardener.cloud:ext", "secrets:garden/ca", "secrets:garden/pull", "seeds.core.gardener.cloud:a"}
	if got := keys(g.Members("a")); !slices.Equal(got, want) {
		t.Fatalf("members of a = %v, want %v", got, want)
	}
	g.Remove(resources.ControllerInstallations, "", "ext-abcde", 7)
	if g.Belongs("a", resources.Secrets, "garden", "ca") || g.Belongs("a", resources.ControllerDeployments, "", "ext") {
		t.Fatal("the deployment and its secrets stay with seed a after its installation is gone")
	}
}
