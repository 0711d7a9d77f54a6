// Package flow owns the agent's task graphs: a DAG of named tasks that run as soon as their dependencies have
// succeeded, in parallel where the graph allows, each retried until its own timeout, with progress reported as tasks
// finish. It is what the shoot flows (reconcile, delete, migrate, restore) are built from, in the spirit of
// Gardener's pkg/utils/flow.
//
// A Graph is built once per run with Add and run with Run. When a task fails for good (its retries ran out, its
// error is marked Permanent, or the context ended), no new tasks start, running ones finish, and Run returns an
// *Error naming every failed task. Tasks must be idempotent: a flow interrupted by a crash is simply run again.
package flow
