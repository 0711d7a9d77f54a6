package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/ignore"
)

// The names of the embedded charts, for Archive.
const (
	// ProviderLocal is provider-local's chart, which its ControllerDeployment inlines.
	ProviderLocal = "provider-local"
	// TrellisAgent is the seed agent's chart (docs/install.md).
	TrellisAgent = "trellis-agent"
	// TrellisHub is the hub's chart (docs/install.md).
	TrellisHub = "trellis-hub"
)

// embedded holds the charts, one directory each. The all: prefix keeps files starting with '.' or '_' (.helmignore,
// templates/_helpers.tpl), which go:embed leaves out otherwise.
//
//go:embed all:provider-local all:trellis-agent all:trellis-hub
var embedded embed.FS

// archiveModTime is the modification time of every archive entry: fixed, so that archives are reproducible. It is
// not the zero time, which tar would write as 1 January 1 and some tools reject.
var archiveModTime = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// archiveFileMode is the mode of every archive entry, as `helm package` writes them.
const archiveFileMode = 0o644

// Archive returns the embedded chart name (a directory of this package, e.g. ProviderLocal) as a deterministic
// gzipped tar in Helm's layout.
func Archive(name string) ([]byte, error) {
	if name == "" || name == "." || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("chart name %q: want a directory name", name)
	}
	if _, err := fs.Stat(embedded, path.Join(name, "Chart.yaml")); err != nil {
		return nil, fmt.Errorf("chart %q is not embedded: %w", name, err)
	}
	return ArchiveDir(embedded, name)
}

// ArchiveDir returns the chart in directory root of fsys as a deterministic gzipped tar in Helm's layout: every
// regular file below root, except what root/.helmignore and Helm's default rules ignore, under a top-level directory
// named path.Base(root), sorted by path, with mode 0644, owner 0:0 and a fixed modification time. root must name the
// chart's directory (not "."), as the top-level directory is named after it; Helm's loader ignores that name, the
// chart's name is in its Chart.yaml. The chart itself is not checked: a broken chart makes a well-formed archive
// that Helm then refuses.
func ArchiveDir(fsys fs.FS, root string) ([]byte, error) {
	root = path.Clean(root)
	if root == "." || root == "/" || !fs.ValidPath(root) {
		return nil, fmt.Errorf("chart directory %q: want a path naming the chart's directory", root)
	}
	files, err := chartFiles(fsys, root)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("chart directory %q holds no files", root)
	}
	top := path.Base(root)

	var buf bytes.Buffer
	// No name, comment or time in the gzip header: it must not vary between runs.
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		data, err := fs.ReadFile(fsys, path.Join(root, f))
		if err != nil {
			return nil, fmt.Errorf("read chart file %s: %w", path.Join(root, f), err)
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     top + "/" + f,
			Mode:     archiveFileMode,
			Size:     int64(len(data)),
			ModTime:  archiveModTime, // whole seconds: tar/writer picks ustar, or PAX only for long names
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar header of %s: %w", hdr.Name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// chartFiles lists the files of the chart in root, relative to it and sorted, as Helm's directory loader selects
// them: .helmignore's rules and Helm's defaults (templates/.*) applied, an ignored directory skipped whole, anything
// but directories and regular files refused.
func chartFiles(fsys fs.FS, root string) ([]string, error) {
	rules := ignore.Empty()
	if data, err := fs.ReadFile(fsys, path.Join(root, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path.Join(root, ignore.HelmIgnore), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path.Join(root, ignore.HelmIgnore), err)
	}
	rules.AddDefaults()

	var files []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel := strings.TrimPrefix(p, root+"/")
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(rel, fi) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case !fi.Mode().IsRegular():
			return fmt.Errorf("chart file %s is not a regular file (mode %v)", p, fi.Mode())
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list chart %s: %w", root, err)
	}
	sort.Strings(files)
	return files, nil
}
