package garbagecollector_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/garbagecollector"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func owned(o store.Object, apiVersion, kind string) *metav1.OwnerReference {
	md := o.GetMetadata()
	return &metav1.OwnerReference{ApiVersion: apiVersion, Kind: kind, Name: md.GetName(), Uid: md.GetUid()}
}

// startCollector starts the collector over every kind of the registry; the returned func stops it.
func startCollector(t *testing.T, reg *api.Registry) (stop func()) {
	var kinds []garbagecollector.Kind
	for _, k := range api.Kinds {
		kinds = append(kinds, garbagecollector.Kind{GroupKind: k.GroupKind(), GroupResource: k.GroupResource(), Namespaced: k.Namespaced})
	}
	c, err := garbagecollector.New(garbagecollector.Config{Source: reg, Kinds: kinds, OwnerIndex: api.IndexOwnerUID})
	if err != nil {
		t.Fatal(err)
	}
	return controllertest.Start(t, c)
}

func meta(ns, name string, owners ...*metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners}
}

// TestCollects runs the collector over the hub's real registry and store: dependents of a deleted owner go, in
// chains; an object with another owner left keeps it and loses the reference to the one gone; references to an
// earlier object of the owner's name count as gone; references the hub cannot resolve keep their object.
func TestCollects(t *testing.T) {
	reg := controllertest.NewRegistry(t)
	shoots := controllertest.Collection(t, reg, "core.gardener.cloud", "shoots")
	entries := controllertest.Collection(t, reg, "core.gardener.cloud", "backupentries")
	secrets := controllertest.Collection(t, reg, "", "secrets")
	configMaps := controllertest.Collection(t, reg, "", "configmaps")
	projects := controllertest.Collection(t, reg, "core.gardener.cloud", "projects")
	namespaces := controllertest.Collection(t, reg, "", "namespaces")
	const ns = "garden-dev"
	const shootAPI, v1 = "core.gardener.cloud/v1beta1", "v1"

	shoot := controllertest.Create(t, shoots, &corev1beta1.Shoot{Metadata: meta(ns, "s"), Spec: &corev1beta1.ShootSpec{Region: "r"}})
	keeper := controllertest.Create(t, configMaps, &kcorev1.ConfigMap{Metadata: meta(ns, "keeper")})
	ca := controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta(ns, "s.ca-cluster", owned(shoot, shootAPI, "Shoot"))})
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta(ns, "chained", owned(ca, v1, "Secret"))})
	controllertest.Create(t, configMaps, &kcorev1.ConfigMap{Metadata: meta(ns, "two-owners", owned(shoot, shootAPI, "Shoot"), owned(keeper, v1, "ConfigMap"))})
	entryMeta := meta(ns, "s", owned(shoot, shootAPI, "Shoot"))
	entryMeta.Finalizers = []string{"gardener"}
	controllertest.Create(t, entries, &corev1beta1.BackupEntry{Metadata: entryMeta, Spec: &corev1beta1.BackupEntrySpec{BucketName: "b"}})
	controllertest.Create(t, configMaps, &kcorev1.ConfigMap{Metadata: meta(ns, "unknown-owner",
		&metav1.OwnerReference{ApiVersion: "example.com/v1", Kind: "Gadget", Name: "g", Uid: "u-1"})})
	controllertest.Create(t, configMaps, &kcorev1.ConfigMap{Metadata: meta(ns, "earlier-owner",
		&metav1.OwnerReference{ApiVersion: v1, Kind: "ConfigMap", Name: "keeper", Uid: "uid-of-an-earlier-keeper"})})
	project := controllertest.Create(t, projects, &corev1beta1.Project{Metadata: meta("", "dev"), Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(ns)}})
	controllertest.Create(t, namespaces, &kcorev1.Namespace{Metadata: meta("", "garden-dev-extra", owned(project, shootAPI, "Project"))})

	defer startCollector(t, reg)()
	exists := func(col *store.Collection, ns, name string) bool {
		return controllertest.Get[store.Object](t, col, ns, name) != nil
	}

	controllertest.Eventually(t, "the object owned by an earlier keeper is deleted", func() bool { return !exists(configMaps, ns, "earlier-owner") })
	controllertest.Consistently(t, "objects whose owners exist, or cannot be resolved, stay", 300*time.Millisecond, func() bool {
		return exists(secrets, ns, "s.ca-cluster") && exists(secrets, ns, "chained") && exists(configMaps, ns, "two-owners") &&
			exists(configMaps, ns, "unknown-owner") && exists(namespaces, "", "garden-dev-extra") &&
			controllertest.Get[*corev1beta1.BackupEntry](t, entries, ns, "s").GetMetadata().GetDeletionTimestamp() == nil
	})

	controllertest.Delete(t, shoots, ns, "s")
	controllertest.Eventually(t, "the shoot's dependents, and theirs, are deleted", func() bool {
		return !exists(secrets, ns, "s.ca-cluster") && !exists(secrets, ns, "chained")
	})
	controllertest.Eventually(t, "the backup entry is marked for deletion (its finalizer keeps it)", func() bool {
		e := controllertest.Get[*corev1beta1.BackupEntry](t, entries, ns, "s")
		return e != nil && e.GetMetadata().GetDeletionTimestamp() != nil
	})
	controllertest.Eventually(t, "the object with another owner loses the reference to the shoot", func() bool {
		cm := controllertest.Get[*kcorev1.ConfigMap](t, configMaps, ns, "two-owners")
		return cm != nil && len(cm.GetMetadata().GetOwnerReferences()) == 1 && cm.GetMetadata().GetOwnerReferences()[0].GetName() == "keeper"
	})
	if !exists(configMaps, ns, "unknown-owner") {
		t.Error("an object whose owner cannot be resolved was deleted")
	}

	// A cluster-scoped owner and dependent.
	controllertest.Delete(t, projects, "", "dev")
	controllertest.Eventually(t, "the project's namespace is deleted", func() bool {
		n := controllertest.Get[*kcorev1.Namespace](t, namespaces, "", "garden-dev-extra")
		return n == nil || n.GetMetadata().GetDeletionTimestamp() != nil
	})
	// The last owner goes: so does the object.
	controllertest.Delete(t, configMaps, ns, "keeper")
	controllertest.Eventually(t, "the object whose last owner went is deleted", func() bool { return !exists(configMaps, ns, "two-owners") })
}

