package extension

import (
	"encoding/json"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// RawExtension converts a RawExtension of the hub (JSON) into the seed's, for an extension object's spec; nil when
// r is nil or empty. It copies the bytes.
func RawExtension(r *metav1.RawExtension) *runtime.RawExtension {
	if r == nil || len(r.GetRaw()) == 0 {
		return nil
	}
	return &runtime.RawExtension{Raw: slices.Clone(r.GetRaw())}
}

// SameJSON reports whether two JSON documents of extension objects (providerConfig, providerStatus) are equal as
// values: the seed's kube-apiserver and the hub may order keys and space them differently. Absent, empty and null
// are equal; a document that is not JSON is compared as bytes.
func SameJSON(a, b *runtime.RawExtension) bool {
	ra, rb := rawOf(a), rawOf(b)
	if len(ra) == 0 || len(rb) == 0 {
		return len(ra) == len(rb)
	}
	var va, vb any
	if json.Unmarshal(ra, &va) != nil || json.Unmarshal(rb, &vb) != nil {
		return string(ra) == string(rb)
	}
	return reflect.DeepEqual(va, vb)
}

// rawOf is r's JSON, nil for absent and null.
func rawOf(r *runtime.RawExtension) []byte {
	if r == nil || string(r.Raw) == "null" {
		return nil
	}
	return r.Raw
}
