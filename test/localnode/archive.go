package localnode

import (
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// archiveRefs returns the tags of the images in an image archive.
func archiveRefs(path string) ([]string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w (run `make testbin`)", path, err)
	}
	var refs []string
	for _, d := range m {
		refs = append(refs, d.RepoTags...)
	}
	return refs, nil
}
