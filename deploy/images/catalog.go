package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Sources says where the binaries of the images are.
type Sources struct {
	// Testbin is bin/testbin: etcd, kube-apiserver and kube-controller-manager, and the node's parts in node/ (links
	// into the per-machine cache, whose directory names carry the versions: <name>-<version>/<name>).
	Testbin string
	// Bin holds the project's binaries, built statically (`make images`): trellis-hub, trellis-agent,
	// provider-local, trellisctl.
	Bin string
	// Busybox is a static busybox (Debian's busybox-static: /bin/busybox).
	Busybox string
	// Version tags the project's images.
	Version string
	// Revision is the source revision (git commit) the project's binaries were built from, for their
	// org.opencontainers.image.revision label; empty leaves the label out.
	Revision string
}

// Source is the project's source repository, the org.opencontainers.image.source label of its images.
const Source = "https://github.com/trellis-dev/trellis"

// Project are the images of the project's own binaries.
var Project = []string{"trellis-hub", "trellis-agent", "provider-local", "trellisctl", "etcd-backup-restore"}

// NodeImages are the images every local node imports: its sandbox, the tools image, cluster DNS and the storage
// provisioner.
var NodeImages = []string{"pause", "busybox", "coredns", "local-path-provisioner"}

// ControlPlaneImages are the images of a shoot's control plane that the agent runs on a local seed's node (its image
// vector names them): `make testbin` writes them beside the node's. etcd-backup-restore is the project's own (etcd's
// backup sidecar and restore step): `make testbin` builds it for the purpose.
var ControlPlaneImages = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd-backup-restore"}

// ShootSystemImages are the images of the system components the agent deploys into a shoot with workers (kube-proxy
// and CoreDNS, and local-path-provisioner in shoots of provider type local, whose helper pods run busybox): the
// local machines import them, and the local image vector names them.
var ShootSystemImages = []string{"kube-proxy", "coredns", "local-path-provisioner"}

// Catalog returns the specs of every image Trellis builds, from src. Versions of cached binaries come from their
// cache directories; an image whose binary is missing fails only when it is built.
func Catalog(src Sources) ([]Spec, error) {
	node := filepath.Join(src.Testbin, "node")
	component := func(name, bin string) Spec {
		return Spec{Name: name, Version: cachedVersion(bin, name), User: "65532",
			Files:      append([]File{{Source: bin, Path: "/usr/local/bin/" + name}}, sharedLibraries(bin)...),
			Entrypoint: []string{"/usr/local/bin/" + name}}
	}
	project := func(name string) Spec {
		bin := filepath.Join(src.Bin, name)
		labels := map[string]string{LabelTitle: name, LabelVersion: src.Version, LabelSource: Source}
		if src.Revision != "" {
			labels[LabelRevision] = src.Revision
		}
		return Spec{Name: name, Version: src.Version, User: "65532", Labels: labels,
			Files: []File{{Source: bin, Path: "/usr/local/bin/" + name}}, Entrypoint: []string{"/usr/local/bin/" + name}}
	}
	busybox, err := busyboxSpec(src.Busybox)
	if err != nil {
		return nil, err
	}
	pause := filepath.Join(node, "pause")
	return []Spec{
		{Name: "pause", Version: src.Version, User: "65535", Files: []File{{Source: pause, Path: "/pause"}},
			Entrypoint: []string{"/pause"}},
		busybox,
		component("coredns", filepath.Join(node, "coredns")),
		component("local-path-provisioner", filepath.Join(node, "local-path-provisioner")),
		component("etcd", filepath.Join(src.Testbin, "etcd")),
		component("kube-apiserver", filepath.Join(src.Testbin, "kube-apiserver")),
		component("kube-controller-manager", filepath.Join(src.Testbin, "kube-controller-manager")),
		component("kube-scheduler", filepath.Join(node, "kube-scheduler")),
		kubeProxySpec(component("kube-proxy", filepath.Join(node, "kube-proxy"))),
		project("provider-local"),
		project("trellis-hub"),
		project("trellis-agent"),
		project("trellisctl"),
		project("etcd-backup-restore"),
	}, nil
}

// kubeProxySpec adds to the kube-proxy image what its iptables mode runs: this machine's iptables (the nf_tables
// variant, xtables-nft-multi, with its libraries and extensions) under the names kube-proxy calls, as upstream's
// image carries them. kube-proxy changes the node's tables, so it runs as root.
func kubeProxySpec(s Spec) Spec {
	s.User = "0"
	multi := "/usr/sbin/xtables-nft-multi"
	extensions, _ := filepath.Glob("/usr/lib/*/xtables/*.so") // none: iptables fails in the container, naming them
	seen := map[string]bool{}
	for _, f := range s.Files {
		seen[f.Path] = true
	}
	// The extensions load libraries of their own (libm for statistic, libnetfilter_conntrack for some matches).
	for _, bin := range append([]string{multi}, extensions...) {
		for _, f := range append([]File{{Source: bin, Path: bin}}, sharedLibraries(bin)...) {
			if !seen[f.Path] {
				seen[f.Path] = true
				s.Files = append(s.Files, f)
			}
		}
	}
	s.Links = map[string]string{}
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			s.Links["/usr/sbin/"+family+suffix] = "xtables-nft-multi"
		}
	}
	return s
}

// cachedVersion returns the version in the name of the cache directory bin links into (<name>-<version>/), or "dev".
func cachedVersion(bin, name string) string {
	target, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "dev"
	}
	if v, ok := strings.CutPrefix(filepath.Base(filepath.Dir(target)), name+"-"); ok && v != "" {
		return v
	}
	return "dev"
}

var busyboxVersion = regexp.MustCompile(`BusyBox v([0-9][0-9.]*)`)

// busyboxSpec makes the tools image: busybox as /bin/busybox with a link per applet it lists, run as root.
func busyboxSpec(bin string) (Spec, error) {
	s := Spec{Name: "busybox", Version: "dev", User: "0", Files: []File{{Source: bin, Path: "/bin/busybox"}},
		Links: map[string]string{}, Entrypoint: []string{"/bin/sh"}}
	if _, err := os.Stat(bin); err != nil {
		return s, nil // fails in Build, naming the file, if the image is wanted
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 1 depending on the build
	if m := busyboxVersion.FindSubmatch(help); m != nil {
		s.Version = string(m[1])
	}
	list, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return Spec{}, fmt.Errorf("busybox %s --list: %w", bin, err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			s.Links["/bin/"+applet] = "busybox"
		}
	}
	return s, nil
}

// sharedLibraries are the files a dynamically linked binary loads (its interpreter and libraries, as ldd lists
// them), at the same paths in the image: the cached Kubernetes binaries are built with cgo. A static binary, or one
// ldd cannot read, needs none.
func sharedLibraries(bin string) []File {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil // "not a dynamic executable" exits 1
	}
	var files []File
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var p string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			p = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			p = f[0]
		default:
			continue
		}
		files = append(files, File{Source: p, Path: p})
	}
	return files
}
