package localnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/test/timescale"
)

// Config says how to run a node.
type Config struct {
	// Slot is the node's slot from Reserve; Stop releases it.
	Slot *Slot
	// Dir holds the node's configuration files and the logs of its processes.
	Dir string
	// Testbin is bin/testbin of `make testbin`: node/ holds the binaries, images/ the node's image archives.
	Testbin string
	// Kubeconfig reaches the seed's kube-apiserver (on host loopback) as an administrator; the node's components use
	// its credentials, through the forwarder on the slot's HostIP.
	Kubeconfig []byte
	// Images are further image archives to import (e.g. provider-local's from `make images`); a machine imports them
	// while its kubelet bootstraps, so that they are there before its start returns.
	Images []string
	// Log receives the node's progress; nil discards it.
	Log *slog.Logger
	// Machine, when set, makes the node a machine of a shoot instead of a seed's node (see Machine).
	Machine *Machine
}

// Machine configures a node that is a machine of a shoot, made by the local machine provider (test/localmachine):
// containerd and a kubelet only (a shoot's kube-proxy, DNS and scheduling are the shoot's business), the kubelet
// registering to the shoot's kube-apiserver with Kubernetes' TLS bootstrap (a bootstrap token, then a client
// certificate signed by the shoot's kube-controller-manager). Its link joins the network namespace of the seed's
// node (Parent) instead of the host's: the machine reaches the shoot's kube-apiserver at its ClusterIP in the seed
// (the seed node's kube-proxy translates it), and the shoot's kube-apiserver, a pod of the seed, reaches the kubelet
// at the machine's InternalIP (logs, exec, port-forward), with no forwarding on the host.
type Machine struct {
	// Parent is the slot of the seed's running node.
	Parent *Slot
	// NodeName is the Node's name (Gardener: the machine's name).
	NodeName string
	// BootstrapKubeconfig reaches the shoot's kube-apiserver with a bootstrap token.
	BootstrapKubeconfig []byte
	// Labels are the Node's labels (kubelet --node-labels).
	Labels map[string]string
	// ClusterDNS and ClusterDomain are the kubelet's clusterDNS and clusterDomain from the shoot's kubelet
	// configuration (the CoreDNS Service in the shoot); empty: the slot's DNS IP and cluster.local.
	ClusterDNS    string
	ClusterDomain string
	// RegisterWithTaints are the taints the kubelet registers the Node with, from the shoot's kubelet configuration
	// (Gardener's node.gardener.cloud/critical-components-not-ready, which the agent removes once the node's critical
	// components are ready).
	RegisterWithTaints []corev1.Taint
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Slot == nil || c.Slot.lock == nil {
		errs = append(errs, errors.New("slot: not reserved"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: empty"))
	}
	if c.Testbin == "" {
		errs = append(errs, errors.New("testbin: empty"))
	}
	if m := c.Machine; m != nil {
		if m.Parent == nil || m.Parent.lock == nil {
			errs = append(errs, errors.New("machine.parent: not a reserved slot"))
		}
		if m.NodeName == "" {
			errs = append(errs, errors.New("machine.nodeName: empty"))
		}
		if len(m.BootstrapKubeconfig) == 0 {
			errs = append(errs, errors.New("machine.bootstrapKubeconfig: empty"))
		}
		if m.ClusterDNS != "" && net.ParseIP(m.ClusterDNS) == nil {
			errs = append(errs, fmt.Errorf("machine.clusterDNS: %q is no IP address", m.ClusterDNS))
		}
	} else if len(c.Kubeconfig) == 0 {
		errs = append(errs, errors.New("kubeconfig: empty"))
	}
	return errors.Join(errs...)
}

// Node is a running node.
type Node struct {
	// Name is the Node object's name.
	Name string
	// StartDuration is how long Start took, from setting up the network to CoreDNS and the provisioner being available.
	StartDuration time.Duration

	cfg      Config
	log      *slog.Logger
	client   kubernetes.Interface
	fwd      *Forwarder
	procs    []*process // in start order; stopped in reverse
	stopOnce sync.Once
	stopErr  error
}

// startTimeout bounds each wait of the start (a process ready, the node Ready, an add-on available).
const startTimeout = 90 * time.Second

// Start sets up the slot's network and runs the node's processes and add-ons; it returns once the node is Ready and
// CoreDNS and local-path-provisioner are available. On error everything is removed again and the slot released.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("localnode: %w", err)
	}
	begin := time.Now()
	n := &Node{cfg: cfg, Name: cfg.Slot.Name(), log: cfg.Log}
	if cfg.Machine != nil {
		n.Name = cfg.Machine.NodeName
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("localnode %s: %w%s", n.Name, err, n.logTails())
			_ = n.Stop()
		}
	}()
	bins, err := findBinaries(cfg.Testbin)
	if err != nil {
		return nil, err
	}
	if cfg.Machine != nil {
		if err := n.startMachine(ctx, bins); err != nil {
			return nil, err
		}
		n.StartDuration = time.Since(begin)
		n.log.Info("machine started", "node", n.Name, "in", n.StartDuration.Round(time.Millisecond))
		return n, nil
	}
	apiConfig, err := clientcmd.RESTConfigFromKubeConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if n.client, err = kubernetes.NewForConfig(apiConfig); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Dir, cfg.Slot.StateDir(), cfg.Slot.RunDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := setupNetwork(cfg.Slot); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if err := cfg.Slot.createCgroups(); err != nil {
		return nil, err
	}
	if n.fwd, err = StartForwarder(apiConfig.Host, cfg.Slot.HostIP.String()); err != nil {
		return nil, fmt.Errorf("apiserver forwarder: %w", err)
	}
	files, err := writeConfigs(cfg, bins, apiConfig, n.fwd.addr)
	if err != nil {
		return nil, err
	}
	n.log.Info("starting node", "node", n.Name, "pods", cfg.Slot.PodCIDR, "services", cfg.Slot.ServiceCIDR,
		"nodeIP", cfg.Slot.NodeIP)

	// containerd first: kubelet needs its socket, and the images must be there before pods are created.
	if err := n.startContainerd(ctx, bins, files, nodeImageNames); err != nil {
		return nil, err
	}
	if _, err := n.start(ctx, "kubelet", true, bins.kubelet, "--config", files.kubelet, "--kubeconfig", files.kubeconfig,
		"--root-dir", filepath.Join(cfg.Slot.StateDir(), "kubelet"), "--hostname-override", n.Name,
		"--node-ip", cfg.Slot.NodeIP.String()); err != nil {
		return nil, err
	}
	if _, err := n.start(ctx, "kube-proxy", true, bins.kubeProxy, "--config", files.kubeProxy); err != nil {
		return nil, err
	}
	if _, err := n.start(ctx, "kube-scheduler", false, bins.kubeScheduler, "--kubeconfig", files.schedulerKubeconfig,
		"--leader-elect=false", "--secure-port=0"); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := n.deleteOtherNodes(ctx); err != nil {
		return nil, err
	}
	if err := n.deployAddons(ctx); err != nil {
		return nil, err
	}
	n.StartDuration = time.Since(begin)
	n.log.Info("node ready", "node", n.Name, "in", n.StartDuration.Round(time.Millisecond))
	return n, nil
}

