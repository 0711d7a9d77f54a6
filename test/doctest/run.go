package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CommandTimeout bounds each command of a document.
const CommandTimeout = 3 * time.Minute

// Check runs the examples of the Markdown document at path in one session started in dir with env and returns the
// number of commands run and a message for every command whose output differs from the document's or that failed
// where the document shows no output. err is for what stops the run: an unreadable document, a document without
// examples, a session that cannot start or a command that does not end.
func Check(path, dir string, env []string) (n int, failures []string, err error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	steps := Parse(doc)
	if len(steps) == 0 {
		return 0, nil, fmt.Errorf("%s has no %q blocks", path, Info)
	}
	s, err := Start(dir, env)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = s.Close() }()
	name := filepath.Base(path)
	for _, st := range steps {
		got, rc, err := s.Run(st.Command, CommandTimeout)
		if err != nil {
			return n, failures, fmt.Errorf("%s:%d: $ %s\n%w\noutput so far:\n%s", name, st.Line, st.Command, err, got)
		}
		n++
		if len(st.Want) == 0 {
			if rc != 0 {
				failures = append(failures, fmt.Sprintf("%s:%d: $ %s\nexited %d:\n%s", name, st.Line, st.Command, rc, got))
			}
			continue
		}
		if err := Match(st.Want, got); err != nil {
			failures = append(failures, fmt.Sprintf("%s:%d: $ %s\n%v", name, st.Line, st.Command, err))
		}
	}
	return n, failures, nil
}

// RunFile is Check as a test: each failure fails t, and so does what stops the run.
func RunFile(t *testing.T, path, dir string, env []string) int {
	t.Helper()
	n, failures, err := Check(path, dir, env)
	for _, f := range failures {
		t.Error(f)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}
