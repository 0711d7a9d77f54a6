package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testSpec is an image of two files of this test's own making, so that the test needs no built binaries.
func testSpec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"tool": "#!/bin/sh\necho tool\n", "helper": "helper data"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Spec{Name: "tool", Version: "v1.2.3", User: "65532", Entrypoint: []string{"/usr/local/bin/tool"},
		Files: []File{{Source: filepath.Join(dir, "tool"), Path: "/usr/local/bin/tool"},
			{Source: filepath.Join(dir, "helper"), Path: "/etc/tool/helper"}},
		Links:  map[string]string{"/bin/t": "/usr/local/bin/tool"},
		Labels: map[string]string{LabelTitle: "tool", LabelVersion: "v1.2.3", LabelSource: Source, LabelRevision: "0123abc"}}
}

func TestBuildIsReproducible(t *testing.T) {
	spec := testSpec(t)
	out := t.TempDir()
	var sums [2][32]byte
	for i := range 2 {
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(out, "tool.tar")
		if err := WriteArchive(file, spec.Ref(), img); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = sha256.Sum256(b)
		// A file's modification time is not part of the image.
		if err := os.Chtimes(spec.Files[0].Source, Epoch.AddDate(30, 0, 0), Epoch.AddDate(30, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if sums[0] != sums[1] {
		t.Fatalf("two builds of the same files gave different archives: %x and %x", sums[0], sums[1])
	}

	// Changing a file's content changes the image.
	first, _ := Build(spec)
	if err := os.WriteFile(spec.Files[1].Source, []byte("other data"), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Digest()
	d2, _ := second.Digest()
	if d1 == d2 {
		t.Fatalf("a changed file left the digest at %s", d1)
	}
}

func TestArchiveContent(t *testing.T) {
	spec := testSpec(t)
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tool.tar")
	if err := WriteArchive(file, spec.Ref(), img); err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "local.trellis.dev/tool:v1.2.3" {
		t.Fatalf("archive manifest %+v, want one image tagged local.trellis.dev/tool:v1.2.3", m)
	}
	read, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := read.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/usr/local/bin/tool" ||
		cfg.OS != "linux" || !cfg.Created.Time.Equal(Epoch) {
		t.Errorf("config user %q entrypoint %q os %q created %v", cfg.Config.User, cfg.Config.Entrypoint, cfg.OS, cfg.Created)
	}
	if cfg.Config.Labels[LabelRevision] != "0123abc" || cfg.Config.Labels[LabelVersion] != "v1.2.3" {
		t.Errorf("config labels %v", cfg.Config.Labels)
	}
	layers, err := read.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]*tar.Header{}
	content := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		var b bytes.Buffer
		_, _ = io.Copy(&b, tr)
		content[h.Name] = b.String()
	}
	for name, want := range map[string]string{"usr/local/bin/tool": "#!/bin/sh\necho tool\n", "etc/tool/helper": "helper data"} {
		h := got[name]
		if h == nil {
			t.Errorf("layer has no %s; has %v", name, got)
			continue
		}
		if content[name] != want || h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(Epoch) {
			t.Errorf("%s: content %q mode %o uid %d mtime %v", name, content[name], h.Mode, h.Uid, h.ModTime)
		}
	}
	if h := got["bin/t"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/usr/local/bin/tool" {
		t.Errorf("link bin/t: %+v", h)
	}
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/", "etc/", "etc/tool/", "bin/"} {
		if h := got[d]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("no directory %s", d)
		}
	}
	if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want mode 1777", h)
	}
}

func TestBuildRejectsBadSpecs(t *testing.T) {
	good := testSpec(t)
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no name", func(s *Spec) { s.Name = "" }, "name: empty"},
		{"upper-case name", func(s *Spec) { s.Name = "Tool" }, `image "Tool"`},
		{"no version", func(s *Spec) { s.Version = "" }, "version: empty"},
		{"no entrypoint", func(s *Spec) { s.Entrypoint = nil }, "entrypoint: empty"},
		{"relative path", func(s *Spec) { s.Files[0].Path = "bin/tool" }, `files[0].path: "bin/tool" is not absolute`},
		{"missing file", func(s *Spec) { s.Files[1].Source = "/nonexistent/helper" }, "file /etc/tool/helper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Files = append([]File(nil), good.Files...)
			tc.change(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCatalogVersionsFromCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache", "coredns-v1.14.7")
	node := filepath.Join(dir, "testbin", "node")
	for _, d := range []string{cache, node} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, "coredns"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(cache, "coredns"), filepath.Join(node, "coredns")); err != nil {
		t.Fatal(err)
	}
	specs, err := Catalog(Sources{Testbin: filepath.Join(dir, "testbin"), Bin: filepath.Join(dir, "bin"),
		Busybox: filepath.Join(dir, "no-busybox"), Version: "v9"})
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]Spec{}
	for _, s := range specs {
		refs[s.Name] = s
	}
	if got := refs["coredns"].Ref(); got != "local.trellis.dev/coredns:v1.14.7" {
		t.Errorf("coredns is %s, want the cache's version", got)
	}
	if got := refs["provider-local"].Ref(); got != "local.trellis.dev/provider-local:v9" {
		t.Errorf("provider-local is %s, want the project's version", got)
	}
	if got := refs["etcd"].Version; got != "dev" {
		t.Errorf("etcd without a cached binary has version %q, want dev", got)
	}
	for _, n := range append(slices.Clone(NodeImages), Project...) {
		if _, ok := refs[n]; !ok {
			t.Errorf("image %s is not in the catalog", n)
		}
	}
	// The project's images run as non-root and carry the OCI labels; the revision only when it is known.
	for _, n := range Project {
		s := refs[n]
		if s.User != "65532" || s.Labels[LabelVersion] != "v9" || s.Labels[LabelSource] != Source || s.Labels[LabelTitle] != n {
			t.Errorf("image %s: user %q labels %v", n, s.User, s.Labels)
		}
		if _, ok := s.Labels[LabelRevision]; ok {
			t.Errorf("image %s has a revision label without a revision", n)
		}
	}
	if _, err := Build(refs["busybox"]); err == nil || !strings.Contains(err.Error(), "no-busybox") {
		t.Errorf("building busybox without its binary: %v, want an error naming it", err)
	}
}
