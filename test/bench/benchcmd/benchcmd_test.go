package benchcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

type report struct {
	Ops     int  `json:"ops"`
	printed bool // not in the JSON
}

func (r *report) Print() { r.printed = true }

// TestMainStatusReportAndContext: the report is printed and written as JSON whatever the outcome; the status is 1 after an error or a
// failed run and 0 otherwise; the run's context ends after the time limit and on SIGINT.
func TestMainStatusReportAndContext(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sub", "rep.json")
	for _, tc := range []struct {
		name   string
		failed bool
		err    error
		want   int
	}{{"ok", false, nil, 0}, {"failed", true, nil, 1}, {"error", false, errors.New("boom"), 1}} {
		rep := &report{Ops: 42}
		_ = os.Remove(out)
		status := runMain("bench-test", time.Minute, out, func(context.Context) (Report, bool, error) { return rep, tc.failed, tc.err })
		data, err := os.ReadFile(out)
		if status != tc.want || !rep.printed || err != nil || string(data) != "{\n  \"ops\": 42\n}\n" {
			t.Errorf("%s: status %d (want %d), printed %v, JSON %q %v", tc.name, status, tc.want, rep.printed, data, err)
		}
	}
	if status := runMain("bench-test", time.Minute, "", func(context.Context) (Report, bool, error) { return nil, false, nil }); status != 0 {
		t.Errorf("a run without a report: status %d", status)
	}

	status := runMain("bench-test", 50*time.Millisecond, "", func(ctx context.Context) (Report, bool, error) {
		<-ctx.Done()
		return nil, false, ctx.Err()
	})
	if status != 1 {
		t.Errorf("a run that hit the time limit: status %d, want 1", status)
	}

	var ended error
	runMain("bench-test", time.Minute, "", func(ctx context.Context) (Report, bool, error) {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return nil, false, err
		}
		select {
		case <-ctx.Done():
			ended = context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		return nil, false, nil
	})
	if ended == nil {
		t.Error("SIGINT did not end the run's context")
	}
}
