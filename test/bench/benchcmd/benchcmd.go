package benchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// Report is a benchmark's report: printed for people, and written as JSON.
type Report interface {
	// Print prints the report to standard output.
	Print()
}

// Run is a benchmark's run. It returns its report (nil: none to print or write, also with an error), whether the
// run failed what it checks, and an error that ended it early.
type Run func(ctx context.Context) (rep Report, failed bool, err error)

// Main runs run under a context that ends on SIGINT, SIGTERM or after timeout; it prints the report run returns and
// writes it as JSON to out (unless out is empty), reports an error on standard error prefixed with name (such as
// "bench-agents"), and exits the process: with status 1 after an error or a failed run, else 0.
func Main(name string, timeout time.Duration, out string, run Run) {
	os.Exit(runMain(name, timeout, out, run))
}

func runMain(name string, timeout time.Duration, out string, run Run) int {
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		// After the first signal the run stops what it started, which may take a while; a second signal ends the
		// process at once (the children a benchmark starts die with it: parent-death signal).
		<-sigCtx.Done()
		stop()
	}()
	defer func() {
		stop()
		<-stopped
	}()
	ctx, cancel := context.WithTimeout(sigCtx, timeout)
	defer cancel()
	rep, failed, err := run(ctx)
	status := 0
	if rep != nil {
		rep.Print()
		if out != "" {
			if werr := WriteJSON(out, rep); werr != nil {
				fmt.Fprintln(os.Stderr, name+":", werr)
				status = 1
			} else {
				fmt.Printf("results written to %s\n", out)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		status = 1
	}
	if failed {
		status = 1
	}
	return status
}

// WriteJSON writes v as indented JSON, with a final newline, to path, making its directory.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
