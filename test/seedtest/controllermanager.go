package seedtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// controllers are the kube-controller-manager controllers a seed runs: what a seed's namespaces and owner references
// need, and the deployment and replica set controllers, which keep Deployments' status (observed generation,
// availability) as in a real seed, so that the health of what a ControllerInstallation deployed is judged on real
// status. Nothing that needs nodes or cloud providers runs: pods are created but never scheduled, so a Deployment
// with replicas stays unavailable, one scaled to zero is available. Service account tokens are not among them: the
// ServiceAccount admission plugin is off and every controller uses the admin credentials.
var controllers = []string{"namespace-controller", "garbage-collector-controller", "deployment-controller", "replicaset-controller"}

// controllerManager is a running kube-controller-manager. Unlike etcd and kube-apiserver it is not an envtest
// process: envtest knows only those two.
type controllerManager struct {
	cmd *exec.Cmd
	// exited is closed when the process has exited; err is then its exit status.
	exited   chan struct{}
	err      error
	stopping bool // stop killed it; only the goroutine calling stop reads and writes it
}

// startControllerManager starts kube-controller-manager at path (a process path from processPath), reaching the
// seed with the kubeconfig file. It serves nothing (no secure port), elects no leader and runs controllers.
// It runs the controllers named in run (a seed with a node runs more than controllers), with extra arguments.
func startControllerManager(path, kubeconfig string, out io.Writer, run []string, extra ...string) (*controllerManager, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(run, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		// The defaults (20, 30) are for a shared production apiserver; a test seed has nobody to protect, and the
		// garbage collector's deletions should not queue behind a client-side limiter.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	cmd := exec.Command(path, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &controllerManager{cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// stop kills the process and waits for it. The controller manager keeps no state and holds no lease, so nothing is
// lost by killing it, and a SIGTERM would cost a second of graceful shutdown per seed. stop returns an error if the
// process had exited before: a seed whose controllers died during a test is a failure of that test.
func (c *controllerManager) stop() error {
	select {
	case <-c.exited:
		if c.stopping {
			return nil
		}
		return fmt.Errorf("kube-controller-manager exited while the seed ran: %v", c.err)
	default:
	}
	c.stopping = true
	_ = c.cmd.Process.Kill()
	<-c.exited
	return nil
}

// errExited reports a controller manager that exited while it was awaited.
var errExited = errors.New("kube-controller-manager exited")

// waitCollecting waits until the controller manager's garbage collector works: it deletes the owner of a probe
// ConfigMap and waits for the collector to delete the probe. The collector starts once it has listed every resource
// type, at the same time as the namespace controller, so this also bounds the namespace controller's start.
func (s *Seed) waitCollecting(ctx context.Context) error {
	cms := s.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "seedtest-gc-probe-"}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create probe owner: %w", err)
	}
	probe, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: owner.Name + "-",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create probe: %w", err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete probe owner: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := cms.Get(ctx, probe.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("get probe: %w", err)
		}
		select {
		case <-s.kcm.exited:
			return fmt.Errorf("%w: %v", errExited, s.kcm.err)
		case <-ctx.Done():
			return fmt.Errorf("garbage collector did not delete ConfigMap %s/%s after its owner: %w",
				probe.Namespace, probe.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

// controllerManagerOutput returns where the controller manager writes: stdout when envtest's switch sends the other
// processes' output there, else kube-controller-manager.log in the seed's directory.
func (s *Seed) controllerManagerOutput() (io.Writer, error) {
	if os.Getenv(envAttachOutput) == "true" {
		return os.Stdout, nil
	}
	return s.logFile("kube-controller-manager.log")
}