// startContainerd starts containerd on a copy of the machine's image root of the images named (from testbin/images)
// and, unless the node is a machine (which imports them while its kubelet bootstraps: startMachine), the configured
// ones, and imports those the copy does not hold.
func (n *Node) startContainerd(ctx context.Context, bins binaries, files files, images []string) error {
	archives, err := n.imageArchives(images)
	if err != nil {
		return err
	}
	if n.cfg.Machine == nil {
		archives = append(archives, n.cfg.Images...)
	}
	archives = n.cloneImageRoot(ctx, bins, archives)
	ctrd, err := n.start(ctx, "containerd", true, bins.containerd, "--config", files.containerd)
	if err != nil {
		return err
	}
	if err := waitFile(ctx, ctrd, files.containerdSocket); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	return importArchives(ctx, bins.ctr, files.containerdSocket, archives)
}

// cloneImageRoot makes the node's containerd root a copy of the machine's image root holding the archives of
// testbin/images among archives (imageRoots), and returns the archives left to import: the others, or all of them
// when the cache is off or the copy failed (logged).
func (n *Node) cloneImageRoot(ctx context.Context, bins binaries, archives []string) []string {
	var fromTestbin, rest []string
	// The same directory however the caller named it (a test's relative testbin, seedtest's absolute one).
	dir, err := filepath.Abs(filepath.Join(n.cfg.Testbin, "images"))
	if err != nil {
		return archives
	}
	for _, a := range archives {
		if abs, err := filepath.Abs(a); err == nil && filepath.Dir(abs) == dir {
			fromTestbin = append(fromTestbin, a)
		} else {
			rest = append(rest, a)
		}
	}
	if len(fromTestbin) == 0 {
		return archives
	}
	roots, err := newImageRoots(bins)
	if err != nil || roots == nil {
		if err != nil {
			n.log.Info("importing the node's images: no image root", "err", err)
		}
		return archives
	}
	begin := time.Now()
	root, built, err := roots.clone(ctx, fromTestbin, containerdRoot(n.cfg.Slot))
	if err != nil {
		n.log.Info("importing the node's images: image root not copied", "err", err)
		return archives
	}
	n.log.Info("images from the machine's image root", "node", n.Name, "images", len(fromTestbin), "root", root,
		"built", built, "in", time.Since(begin).Round(time.Millisecond))
	return rest
}

