package review

import (
	"bytes"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzDecode: a review body in any content type decodes or is refused with 400 or 415, never a panic or another
// error; what decodes re-encodes in every type the reviews are served as and decodes back.
func FuzzDecode(f *testing.F) {
	f.Add("application/json", []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"shoots"}}}`))
	f.Add("application/yaml", []byte("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec: {nonResourceAttributes: {verb: get, path: /apis}}\n"))
	f.Add("application/vnd.kubernetes.protobuf", []byte("k8s\x00\n\x00"))
	f.Add("application/json", []byte(`{"apiVersion":"v1","kind":"Pod"}`))
	f.Add("text/plain", []byte(`x`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		var rev authzv1.SelfSubjectAccessReview
		err := decode(contentType, body, authzv1.SchemeGroupVersion, &rev)
		if err != nil {
			if !apierrors.IsBadRequest(err) && !apierrors.IsUnsupportedMediaType(err) {
				t.Fatalf("decode(%q): want 400 or 415, got %v", contentType, err)
			}
			return
		}
		for _, mt := range mediaTypes() {
			info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
			var buf bytes.Buffer
			if err := codecs.WithoutConversion().EncoderForVersion(info.Serializer, authzv1.SchemeGroupVersion).Encode(&rev, &buf); err != nil {
				t.Fatalf("encode %s: %v", mt, err)
			}
			var back authzv1.SelfSubjectAccessReview
			if err := decode(mt, buf.Bytes(), authzv1.SchemeGroupVersion, &back); err != nil {
				t.Fatalf("decode of the %s encoding: %v\n%q", mt, err, buf.Bytes())
			}
		}
	})
}
