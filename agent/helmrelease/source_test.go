package helmrelease

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"github.com/trellis-dev/trellis/test/ocitest"
)

const (
	registryUser     = ocitest.User
	registryPassword = ocitest.Password
)

var dockerConfigJSON = ocitest.DockerConfigJSON

// testRegistry is an in-memory OCI registry (test/ocitest).
type testRegistry struct {
	*ocitest.Registry
	host     string
	caBundle []byte
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := ocitest.Start(t)
	return &testRegistry{Registry: r, host: r.Host, caBundle: r.CABundle}
}

func (r *testRegistry) push(t *testing.T, archive []byte, repository, tag string) string {
	t.Helper()
	return r.Push(t, archive, repository, tag)
}

// source returns a Source for o with the registry's CA bundle and valid credentials.
func (r *testRegistry) source(o OCIRepository) Source {
	return Source{OCI: &o, CABundle: r.caBundle, PullSecret: dockerConfigJSON("https://"+r.host, registryUser, registryPassword)}
}

func TestFetchRaw(t *testing.T) {
	m := newOfflineManager(t, Config{})
	archive := configMapChart(t, "0.1.0", nil)
	got, digest, err := m.Fetch(t.Context(), Source{RawChart: archive})
	if err != nil || !bytes.Equal(got, archive) || digest != archiveDigest(archive) || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("Fetch(raw) = %d bytes, %q, %v", len(got), digest, err)
	}
	if _, _, err := m.Fetch(t.Context(), Source{}); err == nil {
		t.Error("Fetch(empty source) did not fail")
	}
	if _, _, err := m.Fetch(t.Context(), Source{RawChart: archive, OCI: &OCIRepository{Ref: "r.example/c:1"}}); err == nil {
		t.Error("Fetch(raw and OCI) did not fail")
	}
}

