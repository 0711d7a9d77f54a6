package landscape

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/deploy/images"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/test/localnode"
)

// With Config.Node, provider-local runs as Gardener runs an extension: as the pod of its ControllerInstallation's
// chart (replicaCount 1), from an image of BinDir's provider-local that the landscape builds and every seed's node
// imports, instead of as a process of the landscape.

// binaryImage builds the image of BinDir/<name> into <Dir>/images/<name>.tar (BinaryImage).
func (l *Landscape) binaryImage(name string) (archive, repository, tag string, err error) {
	return BinaryImage(filepath.Join(l.cfg.BinDir, name), filepath.Join(l.Dir, "images"))
}

// BinaryImage builds the image of the static binary bin (deploy/images: the binary as /usr/local/bin/<name>, its
// entrypoint, user 65532) into the archive <dir>/<name>.tar, named local.trellis.dev/<name>:dev-<digest>: a rebuilt
// binary gives a new tag, so a chart's workload rolls out the new pod. A node imports the archive
// (seedtest.WithNodeImages, Config.NodeImages).
func BinaryImage(bin, dir string) (archive, repository, tag string, err error) {
	img, name, err := buildBinaryImage(bin)
	if err != nil {
		return "", "", "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", "", "", err
	}
	archive, repository, err = writeBinaryImage(img, name, "dev-"+digest.Hex[:12], dir, name+".tar")
	return archive, repository, "dev-" + digest.Hex[:12], err
}

// BinaryImageAs is BinaryImage with the tag given, into the archive <dir>/<name>-<tag>.tar: the same image under
// another tag, as a new release of it would be (the agent's self-upgrade test).
func BinaryImageAs(bin, dir, tag string) (archive, repository string, err error) {
	img, name, err := buildBinaryImage(bin)
	if err != nil {
		return "", "", err
	}
	return writeBinaryImage(img, name, tag, dir, name+"-"+tag+".tar")
}

func buildBinaryImage(bin string) (v1.Image, string, error) {
	name := filepath.Base(bin)
	spec := images.Spec{Name: name, Version: "dev", User: "65532",
		Files:      []images.File{{Source: bin, Path: "/usr/local/bin/" + name}},
		Entrypoint: []string{"/usr/local/bin/" + name}}
	if err := checkStatic(spec.Files[0].Source); err != nil {
		return nil, "", err
	}
	img, err := images.Build(spec)
	return img, name, err
}

func writeBinaryImage(img v1.Image, name, tag, dir, file string) (archive, repository string, err error) {
	repository = images.Registry + "/" + name
	archive = filepath.Join(dir, file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	if err := images.WriteArchive(archive, repository+":"+tag, img); err != nil {
		return "", "", err
	}
	return archive, repository, nil
}

// providerLocalPodValues are the chart's values for the pod: the landscape's image, never pulled, text logs, and a
// heartbeat as frequent as the host process's.
func providerLocalPodValues(repository, tag string) map[string]any {
	return map[string]any{
		"replicaCount": 1,
		"image":        map[string]any{"repository": repository, "tag": tag, "pullPolicy": "Never"},
		"config":       map[string]any{"logFormat": "text", "heartbeatInterval": "2s"},
	}
}

// MachineProviderPort is where each seed's localseed serves the local machine provider (test/localmachine), on its
// node's HostIP; provider-local's pod makes its Workers' machines there.
const MachineProviderPort = 8446

// addMachineProviders adds to the chart's values the machine provider of every seed (machine-provider.json of its
// localseed, which is ready): values.machineProviders.<seed> = {url, token}.
func (l *Landscape) addMachineProviders(values map[string]any) error {
	mps := map[string]any{}
	for _, s := range l.seeds {
		b, err := os.ReadFile(filepath.Join(s.Dir, "machine-provider.json"))
		if err != nil {
			return fmt.Errorf("seed %s: its machine provider: %w", s.Name, err)
		}
		var info struct {
			URL   string `json:"url"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal(b, &info); err != nil {
			return fmt.Errorf("seed %s: machine-provider.json: %w", s.Name, err)
		}
		mps[s.Name] = map[string]any{"url": info.URL, "token": info.Token}
	}
	values["machineProviders"] = mps
	return nil
}

// waitProviderLocalPod waits until the chart's Deployment in ns is rolled out with its pod ready on the seed's node
// and provider-local renewed its heartbeat Lease after the wait began.
func (l *Landscape) waitProviderLocalPod(ctx context.Context, s *Seed, ns string) error {
	begin := time.Now()
	s.ProviderLocalNamespace = ns
	return l.waitFor(ctx, s.seed, "provider-local's pod in "+ns, func(ctx context.Context) (bool, error) {
		deps, err := s.Client.AppsV1().Deployments(ns).List(ctx, kmetav1.ListOptions{})
		if err != nil || len(deps.Items) == 0 {
			return false, nil
		}
		for i := range deps.Items {
			if !localnode.DeploymentAvailable(&deps.Items[i]) {
				return false, nil
			}
		}
		lease, err := s.Client.CoordinationV1().Leases(ns).Get(ctx, extensionsv1alpha1.HeartbeatLeaseName, kmetav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("seed %s: heartbeat Lease: %w", s.Name, err)
		}
		rt := lease.Spec.RenewTime
		return rt != nil && !rt.Time.Before(begin.Add(-time.Second)), nil
	})
}

// checkStatic fails for a dynamically linked binary: the image has no C library to run it with.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; its image needs a static build (CGO_ENABLED=0 go build, as make up does)", bin)
		}
	}
	return nil
}
