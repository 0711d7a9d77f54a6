package openapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	openapidocs "github.com/trellis-dev/trellis/docs/openapi"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/openapi"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

func readDocs(t *testing.T) *openapi.Documents {
	t.Helper()
	docs, err := openapi.Read(openapidocs.FS)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// withoutDescriptions is a document's JSON as a generic value without "description" keys: what a build from the
// linked descriptors (which carry no comments) gives too.
func withoutDescriptions(t *testing.T, doc any) any {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	// Without its description, a field's {"allOf": [{"$ref": ...}]} is the reference itself.
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "description")
			for k, e := range x {
				x[k] = strip(e)
			}
			if all, ok := x["allOf"].([]any); ok && len(x) == 1 && len(all) == 1 {
				return all[0]
			}
		case []any:
			for i, e := range x {
				x[i] = strip(e)
			}
		}
		return v
	}
	return strip(v)
}

// The checked-in documents are the ones the linked protos and kind table give (make checkgenerate checks this too,
// with comments; this catches a stale docs/openapi in any test run).
func TestDocumentsCurrent(t *testing.T) {
	built, err := openapi.Build(protoregistry.GlobalFiles, api.Kinds)
	if err != nil {
		t.Fatal(err)
	}
	docs := readDocs(t)
	if !reflect.DeepEqual(withoutDescriptions(t, built.V2), withoutDescriptions(t, docs.V2)) {
		t.Error("docs/openapi/swagger.json is out of date; run make generate")
	}
	if len(built.V3) != len(docs.V3) {
		t.Errorf("%d v3 documents checked in, %d built", len(docs.V3), len(built.V3))
	}
	for key, doc := range built.V3 {
		if !reflect.DeepEqual(withoutDescriptions(t, doc), withoutDescriptions(t, docs.V3[key])) {
			t.Errorf("v3 document %s is out of date; run make generate", key)
		}
	}
}

func TestPathsOfEveryKind(t *testing.T) {
	docs := readDocs(t)
	for _, k := range api.Kinds {
		root := "/apis/" + k.Group + "/" + k.Version
		if k.Group == "" {
			root = "/api/" + k.Version
		}
		coll := root
		if k.Namespaced {
			coll += "/namespaces/{namespace}"
		}
		coll += "/" + k.Resource
		want := map[string][]string{coll: {"get", "post"}, coll + "/{name}": {"get", "put", "patch", "delete"}}
		if k.Status {
			want[coll+"/{name}/status"] = []string{"put", "patch"}
		}
		if k.Binding {
			want[coll+"/{name}/binding"] = []string{"put", "patch"}
		}
		for p, methods := range want {
			item, ok := docs.V2.Paths.Paths[p]
			if !ok {
				t.Errorf("%s: no path %s", k.Kind, p)
				continue
			}
			ops := map[string]*spec.Operation{"get": item.Get, "post": item.Post, "put": item.Put, "patch": item.Patch, "delete": item.Delete}
			for _, m := range methods {
				op := ops[m]
				if op == nil {
					t.Errorf("%s %s: no operation", m, p)
					continue
				}
				gvk, _ := op.Extensions["x-kubernetes-group-version-kind"].(map[string]any)
				if gvk["kind"] != k.Kind || gvk["version"] != k.Version || gvk["group"] != k.Group {
					t.Errorf("%s %s: x-kubernetes-group-version-kind %v", m, p, gvk)
				}
				if op.Responses.Default == nil || op.Responses.Default.Schema.Ref.String() != "#/definitions/trellis.meta.v1.Status" {
					t.Errorf("%s %s: errors are not described as Status", m, p)
				}
			}
		}
		if _, ok := docs.V3[strings.TrimPrefix(root, "/")]; !ok {
			t.Errorf("%s: no v3 document %s", k.Kind, strings.TrimPrefix(root, "/"))
		}
	}
	if got := docs.V2.Paths.Paths["/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots"].Get.ID; got != "listCoreGardenerCloudV1beta1NamespacedShoot" {
		t.Errorf("operation id %q, want kube-apiserver's listCoreGardenerCloudV1beta1NamespacedShoot", got)
	}
}

// schemaChecker checks JSON values against the v2 document's definitions: every property must be described (unless
// the schema preserves unknown fields) and every value must have the described JSON type.
type schemaChecker struct {
	defs spec.Definitions
}

func (c schemaChecker) resolve(s spec.Schema) spec.Schema {
	for {
		if ref := s.Ref.String(); ref != "" {
			s = c.defs[strings.TrimPrefix(ref, "#/definitions/")]
			continue
		}
		if len(s.AllOf) == 1 && len(s.Properties) == 0 && len(s.Type) == 0 {
			s = s.AllOf[0]
			continue
		}
		return s
	}
}

