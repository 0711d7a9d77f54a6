package extsdk

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// FuzzDecodeCluster feeds arbitrary JSON as a Cluster's shoot, seed and cloud profile: decoding never panics, an
// error names the field it is about, and a decoded shoot encodes and decodes to the same shoot.
func FuzzDecodeCluster(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"a","annotations":{"confirmation.gardener.cloud/force-deletion":"true"}},"spec":{"hibernation":{"enabled":true}},"status":{"lastOperation":{"state":"Failed"}}}`),
		[]byte(`{"metadata":{"name":"local"},"spec":{"provider":{"type":"local"}}}`), []byte(`null`))
	f.Add([]byte(`{"spec":{"provider":{"workers":[{"minimum":"x"}]}}}`), []byte(`[]`), []byte(`{"spec":{"machineTypes":[{"cpu":2}]}}`))
	f.Add([]byte(``), []byte(`{"future":{"field":1}}`), []byte(`"str"`))
	f.Fuzz(func(t *testing.T, shoot, seed, profile []byte) {
		obj := &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: shoot}, Seed: runtime.RawExtension{Raw: seed}, CloudProfile: runtime.RawExtension{Raw: profile}}}
		c, err := DecodeCluster(obj)
		if err != nil {
			if !strings.Contains(err.Error(), "cluster spec.") {
				t.Fatalf("error does not name the field: %v", err)
			}
			return
		}
		_ = c.ShootFailed() || c.ShootForceDeletion() || c.ShootHibernated()
		if c.Shoot == nil {
			return
		}
		b, err := kjson.Marshal(c.Shoot)
		if err != nil {
			t.Fatalf("re-encode decoded shoot: %v", err)
		}
		again, err := DecodeCluster(&extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: b}}})
		if err != nil {
			t.Fatalf("decode re-encoded shoot %s: %v", b, err)
		}
		b2, _ := kjson.Marshal(again.Shoot)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the shoot:\n%s\n%s", b, b2)
		}
	})
}
