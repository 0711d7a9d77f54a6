package localnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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
	// Images are further image archives to import (e.g. provider-local's from `make images`).
	Images []string
	// Log receives the node's progress; nil discards it.
	Log *slog.Logger
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
	if len(c.Kubeconfig) == 0 {
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
	ctrd, err := n.start(ctx, "containerd", true, bins.containerd, "--config", files.containerd)
	if err != nil {
		return nil, err
	}
	if err := waitFile(ctx, ctrd, files.containerdSocket); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	archives, err := n.imageArchives()
	if err != nil {
		return nil, err
	}
	for _, a := range archives {
		out, err := exec.CommandContext(ctx, bins.ctr, "--address", files.containerdSocket, "-n", "k8s.io", "images",
			"import", "--no-unpack=false", a).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("import image %s: %v: %s", a, err, out)
		}
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

// imageArchives returns the node's own image archives and the configured ones.
func (n *Node) imageArchives() ([]string, error) {
	var archives []string
	for _, name := range nodeImageNames {
		a := filepath.Join(n.cfg.Testbin, "images", name+".tar")
		if _, err := os.Stat(a); err != nil {
			return nil, fmt.Errorf("image archive %s: %w (run `make testbin`)", a, err)
		}
		archives = append(archives, a)
	}
	return append(archives, n.cfg.Images...), nil
}

// waitReady waits for the Node object to be Ready.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
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

// Client returns a clientset for the seed the node belongs to.
func (n *Node) Client() kubernetes.Interface { return n.client }

// Slot returns the node's slot: its networks and names.
func (n *Node) Slot() *Slot { return n.cfg.Slot }
