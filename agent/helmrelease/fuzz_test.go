package helmrelease

import (
	"encoding/base64"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// FuzzParseDockerConfigJSON feeds pull secret content (outside input: a Secret in the garden) to its decoder: it
// must not panic, and what it accepts has credentials for every host it names.
func FuzzParseDockerConfigJSON(f *testing.F) {
	f.Add([]byte(`{"auths":{"r.example":{"auth":"dTpw"}}}`))
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`))
	f.Add([]byte(`{"auths":{"r.example:5000":{"identitytoken":"t","registrytoken":"a"}}}`))
	f.Add([]byte(`{"auths":{"x":{"auth":"%%%"}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		creds, err := parseDockerConfigJSON(data)
		if err != nil {
			return
		}
		for _, h := range creds.hosts() {
			if h == "" || creds.lookup(h) == auth.EmptyCredential {
				t.Errorf("host %q accepted without credentials", h)
			}
		}
	})
}

// FuzzParseOCIRef feeds OCI references (outside input: a ControllerDeployment's ociRepository) to the parser: it must
// not panic, and what it accepts names a tag or a digest and parses back to itself.
func FuzzParseOCIRef(f *testing.F) {
	d := "sha256:" + strings.Repeat("ab", 32)
	f.Add("oci://r.example/charts/x:1.0.0")
	f.Add("r.example:5000/x:1.0.0+build@" + d)
	f.Add("r.example/x@" + d)
	f.Add("localhost/a/b/c:tag")
	f.Add("x")
	f.Fuzz(func(t *testing.T, raw string) {
		ref, err := parseOCIRef(raw)
		if err != nil {
			return
		}
		if (ref.tag == "") == (ref.digest == "") {
			t.Fatalf("%q: tag %q, digest %q: want exactly one", raw, ref.tag, ref.digest)
		}
		again, err := parseOCIRef(ref.reference())
		if err != nil || again != ref {
			t.Fatalf("%q parsed to %+v, whose reference %q parses to %+v, %v", raw, ref, ref.reference(), again, err)
		}
	})
}

// FuzzDecodeRecord: a release record read from the seed (data.release of a Secret anyone with access to the namespace
// may write) never panics the decoder, and what decodes encodes and decodes to the same release.
func FuzzDecodeRecord(f *testing.F) {
	rel := &release.Release{Name: "ext", Namespace: "extension-x", Version: 3, Config: map[string]any{"a": 1.0},
		Info: &release.Info{Status: release.StatusDeployed, Description: "Install complete"}, Manifest: "---\n# Source: x\nkind: ConfigMap\n"}
	enc, err := encodeRecord(rel)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte(`{"name":"x","info":{"status":"failed"},"version":1}`))))
	f.Add([]byte(base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0, 0})))
	f.Add([]byte("%%%"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := decodeRecord(data)
		if err != nil {
			return
		}
		again, err := encodeRecord(rel)
		if err != nil {
			t.Fatalf("a decoded release does not encode: %v", err)
		}
		back, err := decodeRecord(again)
		if err != nil {
			t.Fatalf("a re-encoded release does not decode: %v", err)
		}
		if back.Name != rel.Name || back.Version != rel.Version || back.Info.Status != rel.Info.Status || back.Manifest != rel.Manifest {
			t.Fatalf("round trip changed the release: %+v -> %+v", rel, back)
		}
	})
}
