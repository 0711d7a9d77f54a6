package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TaskFn is the work of a task. It must be idempotent and must return when ctx ends.
type TaskFn func(ctx context.Context) error

// Task is a node of a Graph.
type Task struct {
	// Name identifies the task in the graph, in logs and in errors (Gardener's task IDs, e.g. "Deploying
	// Infrastructure").
	Name string
	// Fn is the work; nil is a no-op (a synchronisation point).
	Fn TaskFn
	// Dependencies name tasks that must have succeeded before this one starts.
	Dependencies []string
	// Skip leaves the task out: it counts as succeeded at once, so dependants run.
	Skip bool
	// Timeout bounds the task including its retries; 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryInterval is the pause between attempts; 0 means DefaultRetryInterval. A task is retried until it
	// succeeds, its Timeout passes, or it returns a Permanent error.
	RetryInterval time.Duration
}

// Defaults of Task.
const (
	DefaultTimeout       = 5 * time.Minute
	DefaultRetryInterval = 2 * time.Second
)

// Graph is a DAG of tasks. It is not safe for concurrent use while it is being built.
type Graph struct {
	name  string
	tasks map[string]*Task
	order []string
}

// New returns an empty graph called name.
func New(name string) *Graph { return &Graph{name: name, tasks: map[string]*Task{}} }

// Name is the graph's name.
func (g *Graph) Name() string { return g.name }

// Add adds t and returns its name, for use in later Dependencies. It panics when the name is empty or taken or a
// dependency is unknown: graphs are built by code, so these are programming errors, and adding dependencies only on
// earlier tasks makes cycles impossible.
func (g *Graph) Add(t Task) string {
	if t.Name == "" {
		panic("flow: task without a name")
	}
	if _, dup := g.tasks[t.Name]; dup {
		panic(fmt.Sprintf("flow: task %q added twice", t.Name))
	}
	for _, d := range t.Dependencies {
		if _, ok := g.tasks[d]; !ok {
			panic(fmt.Sprintf("flow: task %q depends on unknown task %q", t.Name, d))
		}
	}
	t.Dependencies = slices.Clone(t.Dependencies)
	g.tasks[t.Name] = &t
	g.order = append(g.order, t.Name)
	return t.Name
}

// Len is the number of tasks.
func (g *Graph) Len() int { return len(g.tasks) }

// Progress is reported after each task ends.
type Progress struct {
	// Done counts the tasks that succeeded or were skipped; Total is the number of tasks.
	Done, Total int
	// Percent is Done*100/Total, at most 99 until the graph finished.
	Percent int32
	// Running names the tasks running now, sorted.
	Running []string
	// Finished names the task that just ended.
	Finished string
}

// Description is a human summary of the running tasks, as Gardener writes into lastOperation.description.
func (p Progress) Description() string {
	if len(p.Running) == 0 {
		return ""
	}
	return strings.Join(p.Running, ", ")
}

// Opts configure a run.
type Opts struct {
	// Log receives a line per task start, retry and end; nil discards.
	Log *slog.Logger
	// OnProgress is called after each task ends, from the goroutine that runs the graph, never concurrently.
	OnProgress func(Progress)
}

type result struct {
	name string
	err  error
}

