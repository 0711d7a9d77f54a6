package ctl

import (
	"testing"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestSameAt(t *testing.T) {
	cm := func(rv string, labels map[string]string, data map[string]string) *kcorev1.ConfigMap {
		return &kcorev1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap", Metadata: &metav1.ObjectMeta{Name: "a", ResourceVersion: rv, Labels: labels}, Data: data}
	}
	before := cm("1", map[string]string{"x": "1"}, map[string]string{"k": "v", "l": "w"})
	doc := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`
	for _, c := range []struct {
		name  string
		after *kcorev1.ConfigMap
		doc   string
		same  bool
	}{
		{"only the version and an unnamed field moved", cm("2", map[string]string{"x": "2"}, map[string]string{"k": "v", "l": "w"}), doc, true},
		{"a named field changed", cm("2", nil, map[string]string{"k": "v2", "l": "w"}), doc, false},
		{"a map named as a whole", cm("2", nil, map[string]string{"k": "v"}), `{"data":"x"}`, false},
		{"a field removed with null", cm("2", map[string]string{"x": "1"}, map[string]string{"l": "w"}), `{"data":{"k":null}}`, false},
	} {
		same, err := sameAt([]byte(c.doc), before, c.after)
		if err != nil || same != c.same {
			t.Errorf("%s: %v %v", c.name, same, err)
		}
	}
}
