package imagevector

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// Components of the shoot control plane, and of the shoot's system components, that the vector names.
const (
	ETCD                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	// ETCDBackupRestore is etcd's backup sidecar and restore step (cmd/etcd-backup-restore).
	ETCDBackupRestore = "etcd-backup-restore"
	// KubeProxy and CoreDNS are the system components the agent deploys into a shoot with workers.
	KubeProxy = "kube-proxy"
	CoreDNS   = "coredns"
	// LocalPathProvisioner and LocalPathHelper are the storage provisioner the agent deploys into a shoot of
	// provider type local with workers (Gardener: provider-local's shoot-system-components) and the image of its
	// helper pods, which create and remove the volumes' directories.
	LocalPathProvisioner = "local-path-provisioner"
	LocalPathHelper      = "local-path-helper"
)

//go:embed images.yaml
var defaults []byte

// Image is one entry of the vector.
type Image struct {
	// Name is the component.
	Name string `json:"name"`
	// Repository is the image without its tag, e.g. registry.k8s.io/kube-apiserver.
	Repository string `json:"repository"`
	// Tag is the image's tag; empty takes "v" + the shoot's Kubernetes version.
	Tag string `json:"tag,omitempty"`
	// TargetVersion is a semver constraint on the shoot's Kubernetes version (e.g. ">= 1.30"); empty matches all.
	TargetVersion string `json:"targetVersion,omitempty"`

	constraint *semver.Constraints
}

// Vector is an ordered list of images: the first entry of a component whose target version matches wins.
type Vector struct {
	Images []Image `json:"images"`
}

// Parse reads a vector (YAML or JSON) strictly: unknown fields, entries without name or repository, and target
// versions that are no semver constraint are errors.
func Parse(data []byte) (*Vector, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("image vector: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	v := &Vector{}
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("image vector: %w", err)
	}
	var errs []error
	for i := range v.Images {
		im := &v.Images[i]
		if im.Name == "" {
			errs = append(errs, fmt.Errorf("images[%d].name: empty", i))
		}
		if im.Repository == "" || strings.ContainsAny(im.Repository, " @") {
			errs = append(errs, fmt.Errorf("images[%d].repository: %q is not an image repository", i, im.Repository))
		}
		if strings.ContainsAny(im.Tag, " :@/") {
			errs = append(errs, fmt.Errorf("images[%d].tag: %q is not an image tag", i, im.Tag))
		}
		if im.TargetVersion != "" {
			c, err := semver.NewConstraint(im.TargetVersion)
			if err != nil {
				errs = append(errs, fmt.Errorf("images[%d].targetVersion: %w", i, err))
			}
			im.constraint = c
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("image vector: %w", err)
	}
	return v, nil
}

// Default is the embedded vector of upstream images.
func Default() *Vector {
	v, err := Parse(defaults)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return v
}

// Load returns the default vector with the entries of file before its own (file's win for the components it names
// and the versions they match); an empty file name is the default vector alone.
func Load(file string) (*Vector, error) {
	v := Default()
	if file == "" {
		return v, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	o, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Vector{Images: append(o.Images, v.Images...)}, nil
}

// Image returns the image reference (repository:tag) of component for a shoot of Kubernetes version.
func (v *Vector) Image(component, version string) (string, error) {
	sv, err := semver.NewVersion(version)
	if err != nil {
		return "", fmt.Errorf("image of %s: Kubernetes version %q: %w", component, version, err)
	}
	for _, im := range v.Images {
		if im.Name != component || (im.constraint != nil && !im.constraint.Check(sv)) {
			continue
		}
		tag := im.Tag
		if tag == "" {
			tag = "v" + sv.String()
		}
		return im.Repository + ":" + tag, nil
	}
	return "", fmt.Errorf("the image vector has no image of %s for Kubernetes %s", component, version)
}
