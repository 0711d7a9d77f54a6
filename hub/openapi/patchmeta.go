package openapi

import (
	"encoding/json"
	"fmt"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/util/proto"
)

// PatchMeta returns the strategic-merge patch meta of the kinds' messages (by full name) from the v2 document, as
// kubectl and kube-apiserver build it from OpenAPI: lists marked with x-kubernetes-patch-merge-key (listMapKeys)
// merge by their key, other lists are replaced.
func PatchMeta(docs *Documents) (func(protoreflect.FullName) (strategicpatch.LookupPatchMeta, bool), error) {
	raw, err := json.Marshal(docs.V2)
	if err != nil {
		return nil, fmt.Errorf("openapi: encode the v2 document: %w", err)
	}
	doc, err := openapiv2.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: parse the v2 document: %w", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: models of the v2 document: %w", err)
	}
	return func(name protoreflect.FullName) (strategicpatch.LookupPatchMeta, bool) {
		s := models.LookupModel(string(name))
		if s == nil {
			return nil, false
		}
		return strategicpatch.NewPatchMetaFromOpenAPI(s), true
	}, nil
}
