package extensions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/deploy/extensions"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// providerLocal decodes the two documents strictly into the hub's protos, as the REST gateway does.
func providerLocal(t *testing.T) (*corev1.ControllerDeployment, *corev1beta1.ControllerRegistration, []extensions.Document) {
	t.Helper()
	docs, err := extensions.ProviderLocalDocuments()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want the ControllerDeployment and the ControllerRegistration", len(docs))
	}
	want := [][2]string{{"core.gardener.cloud/v1", "ControllerDeployment"}, {"core.gardener.cloud/v1beta1", "ControllerRegistration"}}
	for i, d := range docs {
		if d.APIVersion != want[i][0] || d.Kind != want[i][1] || d.Name != "provider-local" {
			t.Fatalf("document %d is %s %s %s, want %s %s provider-local", i, d.APIVersion, d.Kind, d.Name, want[i][0], want[i][1])
		}
	}
	cd := &corev1.ControllerDeployment{}
	if err := kjson.Unmarshal(docs[0].JSON, cd); err != nil {
		t.Fatalf("ControllerDeployment: %v", err)
	}
	cr := &corev1beta1.ControllerRegistration{}
	if err := kjson.Unmarshal(docs[1].JSON, cr); err != nil {
		t.Fatalf("ControllerRegistration: %v", err)
	}
	return cd, cr, docs
}

// TestProviderLocalDecodes checks that both objects are kinds the hub serves, decode strictly into the messages the
// Gardener examples decode into, and write back as the same JSON: nothing in the file is lost or reinterpreted.
func TestProviderLocalDecodes(t *testing.T) {
	_, _, docs := providerLocal(t)
	for _, d := range docs {
		if _, ok := api.KindFor(d.APIVersion, d.Kind); !ok {
			t.Errorf("the hub does not serve %s %s", d.APIVersion, d.Kind)
		}
		msg := gardenerexamples.KindMessage(d.APIVersion, d.Kind)
		if msg == nil {
			t.Fatalf("no message for %s %s", d.APIVersion, d.Kind)
		}
		if err := kjson.Unmarshal(d.JSON, msg); err != nil {
			t.Fatalf("%s: %v", d.Kind, err)
		}
		back, err := kjson.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		var sent, got any
		if err := json.Unmarshal(d.JSON, &sent); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sent, got) {
			t.Errorf("%s does not round-trip:\n file %s\n back %s", d.Kind, d.JSON, back)
		}
	}
}

// TestProviderLocalAdmission runs the hub's defaulting and validation of both kinds on the objects, as a create.
func TestProviderLocalAdmission(t *testing.T) {
	cd, cr, _ := providerLocal(t)
	for _, obj := range []store.Object{cd, cr} {
		p := admission.Builtin().For(obj)
		if p.Validate == nil {
			t.Fatalf("%T has no validation", obj)
		}
		if p.Default != nil {
			p.Default(obj)
		}
		if errs := p.Validate(context.Background(), nil, obj, nil); len(errs) > 0 {
			t.Errorf("%T: %v", obj, errs.ToAggregate())
		}
	}

	// The same validation refuses what Gardener refuses, so passing it means something.
	cr.GetSpec().GetResources()[0].Kind = "Bogus"
	cd.GetHelm().RawChart = nil
	for _, obj := range []store.Object{cd, cr} {
		if errs := admission.Builtin().For(obj).Validate(context.Background(), nil, obj, nil); len(errs) == 0 {
			t.Errorf("%T: a broken object passes validation", obj)
		}
	}
}