// TestPropagation: an owner deleted in the foreground waits, behind foregroundDeletion, until its dependents that
// block owner deletion are gone, and its dependents are deleted (a dependent with dependents of its own in the
// foreground too); an owner deleted with Orphan goes once its dependents have lost their references to it, and they
// stay.
func TestPropagation(t *testing.T) {
	reg := controllertest.NewRegistry(t)
	cms := controllertest.Collection(t, reg, "", "configmaps")
	const ns, v1, hold = "garden-dev", "v1", "example.com/hold"
	blocking := func(o store.Object) *metav1.OwnerReference {
		r := owned(o, v1, "ConfigMap")
		r.BlockOwnerDeletion = proto.Bool(true)
		return r
	}
	held := func(m *metav1.ObjectMeta) *metav1.ObjectMeta { m.Finalizers = []string{hold}; return m }
	owner := controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "owner")})
	controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: held(meta(ns, "blocker", blocking(owner)))})
	controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "loose", owned(owner, v1, "ConfigMap"))})
	middle := controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "middle", blocking(owner))})
	controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: held(meta(ns, "leaf", blocking(middle)))})
	keeper := controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "keeper")})
	orphaner := controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "orphaner")})
	controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "orphan", blocking(orphaner))})
	controllertest.Create(t, cms, &kcorev1.ConfigMap{Metadata: meta(ns, "shared", owned(orphaner, v1, "ConfigMap"), owned(keeper, v1, "ConfigMap"))})

	defer startCollector(t, reg)()
	get := func(name string) *kcorev1.ConfigMap { return controllertest.Get[*kcorev1.ConfigMap](t, cms, ns, name) }
	deleting := func(name string) bool {
		o := get(name)
		return o != nil && o.GetMetadata().GetDeletionTimestamp() != nil
	}
	with := func(add string) func([]string) []string {
		return func(fs []string) []string { return append(fs, add) }
	}
	release := func(name string) {
		controllertest.Update(t, cms, ns, name, false, func(o *kcorev1.ConfigMap) { o.Metadata.Finalizers = nil })
	}

	if _, _, err := cms.DeleteFinalizing(t.Context(), ns, "owner", nil, with(api.FinalizerForeground)); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the dependents are deleted, the one with dependents in the foreground", func() bool {
		m := get("middle")
		return get("loose") == nil && deleting("blocker") && deleting("leaf") &&
			m != nil && slices.Contains(m.GetMetadata().GetFinalizers(), api.FinalizerForeground)
	})
	controllertest.Consistently(t, "the owner waits for its blocking dependents", 300*time.Millisecond, func() bool {
		return deleting("owner") && deleting("middle")
	})
	release("leaf")
	controllertest.Eventually(t, "the middle goes with its last dependent", func() bool { return get("middle") == nil })
	if !deleting("owner") {
		t.Fatal("the owner went while a blocking dependent was left")
	}
	release("blocker")
	controllertest.Eventually(t, "the owner goes with its last blocking dependent", func() bool { return get("owner") == nil })

	if _, _, err := cms.DeleteFinalizing(t.Context(), ns, "orphaner", nil, with(api.FinalizerOrphan)); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the orphaning owner goes", func() bool { return get("orphaner") == nil })
	controllertest.Consistently(t, "its dependents stay, without the reference to it", 300*time.Millisecond, func() bool {
		o, s := get("orphan"), get("shared")
		return o != nil && len(o.GetMetadata().GetOwnerReferences()) == 0 && s != nil &&
			len(s.GetMetadata().GetOwnerReferences()) == 1 && s.GetMetadata().GetOwnerReferences()[0].GetName() == "keeper"
	})
}
