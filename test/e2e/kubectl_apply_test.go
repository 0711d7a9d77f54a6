package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientrest "k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// shootGarden makes what a shoot in garden-dev needs on hub h (a hub running the project controller): the
// CloudProfile "local", the project "dev" with its namespace, the CredentialsBinding "local", and the registration of
// the shoots' extension types (provider-local's, calico, the gardenlinux image).
func shootGarden(t *testing.T, h *hubtest.Hub) {
	t.Helper()
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	for _, w := range []struct{ path, body string }{
		{"/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"local"},"spec":{"type":"local","kubernetes":{"versions":[{"version":"1.35.4"}]},
			"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],"machineTypes":[{"name":"m5.large","cpu":"2","gpu":"0","memory":"8Gi"}],
			"regions":[{"name":"local"}]}}`},
		{"/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`},
	} {
		if code, out := h.Do(t, "POST", w.path, w.body); code != 201 {
			t.Fatalf("POST %s: %d %s", w.path, code, out)
		}
	}
	h.WaitNamespace(t, "garden-dev")
	if code, out := h.Do(t, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings",
		`{"metadata":{"name":"local"},"provider":{"type":"local"},"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"local","namespace":"garden-dev"}}`); code != 201 {
		t.Fatalf("credentials binding: %d %s", code, out)
	}
}

// TestKubectlServerSideApply: the real kubectl's `apply --server-side` against the hub creates and updates a
// config map and a Gardener kind, a second field manager's apply of a field the first owns fails with kubectl's
// conflict report and succeeds with --force-conflicts, which moves the field to it; client-go's typed apply
// configurations (ConfigMap), its dynamic client (a Shoot, created and changed by apply) and a controller-runtime
// client apply as well.
func TestKubectlServerSideApply(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	shootGarden(t, h)
	kc := kubectlAs(t, kubectl, h, h.Token)
	ok := func(args ...string) string {
		t.Helper()
		out, code := kc(args...)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	cm := func(a, b string) string {
		return writeTemp(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"`+a+`","b":"`+b+`"}}`)
	}
	contains(t, "apply --server-side (create)", ok("apply", "--server-side", "-f", cm("1", "2")), "configmap/c serverside-applied")
	contains(t, "apply --server-side (update)", ok("apply", "--server-side", "-f", cm("1", "3")), "configmap/c serverside-applied")
	contains(t, "the update's result", ok("get", "configmap", "c", "-o", "jsonpath={.data.b}"), "3")
	profile := writeTemp(t, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local","labels":{"team":"a"}}}`)
	contains(t, "apply --server-side of a Gardener kind", ok("apply", "--server-side", "-f", profile), "cloudprofile.core.gardener.cloud/local serverside-applied")

	// Another manager: kubectl's conflict report, then --force-conflicts takes the field.
	out, code := kc("apply", "--server-side", "--field-manager=other", "-f", cm("9", "3"))
	if code == 0 {
		t.Fatalf("conflicting apply succeeded: %s", out)
	}
	contains(t, "conflicting apply", out, `Apply failed with 1 conflict: conflict with "kubectl": .data.a`, "--force-conflicts")
	ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", cm("9", "3"))
	var got struct {
		Data     map[string]string
		Metadata struct {
			ManagedFields []struct {
				Manager, Operation string
				FieldsV1           map[string]map[string]any
			}
		}
	}
	if err := json.Unmarshal([]byte(ok("get", "configmap", "c", "-o", "json", "--show-managed-fields")), &got); err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, e := range got.Metadata.ManagedFields {
		for f := range e.FieldsV1["f:data"] {
			owner[f] = owner[f] + e.Manager + "/" + e.Operation + " "
		}
	}
	if got.Data["a"] != "9" || owner["f:a"] != "other/Apply " || !strings.Contains(owner["f:b"], "kubectl/Apply") {
		t.Errorf("after --force-conflicts: data %v, owners %v", got.Data, owner)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := &clientrest.Config{Host: h.URL, BearerToken: h.Token, TLSClientConfig: clientrest.TLSClientConfig{CAData: h.CA}}

	// client-go's typed apply configuration.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := cs.CoreV1().ConfigMaps("garden-dev").Apply(ctx, applycorev1.ConfigMap("typed", "garden-dev").WithData(map[string]string{"k": "v"}),
		kmetav1.ApplyOptions{FieldManager: "typed-client"})
	if err != nil || typed.Data["k"] != "v" || len(typed.ManagedFields) != 1 || typed.ManagedFields[0].Manager != "typed-client" {
		t.Fatalf("typed apply: %v %+v", err, typed)
	}
	_, err = cs.CoreV1().ConfigMaps("garden-dev").Apply(ctx, applycorev1.ConfigMap("typed", "garden-dev").WithData(map[string]string{"k": "w"}),
		kmetav1.ApplyOptions{FieldManager: "intruder"})
	if err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Errorf("typed apply of another manager's field: want a conflict, got %v", err)
	}

	// client-go's dynamic client: a Shoot created, then changed, by apply.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shoots := dyn.Resource(schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}).Namespace("garden-dev")
	shoot := func(maximum int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot", "metadata": map[string]any{"name": "applied", "namespace": "garden-dev"},
			"spec": map[string]any{
				"cloudProfile": map[string]any{"name": "local"}, "credentialsBindingName": "local", "region": "local",
				"kubernetes": map[string]any{"version": "1.35.4"},
				"provider":   map[string]any{"type": "local", "workers": []any{map[string]any{"name": "w1", "minimum": int64(1), "maximum": maximum, "machine": map[string]any{"type": "m5.large"}}}},
				"networking": map[string]any{"type": "calico", "nodes": "10.0.0.0/16"},
			},
		}}
	}
	created, err := shoots.Apply(ctx, "applied", shoot(2), kmetav1.ApplyOptions{FieldManager: "dynamic-client"})
	if err != nil {
		t.Fatalf("dynamic apply (create) of a shoot: %v", err)
	}
	changed, err := shoots.Apply(ctx, "applied", shoot(5), kmetav1.ApplyOptions{FieldManager: "dynamic-client"})
	if err != nil {
		t.Fatalf("dynamic apply (update) of a shoot: %v", err)
	}
	workers, _, _ := unstructured.NestedSlice(changed.Object, "spec", "provider", "workers")
	if len(workers) != 1 || workers[0].(map[string]any)["maximum"] != int64(5) || changed.GetGeneration() != created.GetGeneration()+1 {
		t.Errorf("shoot after the second apply: workers %v, generation %d after %d", workers, changed.GetGeneration(), created.GetGeneration())
	}

	// A controller-runtime client's Apply.
	crc, err := ctrlclient.New(cfg, ctrlclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cr", "namespace": "garden-dev"}, "data": map[string]any{"x": "1"}}}
	if err := crc.Apply(ctx, ctrlclient.ApplyConfigurationFromUnstructured(u), ctrlclient.FieldOwner("controller")); err != nil {
		t.Fatalf("controller-runtime apply: %v", err)
	}
	contains(t, "controller-runtime's apply", ok("get", "configmap", "cr", "-o", "jsonpath={.data.x}"), "1")
}

