package localnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/deploy/images"
)

// nodeImageNames are the images every node imports from testbin/images (deploy/images.NodeImages).
var nodeImageNames = []string{"pause", "busybox", "coredns", "local-path-provisioner"}

// machineImageNames are the images every machine of a shoot imports (Config.Machine): its sandbox, the tools image,
// and the shoot's system components (kube-proxy, CoreDNS, local-path-provisioner) that the agent deploys.
var machineImageNames = append([]string{"pause", "busybox"}, images.ShootSystemImages...)

// files are the node's configuration files and sockets.
type files struct {
	containerd, containerdSocket, kubelet, kubeconfig, kubeProxy, schedulerKubeconfig string
	// bootstrapKubeconfig is a machine's (Config.Machine); kubeconfig is then written by kubelet.
	bootstrapKubeconfig string
}

// writeConfigs writes the configuration of containerd, kubelet, kube-proxy and the CNI, and the kubeconfigs: the
// node's components in its network namespace reach the apiserver through the forwarder at fwdAddr, kube-scheduler
// (on the host) directly.
func writeConfigs(cfg Config, bins binaries, api *rest.Config, fwdAddr string) (files, error) {
	s := cfg.Slot
	f := files{
		containerd:          filepath.Join(cfg.Dir, "containerd.toml"),
		containerdSocket:    filepath.Join(s.RunDir(), "containerd", "containerd.sock"),
		kubelet:             filepath.Join(cfg.Dir, "kubelet.yaml"),
		kubeconfig:          filepath.Join(cfg.Dir, "node.kubeconfig"),
		kubeProxy:           filepath.Join(cfg.Dir, "kube-proxy.yaml"),
		schedulerKubeconfig: filepath.Join(cfg.Dir, "scheduler.kubeconfig"),
	}
	if cfg.Machine != nil {
		f.bootstrapKubeconfig = filepath.Join(cfg.Dir, "bootstrap.kubeconfig")
	}
	pause, err := ImageRef(cfg.Testbin, "pause")
	if err != nil {
		return f, err
	}
	dns, domain := s.DNSIP.String(), "cluster.local"
	if m := cfg.Machine; m != nil && m.ClusterDNS != "" {
		dns = m.ClusterDNS
	}
	if m := cfg.Machine; m != nil && m.ClusterDomain != "" {
		domain = m.ClusterDomain
	}
	taints := "[]"
	if m := cfg.Machine; m != nil && len(m.RegisterWithTaints) > 0 {
		b, err := json.Marshal(m.RegisterWithTaints) // YAML reads JSON
		if err != nil {
			return f, err
		}
		taints = string(b)
	}
	cniConf := filepath.Join(cfg.Dir, "cni")
	containerd := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  # The opt service's directory (by default /opt/containerd, which no teardown removes); nothing is installed there.
  path = %[11]q

[plugins."io.containerd.nri.v1.nri"]
  # No NRI plugins here; enabled, it listens on the machine's one /run/nri/nri.sock.
  disable = true

[plugins."io.containerd.shim.v1.manager"]
  # The shims' sockets in the node's run directory, which teardown removes; by default they go to /run/containerd/s,
  # shared by every node, where each shim that teardown kills would leave its socket behind.
  socket_dir = %[9]q

[plugins."io.containerd.cri.v1.runtime"]
  # Processes here lack CAP_SYS_RESOURCE: without this every sandbox fails in runc.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[5]q
        # runc's state in the node's run directory (by default /run/containerd/runc, where every container of a
        # killed node would leave its state behind).
        Root = %[10]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[8]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, containerdRoot(s), filepath.Join(s.RunDir(), "containerd-state"), f.containerdSocket,
		filepath.Join(s.RunDir(), "containerd", "containerd.sock.ttrpc"), bins.runc, bins.cniDir, cniConf, pause,
		s.ShimSocketDir(), filepath.Join(s.RunDir(), "runc"), filepath.Join(s.StateDir(), "containerd-opt"))

	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %[1]q,
  "plugins": [
    {"type": "bridge", "bridge": %[1]q, "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %[2]q, "ranges": [[{"subnet": %[3]q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
`, s.Bridge(), filepath.Join(s.RunDir(), "cni"), s.PodCIDR)

	// The node shares the machine's disk with everything else on it: its eviction thresholds are absolute amounts, not
	// shares of the disk (1 % of a 252 GB disk, 2.5 GB, evicted the shoots' control planes while gigabytes were free).
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# The seed's apiserver reaches kubelet over the node's link only (logs, exec, port-forward); a development node.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# cgroup v1 on these machines.
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupRoot: /%[2]s
failSwapOn: false
protectKernelDefaults: false
containerRuntimeEndpoint: unix://%[3]s
clusterDNS: [%[4]s]
clusterDomain: %[9]s
resolvConf: %[5]s
podCIDR: %[6]s
podLogsDir: %[7]s
volumePluginDir: %[8]s
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "512Mi", imagefs.available: "512Mi"}
nodeStatusReportFrequency: 10s
syncFrequency: 10s
registerWithTaints: %[10]s
`, s.NodeIP, s.Name(), f.containerdSocket, dns, filepath.Join(cfg.Dir, "resolv.conf"), s.PodCIDR,
		filepath.Join(s.StateDir(), "pod-logs"), filepath.Join(s.StateDir(), "volume-plugins"), domain, taints)

	kubeProxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %[1]s}
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Nothing machine-wide: no conntrack table size, no route_localnet.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`, f.kubeconfig, s.Name(), s.PodCIDR)

	out := map[string]string{
		f.containerd: containerd, filepath.Join(cniConf, "10-"+s.Bridge()+".conflist"): cni, f.kubelet: kubelet,
		// Pods with dnsPolicy Default get this: no name server, since nothing outside the machine may be asked.
		filepath.Join(cfg.Dir, "resolv.conf"): "",
	}
	if cfg.Machine != nil {
		// A machine's name server is the seed's cluster DNS, the resolver of the network it sits in (as a cloud's
		// network has one): the shoot's CoreDNS forwards to it, and it answers for nothing outside the machine.
		out[filepath.Join(cfg.Dir, "resolv.conf")] = "nameserver " + cfg.Machine.Parent.DNSIP.String() + "\n"
		// kubelet renews its client certificate itself; it writes the kubeconfig once the first one is signed.
		out[f.kubelet] += "rotateCertificates: true\n"
		out[f.bootstrapKubeconfig] = string(cfg.Machine.BootstrapKubeconfig)
	} else {
		nodeKubeconfig, err := kubeconfigFor(cfg.Kubeconfig, "https://"+fwdAddr)
		if err != nil {
			return f, err
		}
		out[f.kubeProxy], out[f.kubeconfig], out[f.schedulerKubeconfig] = kubeProxy, string(nodeKubeconfig), string(cfg.Kubeconfig)
	}
	for path, content := range out {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return f, err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// kubeconfigFor returns kubeconfig with every cluster's server set to server.
func kubeconfigFor(kubeconfig []byte, server string) ([]byte, error) {
	c, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	for _, cluster := range c.Clusters {
		cluster.Server = server
	}
	return clientcmd.Write(*c)
}

// ImageRef returns the name of the image in testbin/images/<name>.tar, from the archive's manifest.
func ImageRef(testbin, name string) (string, error) {
	refs, err := archiveRefs(filepath.Join(testbin, "images", name+".tar"))
	if err != nil {
		return "", err
	}
	if len(refs) != 1 || !strings.HasPrefix(refs[0], "local.trellis.dev/"+name+":") {
		return "", fmt.Errorf("image archive %s: tags %v, want one local.trellis.dev/%s:<version>", name, refs, name)
	}
	return refs[0], nil
}

// ControlPlaneArchives are the archives of the shoot control plane's images in testbin (deploy/images'
// ControlPlaneImages), for a node whose seed's agent runs shoot control planes (Config.Images).
func ControlPlaneArchives(testbin string) []string {
	var out []string
	for _, name := range images.ControlPlaneImages {
		out = append(out, filepath.Join(testbin, "images", name+".tar"))
	}
	return out
}

// ControlPlaneImageVector is an image vector for the agent (agent/shoot/imagevector's form) that runs every shoot's
// control plane from the images of ControlPlaneArchives, and the system components in its shoots from the images its
// machines import (images.ShootSystemImages, and busybox for local-path-provisioner's helper pods), whatever the
// shoot's Kubernetes version.
func ControlPlaneImageVector(testbin string) ([]byte, error) {
	var b strings.Builder
	b.WriteString("images:\n")
	for _, name := range append(slices.Clone(images.ControlPlaneImages), images.ShootSystemImages...) {
		ref, err := ImageRef(testbin, name)
		if err != nil {
			return nil, err
		}
		repo, tag, _ := strings.Cut(strings.TrimPrefix(ref, images.Registry+"/"), ":")
		fmt.Fprintf(&b, "- name: %s\n  repository: %s/%s\n  tag: %q\n", name, images.Registry, repo, tag)
	}
	// The helper pods of local-path-provisioner run the tools image, which every machine imports.
	ref, err := ImageRef(testbin, "busybox")
	if err != nil {
		return nil, err
	}
	repo, tag, _ := strings.Cut(strings.TrimPrefix(ref, images.Registry+"/"), ":")
	fmt.Fprintf(&b, "- name: local-path-helper\n  repository: %s/%s\n  tag: %q\n", images.Registry, repo, tag)
	return []byte(b.String()), nil
}
