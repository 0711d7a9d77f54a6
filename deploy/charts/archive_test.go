package charts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/trellis-dev/trellis/deploy/charts"
)

// entry is one file of an archive, with what must be fixed about it.
type entry struct {
	name    string
	mode    int64
	modTime time.Time
	uid     int
	gid     int
	uname   string
	data    []byte
}

// readArchive checks the gzip header (no name, comment or time) and returns the tar entries in their order.
func readArchive(t *testing.T, archive []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if zr.Name != "" || zr.Comment != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header has name %q, comment %q, time %v; want none", zr.Name, zr.Comment, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s: type %q, want only regular files", h.Name, h.Typeflag)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{name: h.Name, mode: h.Mode, modTime: h.ModTime, uid: h.Uid, gid: h.Gid, uname: h.Uname + h.Gname, data: data})
	}
	return out
}

func TestArchiveDeterministic(t *testing.T) {
	a, err := charts.Archive(charts.ProviderLocal)
	if err != nil {
		t.Fatal(err)
	}
	b, err := charts.Archive(charts.ProviderLocal)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same chart differ")
	}
	// The same files on disk, with whatever times and modes the checkout gave them, make the same bytes.
	c, err := charts.ArchiveDir(os.DirFS("."), charts.ProviderLocal)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, c) {
		t.Fatal("the embedded chart and the chart directory on disk archive differently")
	}

	entries := readArchive(t, a)
	var names []string
	for _, e := range entries {
		names = append(names, e.name)
		if !strings.HasPrefix(e.name, "provider-local/") {
			t.Errorf("%s: not under the top-level directory provider-local/", e.name)
		}
		if e.mode != 0o644 || e.uid != 0 || e.gid != 0 || e.uname != "" {
			t.Errorf("%s: mode %o, owner %d:%d %q; want 0644, 0:0 and no names", e.name, e.mode, e.uid, e.gid, e.uname)
		}
		if first := entries[0].modTime; !e.modTime.Equal(first) || e.modTime.Year() != 2000 {
			t.Errorf("%s: modification time %v, want the fixed time of every entry", e.name, e.modTime)
		}
		want, err := fs.ReadFile(os.DirFS("."), e.name)
		if err != nil {
			t.Errorf("%s: not in the chart directory: %v", e.name, err)
		} else if !bytes.Equal(e.data, want) {
			t.Errorf("%s: content differs from the chart directory", e.name)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %q", names)
	}
	for _, want := range []string{"provider-local/Chart.yaml", "provider-local/values.yaml", "provider-local/.helmignore",
		"provider-local/templates/_helpers.tpl", "provider-local/templates/deployment.yaml",
		"provider-local/templates/clusterrole.yaml", "provider-local/templates/clusterrolebinding.yaml",
		"provider-local/templates/serviceaccount.yaml"} {
		if !slices.Contains(names, want) {
			t.Errorf("archive lacks %s; it has %q", want, names)
		}
	}
}

func TestArchiveLoads(t *testing.T) {
	a, err := charts.Archive(charts.ProviderLocal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadArchive(bytes.NewReader(a))
	if err != nil {
		t.Fatalf("helm cannot load the archive: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.Metadata
	if m.APIVersion != chart.APIVersionV2 || m.Name != "provider-local" || m.Version != "0.1.0" || m.AppVersion == "" ||
		m.Type != "application" {
		t.Errorf("metadata: apiVersion %q, name %q, version %q, appVersion %q, type %q", m.APIVersion, m.Name, m.Version,
			m.AppVersion, m.Type)
	}
	var templates []string
	for _, tpl := range c.Templates {
		templates = append(templates, tpl.Name)
	}
	if !slices.Contains(templates, "templates/_helpers.tpl") {
		t.Errorf("templates %q lack _helpers.tpl", templates)
	}
	if c.Values["replicaCount"] != float64(1) {
		t.Errorf("default replicaCount %v, want 1", c.Values["replicaCount"])
	}
}

// TestLint runs helm lint on the chart directory, without and with the injected values.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"plain": nil, "injected": {"gardener": gardenerValues()}} {
		t.Run(name, func(t *testing.T) { lintChart(t, charts.ProviderLocal, "extension-provider-local-x1b2c", vals) })
	}
}

// writeChart writes files (path → content) below dir.
func writeChart(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArchiveDir(t *testing.T) {
	dir := t.TempDir()
	writeChart(t, dir, map[string]string{
		"mychart/Chart.yaml":              "apiVersion: v2\nname: mychart\nversion: 1.2.3\n",
		"mychart/values.yaml":             "x: 1\n",
		"mychart/.helmignore":             "secret.txt\nignored/\n",
		"mychart/secret.txt":              "not packaged",
		"mychart/ignored/file.yaml":       "not packaged",
		"mychart/templates/.hidden.yaml":  "not packaged: Helm ignores templates/.*",
		"mychart/templates/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"mychart/files/deeply/nested.txt": "packaged",
	})
	a, err := charts.ArchiveDir(os.DirFS(dir), "mychart")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range readArchive(t, a) {
		names = append(names, e.name)
	}
	want := []string{"mychart/.helmignore", "mychart/Chart.yaml", "mychart/files/deeply/nested.txt",
		"mychart/templates/cm.yaml", "mychart/values.yaml"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	c, err := loader.LoadArchive(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "mychart" || c.Metadata.Version != "1.2.3" {
		t.Errorf("loaded %s %s", c.Name(), c.Metadata.Version)
	}

	// Modification times and permissions of the files do not show.
	old := time.Date(1999, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "mychart", "values.yaml"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "mychart", "Chart.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := charts.ArchiveDir(os.DirFS(dir), "mychart/"); err != nil || !bytes.Equal(a, b) {
		t.Errorf("archive changed with file times and modes (err %v)", err)
	}

	// A broken chart makes a well-formed archive that Helm refuses, for tests of what refuses it.
	writeChart(t, dir, map[string]string{"broken/Chart.yaml": "apiVersion: v2\nversion: 1.0.0\n", "broken/values.yaml": "{}"})
	a, err = charts.ArchiveDir(os.DirFS(dir), "broken")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loader.LoadArchive(bytes.NewReader(a)); err == nil {
		t.Error("helm loaded a chart without a name")
	}
}

func TestArchiveErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{".", "", "/abs", "../up", "missing", "empty"} {
		if _, err := charts.ArchiveDir(os.DirFS(dir), root); err == nil {
			t.Errorf("ArchiveDir(%q) succeeded", root)
		}
	}
	for _, name := range []string{"", ".", "missing", "provider-local/templates", "../charts"} {
		if _, err := charts.Archive(name); err == nil {
			t.Errorf("Archive(%q) succeeded", name)
		}
	}
}
