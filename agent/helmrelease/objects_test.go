package helmrelease

import (
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// An object that exists without this release's ownership metadata is not taken over: the install fails naming it
// and records nothing; once the object carries the metadata (as Helm's adoption asks), the install proceeds.
func TestApplyOwnership(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns}, Data: map[string]string{"greeting": "mine"}}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch := configMapChart(t, "0.1.0", nil)
	_, _, err := m.Apply(ctx, ch, "ext", ns, nil)
	if err == nil || !strings.Contains(err.Error(), `ConfigMap "ext" in namespace "`+ns+`" exists and cannot be imported`) || !strings.Contains(err.Error(), "meta.helm.sh/release-name") {
		t.Fatalf("Apply over a foreign object = %v, want the ownership conflict", err)
	}
	if got := releaseSecrets(t, s.Client, ns, "ext"); len(got) != 0 {
		t.Errorf("release secrets after the conflict = %v, want none", got)
	}
	if got := greetingOf(t, s.Client, ns, "ext"); got != "mine" {
		t.Errorf("the foreign object was changed: greeting %q", got)
	}

	// Another release's object is refused too.
	foreign, err = s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreign.Labels = map[string]string{managedByLabel: managedByHelm}
	foreign.Annotations = map[string]string{releaseNameAnnotation: "other", releaseNsAnnotation: ns}
	if foreign, err = s.Client.CoreV1().ConfigMaps(ns).Update(ctx, foreign, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Apply(ctx, ch, "ext", ns, nil); err == nil || !strings.Contains(err.Error(), `current value is "other"`) {
		t.Fatalf("Apply over another release's object = %v, want the ownership conflict", err)
	}

	// Adopted: the metadata names this release.
	foreign.Annotations[releaseNameAnnotation] = "ext"
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Update(ctx, foreign, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rel, changed, err := m.Apply(ctx, ch, "ext", ns, nil)
	if err != nil || !changed || rel.Version != 1 || greetingOf(t, s.Client, ns, "ext") != "default" {
		t.Fatalf("Apply over an adoptable object: %v, changed %v, %v", err, changed, rel)
	}
}

// An upgrade deletes the objects the new chart no longer has, except one whose live object says
// helm.sh/resource-policy: keep; an uninstall keeps what the manifest marks keep. Every object carries Helm's
// ownership metadata and is applied by the agent's field manager.
func TestApplyDroppedObjects(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	cm := func(name, annotations string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" + annotations
	}
	v1 := configMapChart(t, "0.1.0", chartFiles{
		"templates/dropped.yaml": cm("dropped", ""),
		"templates/kept.yaml":    cm("kept", ""),
		"templates/stays.yaml":   cm("stays", "  annotations:\n    helm.sh/resource-policy: keep\n"),
	})
	if _, _, err := m.Apply(ctx, v1, "ext", ns, nil); err != nil {
		t.Fatal(err)
	}
	live, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "dropped", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.Labels[managedByLabel] != managedByHelm || live.Annotations[releaseNameAnnotation] != "ext" || live.Annotations[releaseNsAnnotation] != ns {
		t.Errorf("ownership metadata of an object: labels %v, annotations %v", live.Labels, live.Annotations)
	}
	if !slices.ContainsFunc(live.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == fieldManager && f.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("managed fields %v lack an apply by %s", live.ManagedFields, fieldManager)
	}
	kept, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept.Annotations[resourcePolicyAnnotion] = resourcePolicyKeep
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	v2 := configMapChart(t, "0.2.0", chartFiles{"templates/stays.yaml": cm("stays", "  annotations:\n    helm.sh/resource-policy: keep\n")})
	if rel, _, err := m.Apply(ctx, v2, "ext", ns, nil); err != nil || rel.Version != 2 {
		t.Fatalf("upgrade: %v, %v", err, rel)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "dropped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dropped ConfigMap after the upgrade: %v, want NotFound", err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap annotated keep after the upgrade dropped it: %v", err)
	}

	if err := m.Uninstall(ctx, "ext", ns); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "stays", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap the manifest marks keep after Uninstall: %v", err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "ext", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap ext after Uninstall: %v, want NotFound", err)
	}
}

// A chart's crds/ are created before its objects, which then map; the release's records are Helm's, readable by its
// own storage driver, with the chart digest label kept apart from Helm's system labels.
func TestApplyCRDs(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	group := strings.ToLower(strings.ReplaceAll(ns, "-", "")) + ".trellis.test"
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.` + group + `
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
	ch := buildChart(t, "widgets", chartFiles{
		"Chart.yaml":                chartYAML("widgets", "1.0.0"),
		"crds/widgets.yaml":         crd,
		"templates/widget.yaml":     "apiVersion: " + group + "/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: {{ .Values.size }}\n",
		"templates/NOTES.txt":       "Installed {{ .Release.Name }}.\n",
		"templates/hook-check.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hook\n  annotations:\n    helm.sh/hook: post-install\n",
	})
	rel, _, err := m.Apply(ctx, ch, "widgets", ns, map[string]any{"size": 3})
	if err != nil {
		t.Fatal(err)
	}
	if rel.Info.Notes != "Installed widgets.\n" || len(rel.Hooks) != 1 || strings.Contains(rel.Manifest, "hook") || strings.Contains(rel.Manifest, "CustomResourceDefinition") {
		t.Errorf("release: notes %q, %d hooks, manifest:\n%s", rel.Info.Notes, len(rel.Hooks), rel.Manifest)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "hook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("hook ConfigMap: %v, want it not run (NotFound)", err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 3 {
		t.Errorf("widget size = %d, want 3", size)
	}

	stored, err := helmStorage(s.Client, ns).Deployed("widgets")
	if err != nil {
		t.Fatalf("Helm's driver reading the record: %v", err)
	}
	if stored.Version != 1 || stored.Info.Status != release.StatusDeployed || stored.Manifest != rel.Manifest ||
		stored.Labels[ChartDigestLabel] != chartDigestLabelValue(archiveDigest(ch)) || stored.Config["size"] != 3.0 {
		t.Errorf("record read by Helm: revision %d, status %s, labels %v, values %v", stored.Version, stored.Info.Status, stored.Labels, stored.Config)
	}
	if time.Since(stored.Info.LastDeployed.Time) > time.Hour {
		t.Errorf("last deployed %v", stored.Info.LastDeployed)
	}
}
