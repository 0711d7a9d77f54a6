package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/trellis-dev/trellis/deploy/extensions"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
)

// TestGeneratedIsCurrent fails when the committed (and embedded) manifest differs from what the generator writes now,
// as `make checkgenerate` does.
func TestGeneratedIsCurrent(t *testing.T) {
	want, err := renderProviderLocal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(extensions.ProviderLocal, want) {
		t.Fatalf("%s is stale: run `make generate` (or go run ./deploy/extensions/gen) and commit it", providerLocalOut)
	}
	again, err := renderProviderLocal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, again) {
		t.Fatal("two runs of the generator differ")
	}
	onDisk, err := os.ReadFile(filepath.Join("..", extensions.ProviderLocalFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want) {
		t.Fatalf("%s on disk differs from what the generator writes", providerLocalOut)
	}
}

// TestResourcesAreLocalKinds checks that the ControllerRegistration lists exactly what provider-local serves: every
// kind of local.Kinds() with type local, sorted by kind.
func TestResourcesAreLocalKinds(t *testing.T) {
	chart := []byte("chart")
	cd, cr := providerLocalObjects(chart)
	if !bytes.Equal(cd.GetHelm().GetRawChart(), chart) {
		t.Error("the chart is not inline in helm.rawChart")
	}
	var kinds []string
	for _, r := range cr.GetSpec().GetResources() {
		if r.GetType() != local.Type {
			t.Errorf("%s: type %q, want %q", r.GetKind(), r.GetType(), local.Type)
		}
		kinds = append(kinds, r.GetKind())
	}
	want := slices.Sorted(slices.Values(local.Kinds()))
	if !slices.Equal(kinds, want) {
		t.Errorf("resources %q, want %q", kinds, want)
	}

	// And so does the generated file.
	docs, err := extensions.ProviderLocalDocuments()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents", len(docs))
	}
	gen, err := toYAML(cr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(extensions.ProviderLocal, gen) {
		t.Error("the generated file does not hold the ControllerRegistration of local.Kinds()")
	}
}

// TestMainWrites runs the command with -out.
func TestMainWrites(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sub", "cr.yaml")
	old := os.Args
	t.Cleanup(func() { os.Args = old })
	os.Args = []string{"gen", "-out", out}
	main()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, extensions.ProviderLocal) {
		t.Error("main wrote something else than the embedded manifest")
	}
}
