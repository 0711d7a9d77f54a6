package controllerinstallation

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzValues: a ControllerDeployment's helm.values, as the hub stores them (any JSON), are either refused or merged
// under the injected gardener block, which always wins, while every other top-level value is kept.
func FuzzValues(f *testing.F) {
	f.Add([]byte(`{"replicaCount":0,"config":{"logLevel":"debug"}}`))
	f.Add([]byte(`{"gardener":{"version":"spoofed","seed":{"extra":1}}}`))
	f.Add([]byte(`{"gardener":"not a map"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`null`))
	injected := map[string]any{"gardener": map[string]any{"version": "v1", "seed": map[string]any{"name": "local"}}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var values map[string]any
		if err := json.Unmarshal(raw, &values); err != nil {
			return
		}
		merged := mergeMaps(values, injected)
		g, ok := merged["gardener"].(map[string]any)
		if !ok || g["version"] != "v1" || g["seed"].(map[string]any)["name"] != "local" {
			t.Fatalf("the injected block lost: %v", merged["gardener"])
		}
		for k, v := range values {
			if k != "gardener" && !reflect.DeepEqual(merged[k], v) {
				t.Fatalf("value %s changed: %v → %v", k, v, merged[k])
			}
		}
		if _, err := json.Marshal(merged); err != nil {
			t.Fatalf("merged values do not encode: %v", err)
		}
	})
}