func TestFetchOCI(t *testing.T) {
	reg := startRegistry(t)
	ctx := t.Context()
	archive := configMapChart(t, "0.1.0", nil)
	digest := reg.push(t, archive, "charts/ext", "0.1.0")
	repo := reg.host + "/charts/ext"
	m := newOfflineManager(t, Config{})

	for _, tc := range []struct {
		name string
		oci  OCIRepository
	}{
		{"ref", OCIRepository{Ref: "oci://" + repo + ":0.1.0"}},
		{"ref without scheme", OCIRepository{Ref: repo + ":0.1.0"}},
		{"ref by digest", OCIRepository{Ref: repo + "@" + digest}},
		{"ref with a wrong tag and the digest", OCIRepository{Ref: repo + ":9.9.9@" + digest}},
		{"ref wins", OCIRepository{Ref: repo + ":0.1.0", Repository: repo, Tag: "9.9.9"}},
		{"repository and tag", OCIRepository{Repository: "oci://" + repo, Tag: "0.1.0"}},
		{"repository and digest", OCIRepository{Repository: repo, Digest: digest}},
		{"digest wins over a wrong tag", OCIRepository{Repository: repo, Tag: "9.9.9", Digest: digest}},
	} {
		got, gotDigest, err := m.Fetch(ctx, reg.source(tc.oci))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, archive) || gotDigest != archiveDigest(archive) {
			t.Errorf("%s: got %d bytes with digest %s; want the pushed archive", tc.name, len(got), gotDigest)
		}
	}
	if n, _ := m.charts.len(); n != 1 {
		t.Errorf("cache holds %d charts, want 1 (one digest)", n)
	}

	// A tag is resolved on every Fetch: moved to another chart, it gives the other chart.
	moved := configMapChart(t, "0.1.0", chartFiles{"templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n"})
	movedDigest := reg.push(t, moved, "charts/ext", "0.1.0")
	if got, _, err := m.Fetch(ctx, reg.source(OCIRepository{Repository: repo, Tag: "0.1.0"})); err != nil || !bytes.Equal(got, moved) {
		t.Errorf("Fetch of a moved tag: %v, same as the new chart: %v", err, bytes.Equal(got, moved))
	}

	// Errors name what is wrong.
	wrongDigest := archiveDigest([]byte("something else"))
	for _, tc := range []struct {
		name string
		src  Source
		want []string
	}{
		{"unknown digest", reg.source(OCIRepository{Repository: repo, Digest: wrongDigest}), []string{repo + "@" + wrongDigest, "not found"}},
		{"unknown tag", reg.source(OCIRepository{Repository: repo, Tag: "7.7.7"}), []string{repo + ":7.7.7", "not found"}},
		{"no credentials", Source{OCI: &OCIRepository{Repository: repo, Digest: wrongDigest}, CABundle: reg.caBundle}, []string{"credential not found", "no pull secret is given"}},
		{"wrong credentials", Source{OCI: &OCIRepository{Repository: repo, Tag: "0.1.0"}, CABundle: reg.caBundle, PullSecret: dockerConfigJSON(reg.host, registryUser, "wrong")}, []string{"401"}},
		{"credentials for another registry", Source{OCI: &OCIRepository{Repository: repo, Tag: "0.1.0"}, CABundle: reg.caBundle, PullSecret: dockerConfigJSON("other.example", registryUser, registryPassword)}, []string{"the pull secret has no credentials for " + reg.host + ", only for other.example"}},
		{"untrusted certificate", Source{OCI: &OCIRepository{Repository: repo, Tag: "0.1.0"}, PullSecret: dockerConfigJSON(reg.host, registryUser, registryPassword)}, []string{"certificate"}},
		{"bad CA bundle", Source{OCI: &OCIRepository{Repository: repo, Tag: "0.1.0"}, CABundle: []byte("nope")}, []string{"CA bundle"}},
		{"bad pull secret", Source{OCI: &OCIRepository{Repository: repo, Tag: "0.1.0"}, PullSecret: []byte("{}")}, []string{"auths"}},
		{"neither tag nor digest", reg.source(OCIRepository{Repository: repo}), []string{"neither tag nor digest"}},
		{"bad digest", reg.source(OCIRepository{Repository: repo, Digest: "sha256:abc"}), []string{"sha256:abc"}},
	} {
		_, _, err := m.Fetch(ctx, tc.src)
		if err == nil {
			t.Errorf("%s: Fetch did not fail", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}

	// Cached by digest: fetched again without the registry. A tag still needs it, to be resolved.
	reg.Close()
	for _, d := range []string{digest, movedDigest} {
		if _, _, err := m.Fetch(ctx, reg.source(OCIRepository{Repository: repo, Digest: d})); err != nil {
			t.Errorf("Fetch of cached digest %s with the registry gone: %v", d, err)
		}
	}
	if _, _, err := m.Fetch(ctx, reg.source(OCIRepository{Repository: repo, Tag: "0.1.0"})); err == nil {
		t.Error("Fetch by tag with the registry gone did not fail")
	}
	// The cache is per repository: the same digest elsewhere is not served from it.
	if _, _, err := m.Fetch(ctx, reg.source(OCIRepository{Repository: reg.host + "/other/ext", Digest: digest})); err == nil {
		t.Error("Fetch of a cached digest from another repository was served from the cache")
	}
}

// Concurrent Fetches of one digest pull it once.
func TestFetchOCIConcurrent(t *testing.T) {
	reg := startRegistry(t)
	archive := configMapChart(t, "0.1.0", nil)
	digest := reg.push(t, archive, "charts/ext", "0.1.0")
	src := reg.source(OCIRepository{Repository: reg.host + "/charts/ext", Digest: digest})

	before := reg.Manifests()
	if _, _, err := newOfflineManager(t, Config{}).Fetch(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	perPull := reg.Manifests() - before

	m := newOfflineManager(t, Config{})
	before = reg.Manifests()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got, _, err := m.Fetch(t.Context(), src); err != nil || !bytes.Equal(got, archive) {
				t.Errorf("concurrent Fetch: %v", err)
			}
		})
	}
	wg.Wait()
	if got := reg.Manifests() - before; got != perPull {
		t.Errorf("8 concurrent Fetches made %d manifest requests, one Fetch makes %d", got, perPull)
	}

	// A Fetch whose context ends stops waiting; the shared pull is not cut off for the others.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := newOfflineManager(t, Config{}).Fetch(cancelled, src); err == nil {
		t.Error("Fetch with a cancelled context did not fail")
	}
}

