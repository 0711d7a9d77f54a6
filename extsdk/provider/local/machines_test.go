package local

import (
	"maps"
	"testing"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// TestNodeLabels: a machine's Node gets the pool label and the pool's labels, except those a kubelet may not set
// (kubernetes.io and k8s.io, which NodeRestriction keeps; asking for one would stop the kubelet from starting).
func TestNodeLabels(t *testing.T) {
	got := nodeLabels(extensionsv1alpha1.WorkerPool{Name: "pool", Labels: map[string]string{
		"team": "a", "example.com/tier": "web", "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "x",
		"topology.k8s.io/zone": "z", "k8s.io/x": "y",
	}})
	want := map[string]string{LabelPool: "pool", "team": "a", "example.com/tier": "web"}
	if !maps.Equal(got, want) {
		t.Errorf("nodeLabels = %v, want %v", got, want)
	}
}
