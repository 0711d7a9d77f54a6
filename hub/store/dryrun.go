package store

import (
	"context"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// DryRun is a collection's writes made as dry runs (Kubernetes' dryRun=All): each is decided exactly as the write
// would be — name checks, preconditions, server-owned metadata, generation, finalizers, the caller's mutate — and
// answered with what the write would store, but nothing is written: no etcd write, no watch event. Decisions are
// made on the state read from etcd, not on the cache. A created object has no resourceVersion; an updated or deleted
// one carries the resourceVersion of the state it was decided on.
type DryRun struct{ c *Collection }

// DryRun returns the collection's dry-run writes.
func (c *Collection) DryRun() DryRun { return DryRun{c: c} }

// Create is Collection.Create's dry run.
func (d DryRun) Create(ctx context.Context, obj Object) (Object, error) {
	return d.c.create(ctx, obj, true)
}

// GuaranteedUpdate is Collection.GuaranteedUpdate's dry run; mutate runs once, on the state in etcd.
func (d DryRun) GuaranteedUpdate(ctx context.Context, namespace, name string, status bool, mutate func(cur Object) (Object, error)) (Object, error) {
	return d.c.guaranteedUpdate(ctx, namespace, name, status, true, mutate)
}

// Delete is Collection.Delete's dry run: deleted reports whether the delete would remove the object rather than
// mark it for deletion (finalizers); obj is the current object, or the marked one.
func (d DryRun) Delete(ctx context.Context, namespace, name string, pre *metav1.Preconditions) (obj Object, deleted bool, err error) {
	return d.c.delete(ctx, namespace, name, pre, nil, true)
}

// DeleteFinalizing is Collection.DeleteFinalizing's dry run.
func (d DryRun) DeleteFinalizing(ctx context.Context, namespace, name string, pre *metav1.Preconditions, finalize func([]string) []string) (obj Object, deleted bool, err error) {
	return d.c.delete(ctx, namespace, name, pre, finalize, true)
}
