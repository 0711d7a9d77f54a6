package crds

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// gardenerKinds are the plurals of Gardener's extension kinds that Trellis defines. Gardener's seed-crds directory
// also holds selfhostedshootexposures (GEP-28), which Trellis does not define.
var gardenerKinds = []string{
	"backupbuckets", "backupentries", "bastions", "clusters", "containerruntimes", "controlplanes", "dnsrecords",
	"extensions", "infrastructures", "networks", "operatingsystemconfigs", "workers",
}

// TestCompatibleWithGardener checks every CRD against Gardener's: names, scope, version, status subresource, and
// every schema node Gardener defines (see compareSchema). All differences are reported at once, path by path.
func TestCompatibleWithGardener(t *testing.T) {
	dir := gardenerCRDDir(t)
	ours, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range ours {
		byName[crd.Name] = crd
	}
	others, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range others {
		plural := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "10-crd-extensions.gardener.cloud_"), ".yaml")
		if !slices.Contains(gardenerKinds, plural) {
			t.Logf("not compared: %s (a kind Trellis does not define)", filepath.Base(f))
		}
	}
	if len(ours) != len(gardenerKinds) {
		t.Errorf("got %d CRDs, want %d (one per kind in %v)", len(ours), len(gardenerKinds), gardenerKinds)
	}
	for _, plural := range gardenerKinds {
		t.Run(plural, func(t *testing.T) {
			want, err := readCRD(filepath.Join(dir, "10-crd-extensions.gardener.cloud_"+plural+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			got := byName[want.Name]
			if got == nil {
				t.Fatalf("no CRD %s in deploy/crds", want.Name)
			}
			if diffs := compareCRD(want, got); len(diffs) > 0 {
				t.Errorf("CRD %s differs from Gardener's in %d places:\n%s", want.Name, len(diffs), strings.Join(diffs, "\n"))
			}
			if got.Labels["gardener.cloud/deletion-protected"] != "true" {
				t.Errorf("CRD %s lacks label gardener.cloud/deletion-protected=true: %v", got.Name, got.Labels)
			}
		})
	}
}

// TestCompareDetectsDifferences makes sure the comparison can fail: it damages copies of Gardener's Worker and
// OperatingSystemConfig CRDs and expects exactly the damaged paths to be reported.
func TestCompareDetectsDifferences(t *testing.T) {
	dir := gardenerCRDDir(t)
	for _, tc := range []struct {
		plural string
		damage func(crd *apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{
			plural: "workers",
			damage: func(crd *apiextensionsv1.CustomResourceDefinition) {
				setProp(root(crd), "spec", func(spec *apiextensionsv1.JSONSchemaProps) {
					pool := spec.Properties["pools"].Items.Schema // a pointer: changes stick
					setProp(pool, "kubeletConfig", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "maxPods") })
					setProp(pool, "minimum", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "string"; s.Format = "" })
					setProp(pool, "maxSurge", func(s *apiextensionsv1.JSONSchemaProps) { s.XIntOrString = false })
					setProp(pool, "labels", func(s *apiextensionsv1.JSONSchemaProps) { s.AdditionalProperties = nil })
				})
				crd.Spec.Scope = apiextensionsv1.ClusterScoped
			},
			want: []string{
				"scope: Gardener Namespaced, ours Cluster",
				".spec.pools[].kubeletConfig.maxPods: missing (Gardener: integer)",
				".spec.pools[].labels: additionalProperties: Gardener has them, ours not",
				".spec.pools[].maxSurge: x-kubernetes-int-or-string: Gardener true, ours false",
				".spec.pools[].minimum: format: Gardener \"int32\", ours \"\"",
				".spec.pools[].minimum: type: Gardener \"integer\", ours \"string\"",
			},
		},
		{
			plural: "operatingsystemconfigs",
			damage: func(crd *apiextensionsv1.CustomResourceDefinition) {
				setProp(root(crd), "spec", func(spec *apiextensionsv1.JSONSchemaProps) {
					setProp(spec, "providerConfig", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = nil })
					setProp(spec, "units", func(s *apiextensionsv1.JSONSchemaProps) { s.Items = nil })
					spec.Required = slices.DeleteFunc(spec.Required, func(r string) bool { return r == "purpose" })
				})
				setProp(root(crd), "status", func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "cloudConfig") })
				crd.Spec.Versions[0].Subresources = nil
			},
			want: []string{
				"subresources.status: Gardener true, ours false",
				".spec: required: Gardener [purpose type], ours [type]",
				".spec.providerConfig: x-kubernetes-preserve-unknown-fields: Gardener true, ours false",
				".spec.units: items: Gardener has them, ours not",
				".status.cloudConfig: missing (Gardener: object)",
			},
		},
	} {
		t.Run(tc.plural, func(t *testing.T) {
			want, err := readCRD(filepath.Join(dir, "10-crd-extensions.gardener.cloud_"+tc.plural+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if diffs := compareCRD(want, want.DeepCopy()); len(diffs) > 0 {
				t.Fatalf("a CRD differs from itself: %v", diffs)
			}
			damaged := want.DeepCopy()
			tc.damage(damaged)
			got := compareCRD(want, damaged)
			sort.Strings(got)
			sort.Strings(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("differences found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// compareCRD returns the differences of got from want (Gardener's): group, names, scope, the v1alpha1 version and its
// status subresource, and the schema (compareSchema). Fields only ours has are not differences.
func compareCRD(want, got *apiextensionsv1.CustomResourceDefinition) []string {
	var diffs []string
	check := func(what string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			diffs = append(diffs, fmt.Sprintf("%s: Gardener %v, ours %v", what, w, g))
		}
	}
	check("group", want.Spec.Group, got.Spec.Group)
	check("scope", want.Spec.Scope, got.Spec.Scope)
	check("names.kind", want.Spec.Names.Kind, got.Spec.Names.Kind)
	check("names.listKind", want.Spec.Names.ListKind, got.Spec.Names.ListKind)
	check("names.plural", want.Spec.Names.Plural, got.Spec.Names.Plural)
	check("names.singular", want.Spec.Names.Singular, got.Spec.Names.Singular)
	check("names.shortNames", want.Spec.Names.ShortNames, got.Spec.Names.ShortNames)
	for _, wv := range want.Spec.Versions {
		i := slices.IndexFunc(got.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == wv.Name
		})
		if i < 0 {
			diffs = append(diffs, fmt.Sprintf("version %s: missing", wv.Name))
			continue
		}
		gv := got.Spec.Versions[i]
		check("version "+wv.Name+" served", wv.Served, gv.Served)
		check("version "+wv.Name+" storage", wv.Storage, gv.Storage)
		check("subresources.status", hasStatus(wv), hasStatus(gv))
		if wv.Schema == nil || wv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if gv.Schema == nil || gv.Schema.OpenAPIV3Schema == nil {
			diffs = append(diffs, fmt.Sprintf("version %s: no schema", wv.Name))
			continue
		}
		diffs = append(diffs, compareSchema("", wv.Schema.OpenAPIV3Schema, gv.Schema.OpenAPIV3Schema)...)
	}
	return diffs
}

func hasStatus(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return v.Subresources != nil && v.Subresources.Status != nil
}

// compareSchema walks want (Gardener's schema node at path) and returns where got differs: every property Gardener
// defines must exist in ours with the same type, format, required list, items, additionalProperties,
// x-kubernetes-preserve-unknown-fields and x-kubernetes-int-or-string, recursively. Descriptions, validations and
// properties only ours has do not count.
func compareSchema(path string, want, got *apiextensionsv1.JSONSchemaProps) []string {
	var diffs []string
	at := path
	if at == "" {
		at = "."
	}
	add := func(format string, args ...any) {
		diffs = append(diffs, at+": "+fmt.Sprintf(format, args...))
	}
	if want.Type != got.Type {
		add("type: Gardener %q, ours %q", want.Type, got.Type)
	}
	if want.Format != got.Format {
		add("format: Gardener %q, ours %q", want.Format, got.Format)
	}
	if w, g := preserves(want), preserves(got); w != g {
		add("x-kubernetes-preserve-unknown-fields: Gardener %t, ours %t", w, g)
	}
	if want.XIntOrString != got.XIntOrString {
		add("x-kubernetes-int-or-string: Gardener %t, ours %t", want.XIntOrString, got.XIntOrString)
	}
	if w, g := sorted(want.Required), sorted(got.Required); !slices.Equal(w, g) {
		add("required: Gardener %v, ours %v", w, g)
	}

	names := make([]string, 0, len(want.Properties))
	for name := range want.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := want.Properties[name]
		g, ok := got.Properties[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s.%s: missing (Gardener: %s)", path, name, typeOf(&w)))
			continue
		}
		diffs = append(diffs, compareSchema(path+"."+name, &w, &g)...)
	}

	switch {
	case want.Items == nil:
	case want.Items.Schema == nil:
		add("items: Gardener has a list of schemas, which this comparison does not handle")
	case got.Items == nil || got.Items.Schema == nil:
		add("items: Gardener has them, ours not")
	default:
		diffs = append(diffs, compareSchema(path+"[]", want.Items.Schema, got.Items.Schema)...)
	}

	switch {
	case want.AdditionalProperties == nil:
	case got.AdditionalProperties == nil:
		add("additionalProperties: Gardener has them, ours not")
	case want.AdditionalProperties.Allows != got.AdditionalProperties.Allows:
		add("additionalProperties allowed: Gardener %t, ours %t", want.AdditionalProperties.Allows, got.AdditionalProperties.Allows)
	case want.AdditionalProperties.Schema == nil:
	case got.AdditionalProperties.Schema == nil:
		add("additionalProperties: Gardener has a schema, ours not")
	default:
		diffs = append(diffs, compareSchema(path+"{}", want.AdditionalProperties.Schema, got.AdditionalProperties.Schema)...)
	}
	return diffs
}

func preserves(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.Type != "":
		return s.Type
	case s.XIntOrString:
		return "int-or-string"
	case preserves(s):
		return "any (preserve-unknown-fields)"
	}
	return "untyped"
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// root returns the schema of the first version of crd; tests use it to damage copies.
func root(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// setProp changes the property name of parent through f. Properties holds values, so the changed copy is written back.
func setProp(parent *apiextensionsv1.JSONSchemaProps, name string, f func(*apiextensionsv1.JSONSchemaProps)) {
	p, ok := parent.Properties[name]
	if !ok {
		panic("no property " + name)
	}
	f(&p)
	parent.Properties[name] = p
}

// gardenerCRDDir returns Gardener's seed CRD directory, <module root>/../shared/gardener/seed-crds, and skips the test
// when it is missing (a checkout without the shared reference material).
func gardenerCRDDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("no go.mod at or above %s", wd)
		}
		root = parent
	}
	dir := filepath.Join(root, "..", "shared", "gardener", "seed-crds")
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		t.Skipf("Gardener's seed CRDs are not at %s: nothing to compare with", dir)
	} else if err != nil {
		t.Fatal(err)
	}
	return dir
}

// readCRD reads a CRD manifest; unknown fields are tolerated, Gardener's files may be newer than our types.
func readCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	if crd.Name == "" {
		return nil, fmt.Errorf("%s: not a named CustomResourceDefinition", path)
	}
	return crd, nil
}
