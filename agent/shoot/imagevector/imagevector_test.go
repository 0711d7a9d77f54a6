package imagevector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefault: the embedded vector names every component; tags follow the shoot's version unless the entry fixes one.
func TestDefault(t *testing.T) {
	v := Default()
	for c, want := range map[string]string{
		ETCD:                  "registry.k8s.io/etcd:3.5.21-0",
		KubeAPIServer:         "registry.k8s.io/kube-apiserver:v1.31.1",
		KubeControllerManager: "registry.k8s.io/kube-controller-manager:v1.31.1",
		KubeScheduler:         "registry.k8s.io/kube-scheduler:v1.31.1",
		ETCDBackupRestore:     "ghcr.io/trellis-dev/trellis/etcd-backup-restore:latest",
		KubeProxy:             "registry.k8s.io/kube-proxy:v1.31.1",
		CoreDNS:               "registry.k8s.io/coredns/coredns:v1.12.1",
		LocalPathProvisioner:  "docker.io/rancher/local-path-provisioner:v0.0.30",
		LocalPathHelper:       "docker.io/library/busybox:1.37.0",
	} {
		if got, err := v.Image(c, "1.31.1"); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", c, got, err, want)
		}
	}
	if _, err := v.Image(KubeAPIServer, "1.20.0"); err == nil || !strings.Contains(err.Error(), "no image of kube-apiserver") {
		t.Errorf("a version outside every target: %v", err)
	}
	if _, err := v.Image(KubeAPIServer, "one"); err == nil {
		t.Error("a version that is no version gave an image")
	}
}

// TestLoad: an override file's entries win for the components and versions they match; the defaults serve the rest.
func TestLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "v.yaml")
	if err := os.WriteFile(file, []byte(`images:
- name: kube-apiserver
  repository: local.trellis.dev/kube-apiserver
  tag: v1.36.3
- name: etcd
  repository: local.trellis.dev/etcd
  tag: v3.7.3
  targetVersion: ">= 1.32"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ c, version, want string }{
		{KubeAPIServer, "1.31.1", "local.trellis.dev/kube-apiserver:v1.36.3"},
		{ETCD, "1.33.0", "local.trellis.dev/etcd:v3.7.3"},
		{ETCD, "1.31.1", "registry.k8s.io/etcd:3.5.21-0"},
		{KubeScheduler, "1.31.1", "registry.k8s.io/kube-scheduler:v1.31.1"},
	} {
		if got, err := v.Image(tc.c, tc.version); err != nil || got != tc.want {
			t.Errorf("%s %s: %q %v, want %q", tc.c, tc.version, got, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestParseErrors: bad input gets errors naming the entry and field.
func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"images: [{repository: r}]":                                   "images[0].name: empty",
		"images: [{name: a}]":                                         "images[0].repository",
		"images: [{name: a, repository: r, tag: 'a:b'}]":              "images[0].tag",
		"images: [{name: a, repository: r, targetVersion: '>= one'}]": "images[0].targetVersion",
		"images: [{name: a, repository: r, other: 1}]":                "unknown field",
		"images: {": "image vector",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

// FuzzParse: Parse never panics, and a vector it accepts answers Image for its entries without panicking.
func FuzzParse(f *testing.F) {
	f.Add(defaults)
	f.Add([]byte("images: [{name: a, repository: r, targetVersion: '>= 1.2, < 2'}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		for _, im := range v.Images {
			_, _ = v.Image(im.Name, "1.31.1")
		}
	})
}
