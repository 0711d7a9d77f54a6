package landscape

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/hub/api"
)

// The example resources, one object per file, applied in the order of their names.
//
//go:embed examples/*.yaml
var examplesFS embed.FS

// Example is one example resource.
type Example struct {
	// File is the name of the manifest in examples/.
	File string
	// Kind is the hub's kind of the object.
	Kind api.Kind
	// Namespace and Name name the object.
	Namespace, Name string
	// JSON is the manifest in JSON.
	JSON []byte
}

// Path is the REST path of the example's collection.
func (e Example) Path() string {
	p := "/apis/" + e.Kind.Group + "/" + e.Kind.Version
	if e.Kind.Group == "" {
		p = "/api/" + e.Kind.Version
	}
	if e.Kind.Namespaced {
		p += "/namespaces/" + e.Namespace
	}
	return p + "/" + e.Kind.Resource
}

// Examples returns the example resources in the order they are applied: namespace garden-local, project local,
// cloud profile local, provider secret garden-local/local, credentials binding garden-local/local and shoot
// garden-local/local.
func Examples() ([]Example, error) {
	files, err := fs.Glob(examplesFS, "examples/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Example
	for _, f := range files {
		y, err := examplesFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(y)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		k, ok := api.KindFor(head.APIVersion, head.Kind)
		if !ok {
			return nil, fmt.Errorf("%s: %s %s is not served by the hub", f, head.APIVersion, head.Kind)
		}
		out = append(out, Example{File: path.Base(f), Kind: k, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name, JSON: js})
	}
	return out, nil
}

// ExampleShoot is the example shoot among Examples (garden-local/local).
func ExampleShoot() (Example, error) {
	exs, err := Examples()
	if err != nil {
		return Example{}, err
	}
	for _, e := range exs {
		if e.Kind.Kind == "Shoot" {
			return e, nil
		}
	}
	return Example{}, fmt.Errorf("the examples have no shoot")
}

// applyExamples creates the example resources that do not exist (the shoot only withShoot); existing ones are left as
// they are, so a user's changes survive a restart.
func (l *Landscape) applyExamples(ctx context.Context) error {
	return applyExamples(ctx, l.hubc, l.logf, !l.cfg.ExamplesWithoutShoot)
}

func applyExamples(ctx context.Context, c *hubClient, logf func(string, ...any), withShoot bool) error {
	exs, err := Examples()
	if err != nil {
		return err
	}
	for _, e := range exs {
		if e.Kind.Kind == "Shoot" && !withShoot {
			continue
		}
		created, err := c.create(ctx, e.Path(), e.JSON)
		if err != nil {
			return fmt.Errorf("example %s: %w", e.File, err)
		}
		what := "exists"
		if created {
			what = "created"
		}
		name := e.Name
		if e.Namespace != "" {
			name = e.Namespace + "/" + name
		}
		logf("example %s %s %s", e.Kind.Kind, name, what)
	}
	return nil
}
