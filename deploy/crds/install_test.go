package crds

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

// TestInstall installs the CRDs into a real seed, installs them again (nothing changes), upgrades one and goes back.
func TestInstall(t *testing.T) {
	s := seedtest.StartShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := apiextensionsclientset.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := c.ApiextensionsV1().CustomResourceDefinitions()
	cl, err := client.New(s.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}

	if err := Install(ctx, cl); err != nil {
		t.Fatalf("install: %v", err)
	}
	versions := map[string]string{}
	for _, w := range want {
		got, err := api.Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get CRD %s: %v", w.Name, err)
		}
		if !established(got) {
			t.Errorf("CRD %s is not established: %+v", w.Name, got.Status.Conditions)
		}
		if got.Labels[extensionsv1alpha1.LabelDeletionProtected] != "true" {
			t.Errorf("CRD %s labels %v, want %s=true", w.Name, got.Labels, extensionsv1alpha1.LabelDeletionProtected)
		}
		if got.Spec.Scope != w.Spec.Scope || got.Spec.Names.Kind != w.Spec.Names.Kind || len(got.Spec.Versions) != 1 ||
			!reflect.DeepEqual(got.Spec.Versions[0].Schema, w.Spec.Versions[0].Schema) {
			t.Errorf("CRD %s in the seed differs from the embedded one", w.Name)
		}
		versions[w.Name] = got.ResourceVersion
	}

	// Installing again is a no-op: the server keeps every CRD as it is.
	if err := Install(ctx, cl); err != nil {
		t.Fatalf("install again: %v", err)
	}
	for name, rv := range versions {
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != rv {
			t.Errorf("CRD %s changed on the second install: resourceVersion %s, was %s", name, got.ResourceVersion, rv)
		}
	}

	// Upgrade: a newer Extension CRD with one more field and printer column replaces the installed one, and the
	// seed keeps the new field in objects.
	const crdName = "extensions.extensions.gardener.cloud"
	newer, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(newer, func(crd *apiextensionsv1.CustomResourceDefinition) bool { return crd.Name == crdName })
	ext := newer[i]
	spec := ext.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["trellisTest"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	ext.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	ext.Spec.Versions[0].AdditionalPrinterColumns = append(ext.Spec.Versions[0].AdditionalPrinterColumns,
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Test", Type: "string", JSONPath: ".spec.trellisTest"})
	if err := Apply(ctx, cl, newer); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	got, err := api.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["trellisTest"]; !ok {
		t.Fatalf("upgraded CRD lacks spec.trellisTest")
	}
	if cols := got.Spec.Versions[0].AdditionalPrinterColumns; cols[len(cols)-1].Name != "Test" {
		t.Errorf("upgraded CRD printer columns: %+v", cols)
	}
	ns := s.Namespace(t)
	// The seed serves the new schema shortly after the update: retry with new objects until the field survives.
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": extensionsv1alpha1.SchemeGroupVersion.String(), "kind": "Extension",
			"metadata": map[string]any{"generateName": "upgrade-", "namespace": ns},
			"spec":     map[string]any{"type": "test", "trellisTest": "kept"},
		}}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatalf("create Extension with the new field: %v", err)
		}
		if v, _, _ := unstructured.NestedString(u.Object, "spec", "trellisTest"); v == "kept" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spec.trellisTest still pruned after %d tries", n+1)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Installing the shipped CRDs again takes the field back out: Trellis owns it.
	if err := Install(ctx, cl); err != nil {
		t.Fatalf("install after upgrade: %v", err)
	}
	if got, err = api.Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["trellisTest"]; ok {
		t.Errorf("spec.trellisTest still in the CRD after installing the shipped version")
	}
}

// TestApplyFailsClearly checks that a CRD that cannot be established fails Apply with an error naming it.
func TestApplyFailsClearly(t *testing.T) {
	s := seedtest.StartShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(s.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, c); err != nil {
		t.Fatal(err)
	}
	all, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	// A second CRD claiming the plural "workers" of the group under another kind: the names conflict.
	clash := all[len(all)-1].DeepCopy()
	clash.Name = "workerclashes.extensions.gardener.cloud"
	clash.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "workerclashes", Singular: "workerclash", Kind: "WorkerClash", ListKind: "WorkerClashList", ShortNames: []string{"infra"}}
	err = Apply(ctx, c, []*apiextensionsv1.CustomResourceDefinition{clash})
	if err == nil || !strings.Contains(err.Error(), clash.Name) || !strings.Contains(err.Error(), "names not accepted") {
		t.Fatalf("Apply of a clashing CRD: %v; want an error naming %s and its names", err, clash.Name)
	}
}

