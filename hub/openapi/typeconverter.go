package openapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TypeConverter returns server-side apply's type converter over the v2 document's definitions: the schemas
// structured-merge-diff merges and tracks fields by, as kube-apiserver builds it from its own OpenAPI models. Lists
// with map keys (listkeys.go) merge by them, other lists are atomic, maps and objects are merged field by field.
func TypeConverter(docs *Documents) (managedfields.TypeConverter, error) {
	defs := make(map[string]*spec.Schema, len(docs.V2.Definitions))
	for name, d := range docs.V2.Definitions {
		defs[name] = &d
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		return nil, fmt.Errorf("openapi: server-side apply's type converter: %w", err)
	}
	return tc, nil
}