func (c schemaChecker) check(path string, v any, s spec.Schema) []string {
	s = c.resolve(s)
	if s.Extensions["x-kubernetes-preserve-unknown-fields"] == true && len(s.Type) == 0 {
		return nil
	}
	if s.Extensions["x-kubernetes-int-or-string"] == true {
		switch v.(type) {
		case string, float64:
			return nil
		}
		return []string{fmt.Sprintf("%s: %T is not an int or string", path, v)}
	}
	typ := ""
	if len(s.Type) == 1 {
		typ = s.Type[0]
	}
	switch x := v.(type) {
	case map[string]any:
		if typ != "object" {
			return []string{fmt.Sprintf("%s: an object where the schema says %q", path, typ)}
		}
		var errs []string
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch {
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				errs = append(errs, c.check(path+"["+k+"]", x[k], *s.AdditionalProperties.Schema)...)
			case s.Properties != nil:
				ps, ok := s.Properties[k]
				if !ok {
					errs = append(errs, fmt.Sprintf("%s.%s: not in the schema", path, k))
					continue
				}
				errs = append(errs, c.check(path+"."+k, x[k], ps)...)
			case s.Extensions["x-kubernetes-preserve-unknown-fields"] == true:
			default:
				errs = append(errs, fmt.Sprintf("%s.%s: the schema has no properties", path, k))
			}
		}
		return errs
	case []any:
		if typ != "array" {
			return []string{fmt.Sprintf("%s: an array where the schema says %q", path, typ)}
		}
		var errs []string
		for i, e := range x {
			errs = append(errs, c.check(fmt.Sprintf("%s[%d]", path, i), e, *s.Items.Schema)...)
		}
		return errs
	case string:
		if typ != "string" {
			return []string{fmt.Sprintf("%s: a string where the schema says %q", path, typ)}
		}
	case float64:
		if typ != "integer" && typ != "number" && !(typ == "string" && s.Format == "quantity") {
			return []string{fmt.Sprintf("%s: a number where the schema says %q", path, typ)}
		}
		if typ == "integer" && x != float64(int64(x)) {
			return []string{fmt.Sprintf("%s: %v is not an integer", path, x)}
		}
	case bool:
		if typ != "boolean" {
			return []string{fmt.Sprintf("%s: a boolean where the schema says %q", path, typ)}
		}
	}
	return nil
}

// kindSchema finds the definition marked with the kind's group, version and kind.
func kindSchema(t *testing.T, defs spec.Definitions, apiVersion, kind string) (spec.Schema, bool) {
	t.Helper()
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	for _, d := range defs {
		gvks, _ := d.Extensions["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == group && m["version"] == version && m["kind"] == kind {
				return d, true
			}
		}
	}
	return spec.Schema{}, false
}

// Gardener's own example manifests are described by the document: every field they set is in the schema with its
// JSON type, both as written and as the hub writes them back (kjson).
func TestGardenerExamplesMatchSchema(t *testing.T) {
	docs := readDocs(t)
	c := schemaChecker{defs: docs.V2.Definitions}
	files, err := filepath.Glob(filepath.Join(gardenerexamples.Dir(t), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(raw), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
				continue
			}
			obj = gardenerexamples.Fill(obj).(map[string]any)
			apiVersion, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			s, ok := kindSchema(t, docs.V2.Definitions, apiVersion, kind)
			if !ok {
				continue // component configurations and kinds the hub does not serve
			}
			name := fmt.Sprintf("%s#%d %s", filepath.Base(f), i, kind)
			for _, e := range c.check(kind, obj, s) {
				t.Errorf("%s as written: %s", name, e)
			}
			m := gardenerexamples.KindMessage(apiVersion, kind)
			j, _ := json.Marshal(obj)
			if err := kjson.Unmarshal(j, m); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			out, err := kjson.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var back any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			for _, e := range c.check(kind, back, s) {
				t.Errorf("%s as the hub writes it: %s", name, e)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Fatalf("only %d example objects checked", checked)
	}
}

// The checker is not blind: a wrong type and an unknown field are found.
func TestSchemaCheckerFindsMismatches(t *testing.T) {
	docs := readDocs(t)
	c := schemaChecker{defs: docs.V2.Definitions}
	s, ok := kindSchema(t, docs.V2.Definitions, "core.gardener.cloud/v1beta1", "Shoot")
	if !ok {
		t.Fatal("no Shoot definition")
	}
	shoot := map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": "a", "generation": "1"},
		"spec": map[string]any{"region": 5.0, "provider": map[string]any{"type": "local", "workers": []any{
			map[string]any{"name": "w", "maximum": 1.5, "bogus": true, "maxSurge": "25%"},
		}}},
	}
	got := strings.Join(c.check("Shoot", shoot, s), "\n")
	for _, want := range []string{
		"Shoot.metadata.generation: a string where the schema says \"integer\"",
		"Shoot.spec.region: a number where the schema says \"string\"",
		"Shoot.spec.provider.workers[0].maximum: 1.5 is not an integer",
		"Shoot.spec.provider.workers[0].bogus: not in the schema",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "maxSurge") {
		t.Errorf("maxSurge is an int-or-string:\n%s", got)
	}
}
