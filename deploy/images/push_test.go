package images

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// startRegistry serves go-containerregistry's in-memory registry on loopback and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Listener = lis
	srv.Start()
	t.Cleanup(srv.Close)
	return lis.Addr().String()
}

func TestPushToRegistry(t *testing.T) {
	host := startRegistry(t)
	spec := testSpec(t)
	spec.Labels = map[string]string{LabelVersion: spec.Version, LabelSource: Source, LabelRevision: "abc123"}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	ctx := context.Background()
	ref, err := Push(ctx, host+"/trellis/", spec, img, PushOptions{Insecure: true, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if ref.String() != host+"/trellis/tool@"+want.String() {
		t.Errorf("pushed reference %s, want %s/trellis/tool@%s", ref, host, want)
	}
	// The tag names the same image, byte for byte, labels included.
	tag, err := name.NewTag(host+"/trellis/tool:v1.2.3", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull %s: %v", tag, err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled digest %s, want %s", d, want)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Labels[LabelRevision] != "abc123" || cfg.Config.Labels[LabelSource] != Source {
		t.Errorf("pulled labels %v", cfg.Config.Labels)
	}
	// A second push of the same image is accepted (nothing new to upload) and names the same digest.
	again, err := Push(ctx, host+"/trellis", spec, img, PushOptions{Insecure: true})
	if err != nil || again != ref {
		t.Errorf("second push: %v, %v; want %v", again, err, ref)
	}
}

func TestPushErrors(t *testing.T) {
	spec := testSpec(t)
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prefix, want string }{
		{"", "empty registry prefix"},
		{"Bad Prefix", `push tool under "Bad Prefix"`},
	} {
		if _, err := Push(context.Background(), tc.prefix, spec, img, PushOptions{Insecure: true}); err == nil ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("Push(%q): %v, want an error containing %q", tc.prefix, err, tc.want)
		}
	}
	// A registry that is not there: the error names the image's reference.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	if _, err := Push(context.Background(), addr+"/x", spec, img, PushOptions{Insecure: true}); err == nil ||
		!strings.Contains(err.Error(), "push "+addr+"/x/tool:v1.2.3") {
		t.Errorf("push to a closed port: %v", err)
	}
}
