package kubeproto

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecode: any protobuf body decodes into JSON or is refused with 400 or 415, never a panic or another error;
// what decodes encodes back to protobuf.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	cm := &corev1.ConfigMap{TypeMeta: kmetav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: kmetav1.ObjectMeta{Name: "c", Namespace: "n"}, Data: map[string]string{"a": "b"}}
	if err := pb.Encode(cm, &buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("k8s\x00"))
	f.Add([]byte("k8s\x00\x0a\x0c\x0a\x02v1\x12\x03Pod"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := Decode(body)
		if err != nil {
			if !apierrors.IsBadRequest(err) && !apierrors.IsUnsupportedMediaType(err) {
				t.Fatalf("want 400 or 415, got %v", err)
			}
			return
		}
		if _, ok := Encode(j); !ok {
			t.Fatalf("decoded %s does not encode back", j)
		}
	})
}
