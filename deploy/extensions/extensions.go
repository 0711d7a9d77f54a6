package extensions

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ProviderLocalFile is the path of provider-local's generated manifest, relative to this package's directory.
const ProviderLocalFile = "provider-local/controller-registration.yaml"

// ProviderLocal is provider-local's generated manifest: the ControllerDeployment provider-local, then the
// ControllerRegistration provider-local, as YAML documents. Callers must not change it.
//
//go:embed provider-local/controller-registration.yaml
var ProviderLocal []byte

// Document is one object of a manifest.
type Document struct {
	// APIVersion, Kind and Name identify the object.
	APIVersion, Kind, Name string
	// JSON is the whole object as compact JSON.
	JSON []byte
}

// ProviderLocalDocuments returns the objects of ProviderLocal: the ControllerDeployment, then the
// ControllerRegistration.
func ProviderLocalDocuments() ([]Document, error) {
	docs, err := Documents(ProviderLocal)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ProviderLocalFile, err)
	}
	return docs, nil
}

// Documents splits a multi-document YAML manifest ("---" between documents) into its objects, in order, each
// converted to JSON. Documents holding nothing (only comments) are skipped; one that is not an object with
// apiVersion, kind and metadata.name, or that repeats a key, is an error.
func Documents(manifest []byte) ([]Document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var out []Document
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if string(bytes.TrimSpace(j)) == "null" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(j, &head); err != nil {
			return nil, fmt.Errorf("document %d is not an object: %w", i, err)
		}
		if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" {
			return nil, fmt.Errorf("document %d lacks apiVersion, kind or metadata.name", i)
		}
		out = append(out, Document{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, JSON: j})
	}
}