// TestKubectlPrintsWarnings: the real kubectl prints the hub's warnings as it prints kube-apiserver's and
// gardener-apiserver's: Gardener's warnings for a shoot that sets deprecated fields, and the unknown fields that
// `--validate=warn` (fieldValidation=Warn) dropped, while the objects are written.
func TestKubectlPrintsWarnings(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	shootGarden(t, h)
	kc := kubectlAs(t, kubectl, h, h.Token)
	shoot := writeTemp(t, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"warned"},
		"spec":{"cloudProfile":{"name":"local"},"credentialsBindingName":"local","region":"local",
		"kubernetes":{"version":"1.35.4","kubeAPIServer":{"enableAnonymousAuthentication":false},"kubeProxy":{"mode":"IPVS"}},
		"provider":{"type":"local","workers":[{"name":"w1","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]},
		"networking":{"type":"calico","nodes":"10.0.0.0/16"}}}`)
	out, code := kc("create", "-f", shoot)
	if code != 0 {
		t.Fatalf("kubectl create: exit %d\n%s", code, out)
	}
	contains(t, "kubectl create of a shoot with deprecated fields", out,
		"shoot.core.gardener.cloud/warned created",
		"Warning: you are setting the spec.kubernetes.kubeAPIServer.enableAnonymousAuthentication field. The field is deprecated.",
		"Warning: you are using IPVS mode for kube-proxy. The IPVS mode is deprecated starting with Kubernetes 1.35.")

	cm := writeTemp(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w","colour":"red"},"data":{"a":"1"},"spam":true}`)
	out, code = kc("create", "--validate=warn", "-f", cm)
	if code != 0 {
		t.Fatalf("kubectl create --validate=warn: exit %d\n%s", code, out)
	}
	contains(t, "kubectl create --validate=warn", out, `Warning: unknown field "metadata.colour"`, `Warning: unknown field "spam"`, "configmap/w created")
	if out, code = kc("create", "--validate=strict", "-f", cm); code == 0 || !strings.Contains(out, "unknown field") {
		t.Errorf("kubectl create --validate=strict of unknown fields: exit %d\n%s", code, out)
	}
}