// Run runs the graph until every task succeeded or one failed for good. It returns nil or an *Error.
func (g *Graph) Run(ctx context.Context, o Opts) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("flow", g.name)
	pending := map[string]int{} // task → unfinished dependencies
	dependants := map[string][]string{}
	for _, n := range g.order {
		t := g.tasks[n]
		pending[n] = len(t.Dependencies)
		for _, d := range t.Dependencies {
			dependants[d] = append(dependants[d], n)
		}
	}
	var (
		ready   []string
		running = map[string]bool{}
		results = make(chan result)
		failed  = map[string]error{}
		done    int
		wg      sync.WaitGroup
	)
	for _, n := range g.order {
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	start := func(n string) {
		t := g.tasks[n]
		running[n] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runTask(ctx, log, g.name, t)
			results <- result{name: n, err: err}
		}()
	}
	total := len(g.order)
	for done+len(failed) < total {
		// Skipped tasks finish at once; the rest start while nothing has failed.
		for len(ready) > 0 {
			n := ready[0]
			ready = ready[1:]
			if g.tasks[n].Skip || g.tasks[n].Fn == nil {
				done++
				for _, d := range dependants[n] {
					if pending[d]--; pending[d] == 0 {
						ready = append(ready, d)
					}
				}
				continue
			}
			if len(failed) == 0 && ctx.Err() == nil {
				start(n)
			}
		}
		if len(running) == 0 {
			break
		}
		r := <-results
		delete(running, r.name)
		if r.err != nil {
			failed[r.name] = r.err
			log.Warn("task failed", "task", r.name, "err", r.err)
		} else {
			done++
			for _, d := range dependants[r.name] {
				if pending[d]--; pending[d] == 0 {
					ready = append(ready, d)
				}
			}
		}
		if o.OnProgress != nil {
			p := Progress{Done: done, Total: total, Finished: r.name}
			for n := range running {
				p.Running = append(p.Running, n)
			}
			sort.Strings(p.Running)
			p.Percent = int32(done * 100 / total)
			if p.Percent > 99 {
				p.Percent = 99
			}
			o.OnProgress(p)
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		return &Error{Flow: g.name, Failed: failed}
	}
	if done < total { // ctx ended before every task could start
		return &Error{Flow: g.name, Failed: map[string]error{"": fmt.Errorf("flow %q stopped: %w", g.name, context.Cause(ctx))}}
	}
	return nil
}

// runTask runs t with retries until it succeeds, fails permanently, or its timeout or ctx ends.
func runTask(ctx context.Context, log *slog.Logger, flowName string, t *Task) (err error) {
	timeout, interval := t.Timeout, t.RetryInterval
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if interval <= 0 {
		interval = DefaultRetryInterval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	begin := time.Now()
	ctx, span := tracer.Start(ctx, t.Name, trace.WithAttributes(attribute.String("flow", flowName)))
	defer func() {
		outcome := "success"
		if err != nil {
			outcome = "error"
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		taskDuration.WithLabelValues(flowName, t.Name, outcome).Observe(time.Since(begin).Seconds())
	}()
	log.Debug("task started", "task", t.Name)
	for attempt := 1; ; attempt++ {
		err = t.Fn(ctx)
		if err == nil {
			log.Debug("task succeeded", "task", t.Name, "attempts", attempt, "took", time.Since(begin).Round(time.Millisecond))
			return nil
		}
		if IsPermanent(err) {
			return err
		}
		if ctx.Err() != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			return fmt.Errorf("%s: timed out after %s: %w", t.Name, time.Since(begin).Round(time.Second), err)
		}
		log.Debug("task attempt failed; retrying", "task", t.Name, "attempt", attempt, "err", err)
		tm := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			tm.Stop()
			return fmt.Errorf("%s: timed out after %s: %w", t.Name, time.Since(begin).Round(time.Second), err)
		case <-tm.C:
		}
	}
}

// Error is the result of a failed run.
type Error struct {
	// Flow is the graph's name.
	Flow string
	// Failed maps the name of each failed task to its last error.
	Failed map[string]error
}

// Error lists the failed tasks in name order.
func (e *Error) Error() string {
	names := e.Tasks()
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if n == "" {
			parts = append(parts, e.Failed[n].Error())
			continue
		}
		parts = append(parts, fmt.Sprintf("task %q failed: %v", n, e.Failed[n]))
	}
	return fmt.Sprintf("flow %q: %s", e.Flow, strings.Join(parts, "; "))
}

// Tasks names the failed tasks, sorted.
func (e *Error) Tasks() []string {
	names := make([]string, 0, len(e.Failed))
	for n := range e.Failed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Unwrap returns the tasks' errors, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, n := range e.Tasks() {
		out = append(out, e.Failed[n])
	}
	return out
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the task fails at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}
