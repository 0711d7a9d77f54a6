package extsdk_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
)

// example returns one of Gardener's example manifests as JSON, placeholders filled, with extra top-level fields.
func example(t *testing.T, file string, extra map[string]any) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	gardenerexamples.Fill(m)
	for k, v := range extra {
		m[k] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeCluster decodes Gardener's own example Shoot, Seed and CloudProfile as a Cluster holds them.
func TestDecodeCluster(t *testing.T) {
	shoot := example(t, "90-shoot.yaml", map[string]any{
		// A field the Trellis API does not know (a newer Gardener's) must not break decoding.
		"someFutureField": map[string]any{"x": 1},
		"status": map[string]any{"lastOperation": map[string]any{
			"type": "Reconcile", "state": "Failed", "progress": 10, "description": "x", "lastUpdateTime": "2026-01-01T00:00:00Z"}},
	})
	cl := &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
		Shoot:        runtime.RawExtension{Raw: shoot},
		Seed:         runtime.RawExtension{Raw: example(t, "50-seed.yaml", nil)},
		CloudProfile: runtime.RawExtension{Raw: example(t, "30-cloudprofile.yaml", nil)},
	}}
	c, err := extsdk.DecodeCluster(cl)
	if err != nil {
		t.Fatal(err)
	}
	if c.Resource != cl || c.Shoot.GetMetadata().GetName() != "crazy-botany" || c.Shoot.GetSpec().GetRegion() != "europe-central-1" ||
		c.Seed.GetMetadata().GetName() != "my-seed" || c.CloudProfile.GetSpec().GetType() != "local" {
		t.Errorf("decoded shoot %q region %q, seed %q, cloud profile type %q", c.Shoot.GetMetadata().GetName(),
			c.Shoot.GetSpec().GetRegion(), c.Seed.GetMetadata().GetName(), c.CloudProfile.GetSpec().GetType())
	}
	if !c.ShootFailed() {
		t.Error("ShootFailed is false for a Failed last operation")
	}

	// Empty parts decode to nil; broken JSON is an error naming the field.
	c, err = extsdk.DecodeCluster(&extensionsv1alpha1.Cluster{})
	if err != nil || c.Shoot != nil || c.Seed != nil || c.CloudProfile != nil {
		t.Errorf("empty Cluster: %+v, %v", c, err)
	}
	_, err = extsdk.DecodeCluster(&extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(`{"spec":{"region":7}}`)}}})
	if err == nil || !strings.Contains(err.Error(), "spec.shoot") {
		t.Errorf("broken shoot: %v", err)
	}
}

func TestClusterHelpers(t *testing.T) {
	var none *extsdk.Cluster
	if none.ShootFailed() || none.ShootForceDeletion() || none.ShootHibernated() {
		t.Error("a nil Cluster says yes")
	}
	decode := func(shoot string) *extsdk.Cluster {
		t.Helper()
		c, err := extsdk.DecodeCluster(&extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: []byte(shoot)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for shoot, want := range map[string]bool{
		`{"metadata":{"annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`:  true,
		`{"metadata":{"annotations":{"confirmation.gardener.cloud/force-deletion":"TRUE"}}}`:  true,
		`{"metadata":{"annotations":{"confirmation.gardener.cloud/force-deletion":"false"}}}`: false,
		`{"metadata":{"annotations":{"confirmation.gardener.cloud/force-deletion":"yes"}}}`:   false,
		`{"metadata":{}}`: false,
	} {
		if got := decode(shoot).ShootForceDeletion(); got != want {
			t.Errorf("%s: force deletion %v", shoot, got)
		}
	}
	if !decode(`{"spec":{"hibernation":{"enabled":true}}}`).ShootHibernated() {
		t.Error("hibernation enabled not seen")
	}
	if decode(`{"status":{"lastOperation":{"type":"Reconcile","state":"Error","progress":1,"description":"x","lastUpdateTime":"2026-01-01T00:00:00Z"}}}`).ShootFailed() {
		t.Error("an Error shoot is Failed")
	}
}
