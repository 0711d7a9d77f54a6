package doctest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Session is one bash process that runs commands in order, so that what one sets is there for the next.
type Session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	marker string
	mu     sync.Mutex
}

// Start starts bash in dir with env (the whole environment of the session). Its stderr goes where its stdout goes.
func Start(dir string, env []string) (*Session, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	s := &Session{marker: "__doctest_" + hex.EncodeToString(b), lines: make(chan string, 1024)}
	s.cmd = exec.Command("bash", "--noprofile", "--norc")
	s.cmd.Dir, s.cmd.Env = dir, env
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	_ = w.Close()
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s, nil
}

// Run runs one command and returns what it printed and its exit code. A command still running after timeout is
// an error, and ends the session (bash is killed).
func (s *Session) Run(cmd string, timeout time.Duration) (string, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The command runs in the session itself (not a subshell), so exports and cd stay. The marker line, printed on
	// a line of its own, ends its output and carries its exit code; input is closed for the command, so that nothing
	// waits on the session's stdin.
	script := "{\n" + cmd + "\n} </dev/null\nprintf '\\n%s %d\\n' " + s.marker + " $?\n"
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return "", 0, fmt.Errorf("session: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return strings.Join(out, "\n"), 0, errors.New("the session ended")
			}
			if rest, found := strings.CutPrefix(line, s.marker+" "); found {
				rc, _ := strconv.Atoi(rest)
				// The marker is printed after a newline, so output without one still ends; that newline is not
				// the command's.
				if n := len(out); n > 0 && out[n-1] == "" {
					out = out[:n-1]
				}
				return strings.Join(out, "\n"), rc, nil
			}
			out = append(out, line)
		case <-ctx.Done():
			_ = s.cmd.Process.Kill()
			return strings.Join(out, "\n"), 0, fmt.Errorf("still running after %s", timeout)
		}
	}
}

// Close ends the session.
func (s *Session) Close() error {
	_ = s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		return <-done
	}
}
