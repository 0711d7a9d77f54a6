package helmrelease

import (
	"strings"
	"testing"

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
