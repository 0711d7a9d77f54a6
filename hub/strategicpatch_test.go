package hub_test

import (
	"encoding/json"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestStrategicMergePatch: a strategic merge patch merges a shoot's workers by name and its extensions by type (the
// merge keys of the hub's OpenAPI schema), honours $patch: delete on a keyed element, and replaces unkeyed lists
// (a worker's zones); a JSON merge patch of the same document replaces the workers.
func TestStrategicMergePatch(t *testing.T) {
	h := hubtest.Start(t)
	garden(t, h)
	h.RegisterExtensions(t, "extensions-x-y", "Extension/x", "Extension/y")
	mustDo(t, h, 201, "POST", shoots, shoot("s", "garden-dev", "1.35.4"))
	type worker struct {
		Name    string
		Maximum int
		Zones   []string
	}
	var got struct {
		Spec struct {
			Provider   struct{ Workers []worker }
			Extensions []struct{ Type string }
		}
	}
	patch := func(ct, body string) {
		t.Helper()
		code, out := h.Do(t, "PATCH", shoots+"/s", body, "Content-Type", ct)
		if code != 200 {
			t.Fatalf("PATCH %s %s: %d %s", ct, body, code, out)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
	}
	const strategic = "application/strategic-merge-patch+json"
	patch(strategic, `{"spec":{"provider":{"workers":[{"name":"w2","minimum":1,"maximum":3,"machine":{"type":"m5.large"},"zones":["a","b"]}]},"extensions":[{"type":"x"}]}}`)
	patch(strategic, `{"spec":{"provider":{"workers":[{"name":"w2","maximum":4,"zones":["c"]}]},"extensions":[{"type":"y"}]}}`)
	byName := map[string]worker{}
	for _, w := range got.Spec.Provider.Workers {
		byName[w.Name] = w
	}
	if w2 := byName["w2"]; len(byName) != 2 || byName["w1"].Maximum != 2 || w2.Maximum != 4 || len(w2.Zones) != 1 || w2.Zones[0] != "c" {
		t.Errorf("workers after strategic merge patches: %+v", got.Spec.Provider.Workers)
	}
	if e := got.Spec.Extensions; len(e) != 2 {
		t.Errorf("extensions after strategic merge patches: %+v", e)
	}
	patch(strategic, `{"spec":{"provider":{"workers":[{"name":"w1","$patch":"delete"}]}}}`)
	if w := got.Spec.Provider.Workers; len(w) != 1 || w[0].Name != "w2" {
		t.Errorf("workers after $patch: delete of w1: %+v", w)
	}
	patch("application/merge-patch+json", `{"spec":{"provider":{"workers":[{"name":"w3","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]}}}`)
	if w := got.Spec.Provider.Workers; len(w) != 1 || w[0].Name != "w3" {
		t.Errorf("workers after a JSON merge patch: %+v", w)
	}
}