// TestProviderLocalContent checks what the objects say: the registration points at the deployment, which carries the
// current provider-local chart.
func TestProviderLocalContent(t *testing.T) {
	cd, cr, _ := providerLocal(t)
	refs := cr.GetSpec().GetDeployment().GetDeploymentRefs()
	if len(refs) != 1 || refs[0].GetName() != cd.GetMetadata().GetName() {
		t.Errorf("deploymentRefs %v, want [%s]", refs, cd.GetMetadata().GetName())
	}
	if p := cr.GetSpec().GetDeployment().GetPolicy(); p != "OnDemand" {
		t.Errorf("policy %q, want OnDemand", p)
	}
	for _, r := range cr.GetSpec().GetResources() {
		if r.GetType() != "local" {
			t.Errorf("resource %s has type %q, want local", r.GetKind(), r.GetType())
		}
	}
	if v := string(cd.GetHelm().GetValues().GetRaw()); v != "{}" {
		t.Errorf("helm.values %s, want {}", v)
	}
	chart, err := charts.Archive(charts.ProviderLocal)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cd.GetHelm().GetRawChart(), chart) {
		t.Errorf("helm.rawChart is not the current deploy/charts/provider-local; run `make generate`")
	}
	c, err := loader.LoadArchive(bytes.NewReader(cd.GetHelm().GetRawChart()))
	if err != nil {
		t.Fatalf("helm cannot load helm.rawChart: %v", err)
	}
	if c.Name() != "provider-local" {
		t.Errorf("chart %q", c.Name())
	}
}

// TestProviderLocalApply creates both objects on a real hub over REST, as the local landscape or curl does, and reads
// them back.
func TestProviderLocalApply(t *testing.T) {
	_, _, docs := providerLocal(t)
	h := hubtest.Start(t)
	for _, d := range docs {
		k, ok := api.KindFor(d.APIVersion, d.Kind)
		if !ok {
			t.Fatalf("%s %s not served", d.APIVersion, d.Kind)
		}
		path := "/apis/" + k.APIVersion() + "/" + k.Resource
		if code, body := h.Do(t, "POST", path, d.JSON); code != 201 {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
		code, body := h.Do(t, "GET", path+"/"+d.Name, nil)
		if code != 200 {
			t.Fatalf("GET %s/%s: %d %s", path, d.Name, code, body)
		}
		var sent, got map[string]any
		if err := json.Unmarshal(d.JSON, &sent); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		for key, v := range sent {
			if key == "metadata" {
				continue // the hub adds uid, resourceVersion, creationTimestamp, ...
			}
			if key == "spec" && d.Kind == "ControllerRegistration" {
				continue // defaulted (primary), compared below
			}
			if !reflect.DeepEqual(v, got[key]) {
				t.Errorf("%s %s: sent %v, read back %v", d.Kind, key, v, got[key])
			}
		}
	}
	code, body := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/controllerregistrations/provider-local", nil)
	if code != 200 {
		t.Fatalf("GET: %d %s", code, body)
	}
	cr := &corev1beta1.ControllerRegistration{}
	if err := kjson.Unmarshal(body, cr); err != nil {
		t.Fatal(err)
	}
	_, want, _ := providerLocal(t)
	if got, want := len(cr.GetSpec().GetResources()), len(want.GetSpec().GetResources()); got != want {
		t.Errorf("%d resources read back, sent %d", got, want)
	}
	for i, r := range cr.GetSpec().GetResources() {
		w := want.GetSpec().GetResources()[i]
		if r.GetKind() != w.GetKind() || r.GetType() != w.GetType() {
			t.Errorf("resource %d: read back %s/%s, sent %s/%s", i, r.GetKind(), r.GetType(), w.GetKind(), w.GetType())
		}
	}
}

func TestDocuments(t *testing.T) {
	docs, err := extensions.Documents([]byte(`# a comment only
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
data: {k: v}
---
---
# another comment
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].Name != "a" || docs[1].Name != "b" || docs[0].Kind != "ConfigMap" || docs[0].APIVersion != "v1" {
		t.Fatalf("documents %+v", docs)
	}
	if string(docs[0].JSON) != `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a"}}` {
		t.Errorf("JSON %s", docs[0].JSON)
	}

	for name, manifest := range map[string]string{
		"no kind":       "apiVersion: v1\nmetadata: {name: a}\n",
		"no name":       "apiVersion: v1\nkind: ConfigMap\n",
		"not an object": "- a\n- b\n",
		"duplicate key": "apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: a}\n",
		"bad YAML":      "apiVersion: v1\nkind: [\n",
	} {
		if _, err := extensions.Documents([]byte(manifest)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "document 0") {
			t.Errorf("%s: error %q does not name the document", name, err)
		}
	}
}
