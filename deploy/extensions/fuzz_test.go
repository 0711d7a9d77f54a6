package extensions_test

import (
	"encoding/json"
	"testing"

	"github.com/trellis-dev/trellis/deploy/extensions"
)

// FuzzDocuments: any manifest either fails with an error or yields objects whose JSON is an object with the
// apiVersion, kind and name the document reports.
func FuzzDocuments(f *testing.F) {
	f.Add(extensions.ProviderLocal)
	f.Add([]byte("---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, manifest []byte) {
		docs, err := extensions.Documents(manifest)
		if err != nil {
			return
		}
		for i, d := range docs {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(d.JSON, &head); err != nil {
				t.Fatalf("document %d: JSON %q does not decode: %v", i, d.JSON, err)
			}
			if head.APIVersion != d.APIVersion || head.Kind != d.Kind || head.Metadata.Name != d.Name || d.Name == "" {
				t.Fatalf("document %d reports %s %s %s, its JSON says %+v", i, d.APIVersion, d.Kind, d.Name, head)
			}
		}
	})
}