// TestObjectsRoundTrip creates a fully populated object of every kind with a controller-runtime client and the
// scheme from AddToScheme, writes its status through the status subresource, and reads back what went in.
func TestObjectsRoundTrip(t *testing.T) {
	s := seedtest.StartShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ac, err := client.New(s.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, ac); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := extensionsv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := s.Namespace(t)

	kinds := map[string]bool{}
	for _, want := range fixtures() {
		gvk, err := apiutil.GVKForObject(want, scheme)
		if err != nil {
			t.Fatal(err)
		}
		kinds[gvk.Kind] = true
		t.Run(gvk.Kind, func(t *testing.T) {
			obj := want.DeepCopyObject().(client.Object)
			obj.SetName("rt-" + strings.ToLower(gvk.Kind) + "-" + ns)
			namespaced, err := c.IsObjectNamespaced(obj)
			if err != nil {
				t.Fatal(err)
			}
			if namespaced {
				obj.SetNamespace(ns)
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			if status := field(want, "Status"); status.IsValid() {
				field(obj, "Status").Set(status)
				if err := c.Status().Update(ctx, obj); err != nil {
					t.Fatalf("update status: %v", err)
				}
			}

			got := reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("get: %v", err)
			}
			for _, part := range []string{"Spec", "Status"} {
				if w := field(want, part); w.IsValid() {
					if d := cmp.Diff(w.Interface(), field(got, part).Interface(), semantic...); d != "" {
						t.Errorf("%s read back differs (-want +got):\n%s", part, d)
					}
				}
			}
			if o, ok := got.(extensionsv1alpha1.Object); ok {
				if st := o.GetExtensionStatus(); st.LastOperation == nil || st.LastOperation.State != extensionsv1alpha1.LastOperationStateError {
					t.Errorf("GetExtensionStatus().LastOperation = %+v", st.LastOperation)
				}
				if o.GetExtensionSpec().Type == "" {
					t.Error("GetExtensionSpec().Type is empty")
				}
			}
		})
	}
	for _, o := range extensionsv1alpha1.ObjectKinds() {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			t.Fatal(err)
		}
		if !kinds[gvk.Kind] {
			t.Errorf("no fixture for kind %s", gvk.Kind)
		}
	}

	t.Run("ClusterWithoutSeed", func(t *testing.T) {
		cl := &extensionsv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "no-seed-" + ns},
			Spec: extensionsv1alpha1.ClusterSpec{
				CloudProfile: runtime.RawExtension{Raw: []byte(`{"kind":"CloudProfile"}`)},
				Shoot:        runtime.RawExtension{Raw: []byte(`{"kind":"Shoot"}`)},
			},
		}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatalf("create a Cluster without seed: %v", err)
		}
		got := &extensionsv1alpha1.Cluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cl), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Seed.Raw) != 0 && string(got.Spec.Seed.Raw) != "null" {
			t.Errorf("seed read back as %s", got.Spec.Seed.Raw)
		}
	})

	t.Run("ImmutableClass", func(t *testing.T) {
		obj := &extensionsv1alpha1.Extension{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rt-extension-" + ns}, obj); err != nil {
			t.Fatal(err)
		}
		seed := extensionsv1alpha1.ExtensionClassSeed
		obj.Spec.Class = &seed
		if err := c.Update(ctx, obj); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("changing spec.class: %v, want an immutable error", err)
		}
	})
}

// field returns the named field of the struct obj points to, or an invalid Value.
func field(obj any, name string) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName(name)
}

// semantic compares what the seed gives back by meaning: quantities by value, times by instant, JSON blobs by content.
var semantic = []cmp.Option{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
	cmp.Comparer(func(a, b runtime.RawExtension) bool { return sameJSON(a.Raw, b.Raw) }),
	cmp.Comparer(func(a, b apiextensionsv1.JSON) bool { return sameJSON(a.Raw, b.Raw) }),
}

func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
