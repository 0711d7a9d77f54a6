package kubeconfig

import (
	"testing"

	"google.golang.org/protobuf/proto"

	authenticationv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/authentication/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// FuzzRequest: a request body decodes as the REST gateway decodes it (Kubernetes' JSON) or is refused, never a panic;
// what decodes either names an apiVersion/kind that checkType refuses, or gets an expiration in Gardener's range,
// or a field error naming spec.expirationSeconds.
func FuzzRequest(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"authentication.gardener.cloud/v1alpha1","kind":"AdminKubeconfigRequest","spec":{"expirationSeconds":600}}`))
	f.Add([]byte(`{"spec":{"expirationSeconds":-1}}`))
	f.Add([]byte(`{"spec":{"expirationSeconds":4294967296}}`))
	f.Add([]byte(`{"spec":{}}`))
	f.Add([]byte(`{}`)) // no spec at all: the default (found by the fuzzer)
	f.Add([]byte(`{"kind":"Pod","metadata":{"name":"x"}}`))
	f.Add([]byte(`{"spec":{"expirationSeconds":"600"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req authenticationv1alpha1.AdminKubeconfigRequest
		if err := kjson.Unmarshal(body, &req); err != nil {
			return
		}
		if err := checkType(req.GetApiVersion(), req.GetKind(), "AdminKubeconfigRequest"); err != nil {
			return
		}
		v, ferr := Expiration(req.GetSpec())
		if ferr != nil {
			if ferr.Field != "spec.expirationSeconds" {
				t.Fatalf("error on field %q", ferr.Field)
			}
			return
		}
		if v < MinExpirationSeconds || v > MaxExpirationSeconds {
			t.Fatalf("expiration %d accepted", v)
		}
		if (req.GetSpec() == nil || req.GetSpec().ExpirationSeconds == nil) && v != DefaultExpirationSeconds {
			t.Fatalf("default %d", v)
		}
		if _, err := kjson.Marshal(proto.Clone(&req)); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}
