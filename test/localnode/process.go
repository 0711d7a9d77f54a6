package localnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/test/timescale"
)

// binaries are the paths of the node's programs.
type binaries struct {
	containerd, ctr, shimDir, kubelet, kubeProxy, kubeScheduler, runc, cniDir string
}

// findBinaries finds the node's programs in testbin/node (`make testbin`) and runc and the CNI plugins where Debian
// installs them.
func findBinaries(testbin string) (binaries, error) {
	node := filepath.Join(testbin, "node")
	b := binaries{
		containerd: filepath.Join(node, "containerd"), ctr: filepath.Join(node, "ctr"), shimDir: node,
		kubelet: filepath.Join(node, "kubelet"), kubeProxy: filepath.Join(node, "kube-proxy"),
		kubeScheduler: filepath.Join(node, "kube-scheduler"), runc: "/usr/sbin/runc", cniDir: "/usr/lib/cni",
	}
	var missing []string
	for _, p := range []string{b.containerd, b.ctr, filepath.Join(node, "containerd-shim-runc-v2"), b.kubelet,
		b.kubeProxy, b.kubeScheduler, b.runc, filepath.Join(b.cniDir, "bridge"), filepath.Join(b.cniDir, "host-local"),
		filepath.Join(b.cniDir, "loopback"), filepath.Join(b.cniDir, "portmap")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	for _, tool := range []string{"ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing %s: run `make testbin`", strings.Join(missing, ", "))
	}
	return b, nil
}

// process is a running program of the node.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited; err is then its status
	err  error
}

// start runs a program with its output in <Dir>/<name>.log, in the node's network namespace when inNetNS. The
// process gets a parent-death signal (SIGKILL), so it dies with this process even when that is killed; its own
// process group keeps a terminal's Ctrl-C away from it.
func (n *Node) start(ctx context.Context, name string, inNetNS bool, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(n.cfg.Dir, name+".log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	argv := append([]string{bin}, args...)
	if inNetNS {
		argv = append([]string{"nsenter", "--net=" + n.cfg.Slot.NetNSPath(), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	// The runc shim must come first on PATH: containerd starts containerd-shim-runc-v2 by name.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(n.cfg.Testbin, "node")+":/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	n.log.Debug("started", "process", name, "pid", cmd.Process.Pid, "log", logPath)
	return p, ctx.Err()
}

// stop sends SIGTERM and, after grace, SIGKILL, and waits for the process.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFile waits until path exists, failing if p exits first.
func waitFile(ctx context.Context, p *process, path string) error {
	ctx, cancel := context.WithTimeout(ctx, timescale.Scale(startTimeout))
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before creating %s: %v", path, p.err)
		case <-ctx.Done():
			return fmt.Errorf("no %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTails returns the end of each process's log, for errors.
func (n *Node) logTails() string {
	const tailBytes = 3 << 10
	var b strings.Builder
	for _, p := range n.procs {
		f, err := os.Open(p.log)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
			_, _ = f.Seek(-tailBytes, io.SeekEnd)
		}
		tail, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		fmt.Fprintf(&b, "\n--- end of %s ---\n%s", p.log, tail)
	}
	return b.String()
}
