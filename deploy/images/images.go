package images

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is the registry part of every image name. Nothing serves it: images reach a node as archives, and the
// node's kubelet never pulls them (imagePullPolicy IfNotPresent or Never).
const Registry = "local.trellis.dev"

// Epoch is the creation and modification time of everything in an image, so that its digests depend on its content
// only.
var Epoch = time.Unix(0, 0).UTC()

// Spec describes an image: a single layer of files and links, and how its container starts.
type Spec struct {
	// Name is the image's repository under Registry, e.g. "pause".
	Name string
	// Version is its tag: the component's version, or the project's build version.
	Version string
	// Files are copied into the image; a missing source fails Build naming it.
	Files []File
	// Links are symbolic links in the image, link path to target (busybox's applets).
	Links map[string]string
	// Entrypoint is the container's command.
	Entrypoint []string
	// User runs the container: "65532" for non-root components, "0" where root is needed.
	User string
	// Labels are the image's config labels; Catalog sets the OCI annotations of the project's images
	// (org.opencontainers.image.version, .source, .revision, .title).
	Labels map[string]string
}

// The OCI image annotation keys the project's images carry as labels (opencontainers/image-spec annotations.md).
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
)

// File is one file of an image.
type File struct {
	// Source is the file on this machine; symbolic links are followed.
	Source string
	// Path is the file's absolute path in the image.
	Path string
}

// Ref returns the image's name, local.trellis.dev/<name>:<version>.
func (s Spec) Ref() string { return fmt.Sprintf("%s/%s:%s", Registry, s.Name, s.Version) }

// Validate checks that the spec names an image and says how to run it.
func (s Spec) Validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("name: empty"))
	}
	if s.Version == "" {
		errs = append(errs, fmt.Errorf("image %q: version: empty", s.Name))
	}
	if len(s.Entrypoint) == 0 {
		errs = append(errs, fmt.Errorf("image %q: entrypoint: empty", s.Name))
	}
	for i, f := range s.Files {
		if !path.IsAbs(f.Path) {
			errs = append(errs, fmt.Errorf("image %q: files[%d].path: %q is not absolute", s.Name, i, f.Path))
		}
	}
	if _, err := name.NewTag(s.Ref(), name.StrictValidation); err != nil {
		errs = append(errs, fmt.Errorf("image %q: %w", s.Name, err))
	}
	return errors.Join(errs...)
}

// Build makes the image of spec: one layer holding its files (mode 0755, owner root) and links, its parent
// directories, and /tmp (mode 1777); a config with Entrypoint, User, the platform of this build and PATH.
func Build(spec Spec) (v1.Image, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	for _, f := range spec.Files {
		if _, err := os.Stat(f.Source); err != nil {
			return nil, fmt.Errorf("image %s: file %s: %w", spec.Ref(), f.Path, err)
		}
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeLayer(pw, spec)) }()
		return pr, nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", spec.Ref(), err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Ref(), err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: Epoch}
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.User = spec.User
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cfg.Config.WorkingDir = "/"
	if len(spec.Labels) > 0 {
		cfg.Config.Labels = maps.Clone(spec.Labels)
	}
	cfg.History = []v1.History{{Created: v1.Time{Time: Epoch}, CreatedBy: "trellis deploy/images", Comment: spec.Ref()}}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Ref(), err)
	}
	return img, nil
}

// writeLayer writes the layer's tar: directories first, then files and links, each sorted by path.
func writeLayer(w io.Writer, spec Spec) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{"/tmp": true}
	var paths []string
	for _, f := range spec.Files {
		paths = append(paths, f.Path)
	}
	for l := range spec.Links {
		paths = append(paths, l)
	}
	for _, p := range paths {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sortedDirs := make([]string, 0, len(dirs))
	for d := range dirs {
		sortedDirs = append(sortedDirs, d)
	}
	slices.Sort(sortedDirs)
	for _, d := range sortedDirs {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(header(tar.TypeDir, d[1:]+"/", mode, 0)); err != nil {
			return err
		}
	}
	files := slices.Clone(spec.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		if err := copyFile(tw, f); err != nil {
			return fmt.Errorf("%s: %w", f.Source, err)
		}
	}
	links := make([]string, 0, len(spec.Links))
	for l := range spec.Links {
		links = append(links, l)
	}
	slices.Sort(links)
	for _, l := range links {
		h := header(tar.TypeSymlink, l[1:], 0o777, 0)
		h.Linkname = spec.Links[l]
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(tw *tar.Writer, f File) error {
	r, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	if err := tw.WriteHeader(header(tar.TypeReg, f.Path[1:], 0o755, fi.Size())); err != nil {
		return err
	}
	_, err = io.Copy(tw, r)
	return err
}

func header(typ byte, name string, mode, size int64) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: Epoch, Format: tar.FormatPAX}
}

// WriteArchive writes img, named ref, as an image archive (the layout `docker save` writes, which `ctr images import`
// reads) to file, through a temporary file renamed at the end so that a reader never sees half an archive.
func WriteArchive(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	tmp := file + ".partial"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write image %s: %w", ref, err)
	}
	return os.Rename(tmp, file)
}
