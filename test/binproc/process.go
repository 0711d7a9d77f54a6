package binproc

import (
	"bufio"
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

// Config says how to run a binary.
type Config struct {
	// Name names the process in errors and logs.
	Name string
	// Path is the binary.
	Path string
	// Args are its arguments.
	Args []string
	// Env is added to the parent's environment.
	Env []string
	// Dir is the working directory; empty is the parent's.
	Dir string
	// LogPath receives the process's standard output and error, appended, after a header line per start.
	LogPath string
	// Exited, if set, is called (on its own goroutine) when a run ends that nobody was stopping.
	Exited func(name string, err error)
}

// Process is one binary run as a child process, started and stopped any number of times. Create it with New.
// Its methods are safe for concurrent use.
type Process struct {
	cfg Config

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current run has ended
	err       error         // the current run's exit error, after done
	stopping  bool          // the current run is being stopped on purpose
	logOffset int64         // size of the log when the current run started
	started   time.Time
}

// New returns a process for cfg; it does not start it.
func New(cfg Config) *Process { return &Process{cfg: cfg} }

// Start returns a started process for cfg.
func Start(cfg Config) (*Process, error) {
	p := New(cfg)
	return p, p.Start()
}

// SetArgs replaces the arguments of the next start (for a child whose arguments are known only then).
func (p *Process) SetArgs(args ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Args = args
}

// Name is the process's name.
func (p *Process) Name() string { return p.cfg.Name }

// LogPath is the process's log file.
func (p *Process) LogPath() string { return p.cfg.LogPath }

// Start starts a run; it fails if one runs. The child gets its own process group (a terminal's Ctrl-C reaches only
// the parent, which stops its children in order) and, on Linux, dies with the parent.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s: already running (pid %d)", p.cfg.Name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.cfg.Name, err)
	}
	defer f.Close() // the child has its own descriptor
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.cfg.Name, err)
	}
	now := time.Now()
	fmt.Fprintf(f, "=== %s start %s: %s %s\n", p.cfg.Name, now.Format(time.RFC3339Nano), p.cfg.Path, strings.Join(p.cfg.Args, " "))
	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	cmd.Dir = p.cfg.Dir
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.cfg.Name, p.cfg.Path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.stopping = cmd, done, nil, false
	p.logOffset, p.started = fi.Size(), now
	go func() { // ends with the child, which Stop and Kill end
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		unexpected := !p.stopping
		p.mu.Unlock()
		close(done)
		if unexpected && p.cfg.Exited != nil {
			p.cfg.Exited(p.cfg.Name, err)
		}
	}()
	return nil
}

// Done returns a channel closed when the current run ends (nil if none started) and the run's start time.
func (p *Process) Done() (<-chan struct{}, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return nil, time.Time{}
	}
	return p.done, p.started
}

// Running reports whether a run is under way.
func (p *Process) Running() bool {
	done, _ := p.Done()
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

// PID is the process id of the current or last run (0 if none).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Err is how the last run ended: nil while it runs or after a zero exit status, else its *exec.ExitError.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ExitError describes how the last run ended, with the end of its log, for a process that was expected to run.
func (p *Process) ExitError() error {
	err := p.Err()
	if err == nil {
		err = errors.New("exited")
	}
	return fmt.Errorf("%s exited: %w; see %s:\n%s", p.cfg.Name, err, p.cfg.LogPath, p.Tail(2<<10))
}

// Stop ends the current run: SIGTERM, then SIGKILL after timeout, which it reports as an error. It returns nil when
// nothing runs.
func (p *Process) Stop(timeout time.Duration) error {
	return p.signal(syscall.SIGTERM, timeout)
}

// Kill ends the current run with SIGKILL at once: no shutdown, as a power cut would leave the process's state.
func (p *Process) Kill() error {
	return p.signal(syscall.SIGKILL, 0)
}

func (p *Process) signal(sig syscall.Signal, timeout time.Duration) error {
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
		return fmt.Errorf("%s: signal %v: %w", p.cfg.Name, sig, err)
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
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.cfg.Name, cmd.Process.Pid)
	}
	if sig != syscall.SIGKILL {
		return fmt.Errorf("%s did not stop within %s and was killed; see %s", p.cfg.Name, timeout, p.cfg.LogPath)
	}
	return nil
}

// LogSinceStart returns what the current (or last) run has written to the log so far.
func (p *Process) LogSinceStart() (string, error) { return p.LogSince(0) }

// LogSince returns what the current (or last) run has written to the log so far, from byte pos of its part on.
func (p *Process) LogSince(pos int64) (string, error) {
	p.mu.Lock()
	off := p.logOffset + pos
	p.mu.Unlock()
	f, err := os.Open(p.cfg.LogPath)
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

// Tail returns up to maxBytes bytes of the end of the log.
func (p *Process) Tail(maxBytes int64) string {
	f, err := os.Open(p.cfg.LogPath)
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

// TailLines returns the last n lines of the log.
func (p *Process) TailLines(n int) string { return TailLines(p.cfg.LogPath, n) }

// TailLines returns the last n lines of the file at path ("" when it cannot be read).
func TailLines(path string, n int) string {
	data, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// Problems counts the warning and error lines (slog's level=WARN and level=ERROR) the current (or last) run logged
// and returns the first keep of them.
func (p *Process) Problems(keep int) (count int, first []string) {
	out, err := p.LogSinceStart()
	if err != nil {
		return 0, nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			count++
			if len(first) < keep {
				first = append(first, line)
			}
		}
	}
	return count, first
}
