package api

import (
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	openapidocs "github.com/trellis-dev/trellis/docs/openapi"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// typeConverter is server-side apply's type converter over the hub's OpenAPI schemas, as the hub builds it.
func typeConverter(t testing.TB) managedfields.TypeConverter {
	t.Helper()
	raw, err := openapidocs.FS.ReadFile("swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc spec.Swagger
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	defs := map[string]*spec.Schema{}
	for name, d := range doc.Definitions {
		defs[name] = &d
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// FuzzApply feeds server-side apply patches to the apply path of a ConfigMap and a Shoot (the field managers over
// the hub's OpenAPI schemas, as the hub builds them): it must never panic; a patch is refused with a Kubernetes
// status (400, 409), or the merged object decodes as the kind and carries managedFields that decode.
func FuzzApply(f *testing.F) {
	tc := typeConverter(f)
	type target struct {
		kind Kind
		live string
		new  func() proto.Message
	}
	var targets []target
	for _, tg := range []struct {
		apiVersion, kind, live string
		new                    func() proto.Message
	}{
		{"v1", "ConfigMap", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n","managedFields":[{"manager":"a","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]},"data":{"a":"1"}}`,
			func() proto.Message { return &kcorev1.ConfigMap{} }},
		{"core.gardener.cloud/v1beta1", "Shoot", `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"s","namespace":"n","managedFields":[{"manager":"a","operation":"Apply","apiVersion":"core.gardener.cloud/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:provider":{"f:workers":{"k:{\"name\":\"w1\"}":{".":{},"f:name":{},"f:maximum":{}}}}}}}]},"spec":{"provider":{"type":"local","workers":[{"name":"w1","maximum":2}]}}}`,
			func() proto.Message { return &corev1beta1.Shoot{} }},
	} {
		k, ok := KindFor(tg.apiVersion, tg.kind)
		if !ok {
			f.Fatalf("no kind %s %s", tg.apiVersion, tg.kind)
		}
		targets = append(targets, target{k, tg.live, tg.new})
	}
	managers := map[string]*managedfields.FieldManager{}
	for _, tg := range targets {
		fms, err := newFieldManagers(tc, tg.kind)
		if err != nil {
			f.Fatal(err)
		}
		managers[tg.kind.id()] = fms[""]
	}
	f.Add(uint8(0), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"2\"\n"), false)
	f.Add(uint8(0), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"x":"y"}},"data":{"b":"1"}}`), true)
	f.Add(uint8(1), []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"s"},"spec":{"provider":{"workers":[{"name":"w2","maximum":3},{"name":"w1","maximum":5}]}}}`), false)
	f.Add(uint8(1), []byte("apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nspec:\n  provider:\n    workers:\n    - name: w1\n    - name: w1\n"), true)
	f.Add(uint8(1), []byte("apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\nmetadata:\n  managedFields: []\nspec: {regoin: x}\n"), false)
	f.Fuzz(func(t *testing.T, which uint8, patch []byte, force bool) {
		tg := targets[int(which)%len(targets)]
		applied, err := parseApplyPatch(patch)
		if err == nil {
			var out []byte
			out, err = applyPatch(managers[tg.kind.id()], tg.kind.GroupVersionKind(), []byte(tg.live), applied, "fuzz", force)
			if err == nil {
				if err := kjson.Unmarshal(out, tg.new()); err != nil {
					return // what the kind's decoder refuses is a 422 of the write
				}
				u, err := jsonToUnstructured(out, tg.kind.GroupVersionKind())
				if err != nil {
					t.Fatalf("merged object %s is not an object: %v", out, err)
				}
				if err := managedfields.ValidateManagedFields(u.GetManagedFields()); err != nil {
					t.Fatalf("merged object %s has invalid managedFields: %v", out, err)
				}
				return
			}
		}
		var st apierrors.APIStatus
		if !errors.As(err, &st) {
			t.Fatalf("patch %q refused without a status: %v", patch, err)
		}
	})
}
