package kjson

import "sigs.k8s.io/yaml"

// YAMLToJSON converts a YAML document to JSON (sigs.k8s.io/yaml, as kubectl does), for manifests. Decode the result
// with Unmarshal.
func YAMLToJSON(y []byte) ([]byte, error) {
	return yaml.YAMLToJSON(y)
}
