// Command build-images writes the images of deploy/images as archives, <out>/<name>.tar, each named
// local.trellis.dev/<name>:<version> (`make images`; `make testbin` writes the node's own with -only). An archive is
// rewritten only when its image's digest changed, so a second run with the same binaries writes nothing. With
// -push registry/prefix (`make images PUSH=registry/prefix`) each image also goes to <prefix>/<name>:<version>.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/trellis-dev/trellis/deploy/images"
)

func main() {
	var src images.Sources
	flag.StringVar(&src.Testbin, "testbin", "bin/testbin", "directory `make testbin` links the cached binaries into")
	flag.StringVar(&src.Bin, "bin", "bin", "directory of the project's binaries")
	flag.StringVar(&src.Busybox, "busybox", "/bin/busybox", "a static busybox for the tools image")
	flag.StringVar(&src.Version, "version", "dev", "tag of the project's images")
	flag.StringVar(&src.Revision, "revision", "", "source revision of the project's binaries (org.opencontainers.image.revision)")
	out := flag.String("out", "bin/images", "directory for the archives")
	only := flag.String("only", "", "comma-separated image names to build (default: all)")
	var p pushFlags
	flag.StringVar(&p.prefix, "push", "", "registry/prefix to push every built image to, as <prefix>/<name>:<version>")
	flag.BoolVar(&p.opts.Insecure, "push-insecure", false, "push over plain HTTP (a registry on loopback)")
	flag.Parse()
	if err := run(src, *out, *only, p); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

type pushFlags struct {
	prefix string
	opts   images.PushOptions
}

func run(src images.Sources, out, only string, push pushFlags) error {
	specs, err := images.Catalog(src)
	if err != nil {
		return err
	}
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
		for _, n := range names {
			if !slices.ContainsFunc(specs, func(s images.Spec) bool { return s.Name == n }) {
				return fmt.Errorf("-only: no image %q", n)
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, s := range specs {
		if names != nil && !slices.Contains(names, s.Name) {
			continue
		}
		img, err := images.Build(s)
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("image %s: %w", s.Ref(), err)
		}
		file := filepath.Join(out, s.Name+".tar")
		if unchanged(file, s.Ref(), digest.String()) {
			fmt.Printf("%s %s unchanged\n", s.Ref(), digest)
		} else {
			if err := images.WriteArchive(file, s.Ref(), img); err != nil {
				return err
			}
			fmt.Printf("%s %s -> %s\n", s.Ref(), digest, file)
		}
		if push.prefix != "" {
			ref, err := images.Push(context.Background(), push.prefix, s, img, push.opts)
			if err != nil {
				return err
			}
			fmt.Printf("%s pushed as %s\n", s.Ref(), ref)
		}
	}
	return nil
}

// unchanged reports whether file is the archive of the image with digest, tagged ref.
func unchanged(file, ref, digest string) bool {
	old, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		return false
	}
	if d, err := old.Digest(); err != nil || d.String() != digest {
		return false
	}
	m, err := tarball.LoadManifest(func() (f io.ReadCloser, err error) { return os.Open(file) })
	return err == nil && len(m) == 1 && slices.Equal(m[0].RepoTags, []string{ref})
}
