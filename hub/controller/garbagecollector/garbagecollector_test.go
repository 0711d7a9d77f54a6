package garbagecollector_test

import (
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

	var kinds []garbagecollector.Kind
	for _, k := range api.Kinds {
		kinds = append(kinds, garbagecollector.Kind{GroupKind: k.GroupKind(), GroupResource: k.GroupResource(), Namespaced: k.Namespaced})
	}
	c, err := garbagecollector.New(garbagecollector.Config{Source: reg, Kinds: kinds, OwnerIndex: api.IndexOwnerUID})
	if err != nil {
		t.Fatal(err)
	}
	defer controllertest.Start(t, c)()
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
