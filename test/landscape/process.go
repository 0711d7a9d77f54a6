package landscape

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process of the landscape, started and stopped any number of times; its output goes to
// logPath, appended, after a header line per start.
type process struct {
	name    string
	path    string
	args    []string
	env     []string // added to the parent's environment
	dir     string
	logPath string
	// exited reports a run that ended while nobody was stopping it; may be nil.
	exited func(name string, err error)

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current run has ended
	err       error         // the current run's exit error, after done
	stopping  bool          // the current run is being stopped on purpose
	logOffset int64         // size of the log when the current run started
	started   time.Time
}

// start starts a run; it fails if one runs.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s: already running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.name, err)
	}
	defer f.Close() // the child has its own descriptor
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.name, err)
	}
	now := time.Now()
	fmt.Fprintf(f, "=== landscape %s: %s %s\n", now.Format(time.RFC3339), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.name, p.path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.stopping = cmd, done, nil, false
	p.logOffset, p.started = fi.Size(), now
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		unexpected := !p.stopping
		p.mu.Unlock()
		close(done)
		if unexpected && p.exited != nil {
			p.exited(p.name, err)
		}
	}()
	return nil
}

// run returns the channel of the current run (nil if none) and its start time.
func (p *process) run() (chan struct{}, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done, p.started
}

// running reports whether a run is under way.
func (p *process) running() bool {
	done, _ := p.run()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// pid is the process id of the current or last run (0 if none).
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exitError describes how the last run ended, with the end of its log, for a process that was expected to run.
func (p *process) exitError() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		err = errors.New("exited")
	}
	return fmt.Errorf("%s exited: %w; see %s:\n%s", p.name, err, p.logPath, p.tail(2<<10))
}

// stop ends the current run: SIGTERM, then SIGKILL after timeout. It returns nil when nothing runs.
func (p *process) stop(timeout time.Duration) error {
	return p.signal(syscall.SIGTERM, timeout)
}

// kill ends the current run with SIGKILL at once.
func (p *process) kill() error {
	return p.signal(syscall.SIGKILL, 0)
}

func (p *process) signal(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	if p.done == nil {
		p.mu.Unlock()
		return nil
	}
	p.stopping = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: signal %v: %w", p.name, sig, err)
	}
	if sig != syscall.SIGKILL {
		select {
		case <-done:
			return nil
		case <-time.After(timeout):
		}
		_ = cmd.Process.Kill()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, cmd.Process.Pid)
	}
	if sig != syscall.SIGKILL {
		return fmt.Errorf("%s did not stop within %s and was killed; see %s", p.name, timeout, p.logPath)
	}
	return nil
}

// logSinceStart returns what the current (or last) run has written to the log so far.
func (p *process) logSinceStart() (string, error) {
	p.mu.Lock()
	off := p.logOffset
	p.mu.Unlock()
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// tail returns up to maxBytes bytes of the end of the log.
func (p *process) tail(maxBytes int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return ""
		}
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
