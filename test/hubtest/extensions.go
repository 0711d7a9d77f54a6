package hubtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/extsdk/provider/local"
)

// LocalExtensions are the kinds and types provider-local registers (its generated ControllerRegistration: every kind
// it serves, type local), as "Kind/type" for RegisterExtensions.
func LocalExtensions() []string {
	var out []string
	for _, k := range local.Kinds() {
		out = append(out, k+"/local")
	}
	return out
}

// RegisterExtensions creates the ControllerRegistration name registering each "Kind/type" of resources as primary,
// without a deployment: the hub then admits shoots, seeds, BackupBuckets and BackupEntries naming those types, as
// Gardener's ExtensionValidator does once an extension is registered. The hub makes ControllerInstallations of it for
// the seeds that need its types, as for any registration.
func (h *Hub) RegisterExtensions(t testing.TB, name string, resources ...string) {
	t.Helper()
	body := Registration(t, name, resources...)
	if code, out := h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/controllerregistrations", body); code != 201 {
		t.Fatalf("register extensions %s: %d %s", name, code, out)
	}
}

// Registration is the JSON of ControllerRegistration name registering each "Kind/type" of resources as primary,
// without a deployment, for hubs that RegisterExtensions cannot reach (hub processes).
func Registration(t testing.TB, name string, resources ...string) []byte {
	t.Helper()
	type resource struct {
		Kind string `json:"kind"`
		Type string `json:"type"`
	}
	var res []resource
	for _, r := range resources {
		kind, typ, ok := strings.Cut(r, "/")
		if !ok || kind == "" || typ == "" {
			t.Fatalf("RegisterExtensions: %q is not Kind/type", r)
		}
		res = append(res, resource{Kind: kind, Type: typ})
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "ControllerRegistration",
		"metadata": map[string]string{"name": name}, "spec": map[string]any{"resources": res},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}
