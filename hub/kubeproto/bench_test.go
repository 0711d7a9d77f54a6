package kubeproto

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cost of the translation through k8s.io/api's types, per ConfigMap of ten entries: go test -bench . ./hub/kubeproto
func benchConfigMap(b *testing.B) []byte {
	cm := &corev1.ConfigMap{TypeMeta: kmetav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: kmetav1.ObjectMeta{Name: "c", Namespace: "n", Labels: map[string]string{"app": "x"}}, Data: map[string]string{}}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		cm.Data[k] = "value-" + k
	}
	var buf bytes.Buffer
	if err := pb.Encode(cm, &buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkDecode(b *testing.B) {
	body := benchConfigMap(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	j, err := Decode(benchConfigMap(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Encode(j); !ok {
			b.Fatal("not encoded")
		}
	}
}
