package images

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushRef returns where Push puts the image of spec under prefix ("registry.example.com/trellis"):
// <prefix>/<name>:<version>.
func PushRef(prefix string, spec Spec) (name.Tag, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return name.Tag{}, fmt.Errorf("push: empty registry prefix")
	}
	tag, err := name.NewTag(prefix+"/"+spec.Name+":"+spec.Version, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("push %s under %q: %w", spec.Name, prefix, err)
	}
	return tag, nil
}

// PushOptions configures Push.
type PushOptions struct {
	// Insecure talks plain HTTP to the registry (a registry on loopback or in a test); otherwise HTTPS.
	Insecure bool
	// Transport carries the requests (default http.DefaultTransport).
	Transport http.RoundTripper
}

// Push uploads img, the image of spec, to <prefix>/<name>:<version> with the registry's API (go-containerregistry's
// remote.Write, with the credentials of the Docker config file when it has some) and returns the pushed reference
// with its digest, <prefix>/<name>@sha256:.... Blobs the registry has already are not sent again.
func Push(ctx context.Context, prefix string, spec Spec, img v1.Image, opts PushOptions) (name.Digest, error) {
	tag, err := PushRef(prefix, spec)
	if err != nil {
		return name.Digest{}, err
	}
	if opts.Insecure {
		if tag, err = name.NewTag(tag.String(), name.StrictValidation, name.Insecure); err != nil {
			return name.Digest{}, err
		}
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if opts.Transport != nil {
		ro = append(ro, remote.WithTransport(opts.Transport))
	}
	if err := remote.Write(tag, img, ro...); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", tag, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(digest.String()), nil
}