// The cache holds at most ChartCacheBytes, least recently used out first.
func TestFetchOCICacheBound(t *testing.T) {
	reg := startRegistry(t)
	a := configMapChart(t, "0.1.0", nil)
	b := configMapChart(t, "0.2.0", nil)
	repo := reg.host + "/charts/ext"
	da := reg.push(t, a, "charts/ext", "0.1.0")
	db := reg.push(t, b, "charts/ext", "0.2.0")
	m := newOfflineManager(t, Config{ChartCacheBytes: int64(max(len(a), len(b)) + 10)})
	for _, d := range []string{da, db} {
		if _, _, err := m.Fetch(t.Context(), reg.source(OCIRepository{Repository: repo, Digest: d})); err != nil {
			t.Fatal(err)
		}
	}
	if n, size := m.charts.len(); n != 1 || size != int64(len(b)) {
		t.Errorf("cache holds %d charts of %d bytes; want only the last", n, size)
	}
	reg.Close()
	if _, _, err := m.Fetch(t.Context(), reg.source(OCIRepository{Repository: repo, Digest: db})); err != nil {
		t.Errorf("the last chart is not cached: %v", err)
	}
	if _, _, err := m.Fetch(t.Context(), reg.source(OCIRepository{Repository: repo, Digest: da})); err == nil {
		t.Error("the evicted chart was served")
	}

	off := newOfflineManager(t, Config{ChartCacheBytes: -1})
	off.charts.add(cachedChart{key: "k", archive: []byte("x")})
	if n, _ := off.charts.len(); n != 0 {
		t.Error("a disabled cache keeps charts")
	}
}

func TestChartCache(t *testing.T) {
	c := newChartCache(10)
	add := func(key string, n int) { c.add(cachedChart{key: key, archive: make([]byte, n)}) }
	add("a", 4)
	add("b", 4)
	if _, ok := c.get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	add("c", 4) // evicts b
	if _, ok := c.get("b"); ok {
		t.Error("b was not evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s missing", k)
		}
	}
	add("big", 11) // larger than the cap: not kept, nothing evicted
	if n, size := c.len(); n != 2 || size != 8 {
		t.Errorf("after an oversized add: %d entries, %d bytes", n, size)
	}
	add("d", 10) // evicts everything else
	if n, size := c.len(); n != 1 || size != 10 {
		t.Errorf("after a full-size add: %d entries, %d bytes", n, size)
	}
}

func TestParseOCIRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   OCIRepository
		want string // reference(), or "error"
	}{
		{OCIRepository{Ref: "oci://r.example/charts/x:1.0.0"}, "r.example/charts/x:1.0.0"},
		{OCIRepository{Ref: "r.example:5000/x:1.0.0+build.1"}, "r.example:5000/x:1.0.0_build.1"},
		{OCIRepository{Ref: "r.example/x:1.0.0@" + d}, "r.example/x@" + d},
		{OCIRepository{Ref: "r.example/x@" + d, Repository: "other.example/y", Tag: "2"}, "r.example/x@" + d},
		{OCIRepository{Repository: "r.example/x", Tag: "1.0.0", Digest: d}, "r.example/x@" + d},
		{OCIRepository{Repository: "oci://r.example/x", Tag: "1.0.0"}, "r.example/x:1.0.0"},
		{OCIRepository{Ref: "r.example/x"}, "error"},
		{OCIRepository{Repository: "r.example/x"}, "error"},
		{OCIRepository{Repository: "r.example/x@" + d, Tag: "1"}, "error"},
		{OCIRepository{Ref: "r.example/X:1"}, "error"},
		{OCIRepository{Ref: "r.example/x@sha256:short"}, "error"},
		{OCIRepository{}, "error"},
	} {
		ref, err := tc.in.parse()
		got := ref.reference()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%+v: got %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDockerConfigJSON(t *testing.T) {
	creds, err := parseDockerConfigJSON([]byte(`{"auths":{
		"https://R.Example:5000/v1/": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("u:p:with:colons")) + `", "username": "ignored"},
		"token.example": {"identitytoken": "refresh"},
		"https://index.docker.io/v1/": {"username": "hub", "password": "pw"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := creds.lookup("r.example:5000"); c.Username != "u" || c.Password != "p:with:colons" {
		t.Errorf("r.example:5000 = %+v", c)
	}
	if c := creds.lookup("token.example"); c.RefreshToken != "refresh" {
		t.Errorf("token.example = %+v", c)
	}
	if c := creds.lookup("registry-1.docker.io"); c.Username != "hub" {
		t.Errorf("Docker Hub = %+v", c)
	}
	if c := creds.lookup("r.example"); c.Username != "" {
		t.Errorf("r.example (no port) = %+v, want none", c)
	}
	for _, bad := range []string{`[]`, `{"auths":{"x":{}}}`, `{"auths":{"x":{"auth":"%%%"}}}`, `{"auths":{"x":{"auth":"bm9jb2xvbg=="}}}`, `{"auths":{"":{"username":"u"}}}`} {
		if _, err := parseDockerConfigJSON([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