// importArchives imports image archives with ctr into the containerd at sock, in the CRI's namespace, unpacked.
func importArchives(ctx context.Context, ctr, sock string, archives []string) error {
	for _, a := range archives {
		out, err := exec.CommandContext(ctx, ctr, "--address", sock, "-n", "k8s.io", "images", "import",
			"--no-unpack=false", a).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import image %s: %v: %s", a, err, out)
		}
	}
	return nil
}

// startMachine sets up a machine (Config.Machine): its link into the seed node's network namespace, containerd
// with the pause and busybox images, and kubelet, which it waits for until the TLS bootstrap has given kubelet its
// client certificate (the shoot's kube-controller-manager approved and signed its CSR; startTimeout).
func (n *Node) startMachine(ctx context.Context, bins binaries) error {
	cfg := n.cfg
	for _, d := range []string{cfg.Dir, cfg.Slot.StateDir(), cfg.Slot.RunDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := setupMachineNetwork(cfg.Slot, cfg.Machine.Parent); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := cfg.Slot.createCgroups(); err != nil {
		return err
	}
	files, err := writeConfigs(cfg, bins, nil, "")
	if err != nil {
		return err
	}
	n.log.Info("starting machine", "node", n.Name, "pods", cfg.Slot.PodCIDR, "nodeIP", cfg.Slot.NodeIP,
		"parent", cfg.Machine.Parent.Name())
	if err := n.startContainerd(ctx, bins, files, machineImageNames); err != nil {
		return err
	}
	kubelet, err := n.start(ctx, "kubelet", true, bins.kubelet, "--config", files.kubelet,
		"--bootstrap-kubeconfig", files.bootstrapKubeconfig, "--kubeconfig", files.kubeconfig,
		"--cert-dir", filepath.Join(cfg.Slot.StateDir(), "kubelet", "pki"),
		"--root-dir", filepath.Join(cfg.Slot.StateDir(), "kubelet"), "--hostname-override", n.Name,
		"--node-ip", cfg.Slot.NodeIP.String(), "--node-labels", labelFlag(cfg.Machine.Labels))
	if err != nil {
		return err
	}
	// The further images (Config.Images: what a ManagedSeed runs on the machine) are not needed before the shoot is
	// reconciled, which waits for this machine: they are imported while kubelet bootstraps.
	if err := importArchives(ctx, bins.ctr, files.containerdSocket, cfg.Images); err != nil {
		return err
	}
	// kubelet writes its kubeconfig at once and bootstraps in the background; the certificate it names comes once the
	// shoot's kube-controller-manager signed the CSR.
	if err := waitFile(ctx, kubelet, filepath.Join(cfg.Slot.StateDir(), "kubelet", "pki", "kubelet-client-current.pem")); err != nil {
		return fmt.Errorf("kubelet's TLS bootstrap: %w", err)
	}
	return nil
}

// labelFlag renders labels as kubelet's --node-labels value, sorted.
func labelFlag(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// imageArchives returns the archives of the images named (from testbin/images).
func (n *Node) imageArchives(names []string) ([]string, error) {
	var archives []string
	for _, name := range names {
		a := filepath.Join(n.cfg.Testbin, "images", name+".tar")
		if _, err := os.Stat(a); err != nil {
			return nil, fmt.Errorf("image archive %s: %w (run `make testbin`)", a, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

// waitReady waits for the Node object to be Ready.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, timescale.Scale(startTimeout))
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node not Ready (%s): %w", last, err)
	}
	return nil
}

// deleteOtherNodes deletes the Node objects of earlier runs on the seed's data (a seed restarted in another slot):
// the pod garbage collector then removes their pods, and their workloads' replacements come to this node.
func (n *Node) deleteOtherNodes(ctx context.Context) error {
	nodes, err := n.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, node := range nodes.Items {
		if node.Name == n.Name {
			continue
		}
		n.log.Info("deleting the Node of an earlier run", "node", node.Name)
		if err := n.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete stale node %s: %w", node.Name, err)
		}
	}
	return nil
}

// exited returns an error naming a process of the node that exited.
func (n *Node) exited() error {
	for _, p := range n.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		default:
		}
	}
	return nil
}

// Stop stops the node's processes (newest first: SIGTERM, SIGKILL after 10 s) and the forwarder, removes everything
// the node changed on the machine and releases its slot. Later calls return the first call's result.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		var errs []error
		for i := len(n.procs) - 1; i >= 0; i-- {
			n.procs[i].stop(10 * time.Second)
		}
		if n.fwd != nil {
			n.fwd.Close()
		}
		if err := n.cfg.Slot.cleanup(); err != nil {
			errs = append(errs, err)
		}
		if left := n.cfg.Slot.Leftovers(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left on the machine: %s", strings.Join(left, ", ")))
		}
		n.cfg.Slot.Release()
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// Deregister deletes a machine's Node object (Config.Machine) with the kubelet's own credentials, as a cloud's
// machine controller deletes the Node of a machine it removes (the Node authorizer and NodeRestriction let a node
// delete itself). Call it before Stop; a seed's node has nothing to deregister.
func (n *Node) Deregister(ctx context.Context) error {
	if n.cfg.Machine == nil {
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(n.cfg.Dir, "node.kubeconfig"))
	if err != nil {
		return fmt.Errorf("deregister %s: %w", n.Name, err)
	}
	cfg.Timeout = 10 * time.Second
	// The kubeconfig names kubelet's rotating certificate file: read it as it is now.
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("deregister %s: %w", n.Name, err)
	}
	if err := c.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deregister %s: %w", n.Name, err)
	}
	return nil
}

// Client returns a clientset for the seed the node belongs to.
func (n *Node) Client() kubernetes.Interface { return n.client }

// Slot returns the node's slot: its networks and names.
func (n *Node) Slot() *Slot { return n.cfg.Slot }
