package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/store"
)

// Protection is a Reconciler that keeps an object from going while something uses it, as Gardener's finalizer
// controllers do: it adds Finalizer to every object of Collection that is not being deleted, and removes it from an
// object being deleted once InUse reports no users. The controller's sources must enqueue an object when one of its
// users goes, so that its deletion proceeds.
type Protection struct {
	// Collection holds the protected objects.
	Collection *store.Collection
	// Finalizer is the finalizer kept on them.
	Finalizer string
	// InUse names what uses obj (for the log); none lets it go.
	InUse func(ctx context.Context, obj store.Object) (users []string, err error)
	// Log receives a line when a deletion waits for users (default discarded).
	Log *slog.Logger
	// Events, when set, records a Warning Event ResourceReferenced on an object whose deletion waits for users, as
	// Gardener's finalizer controllers do.
	Events *Recorder
}

// EventResourceReferenced is the reason of the Event recorded on an object whose deletion waits for its users.
const EventResourceReferenced = "ResourceReferenced"

// Reconcile adds or removes the finalizer of the object key.
func (p *Protection) Reconcile(ctx context.Context, key Key) (Result, error) {
	obj, ok, err := Get[store.Object](ctx, p.Collection, key)
	if err != nil || !ok {
		return Result{}, err
	}
	md := obj.GetMetadata()
	has := slices.Contains(md.GetFinalizers(), p.Finalizer)
	if md.GetDeletionTimestamp() == nil {
		if has {
			return Result{}, nil
		}
		return Result{}, p.update(ctx, key, func(fs []string) []string { return append(fs, p.Finalizer) })
	}
	if !has {
		return Result{}, nil
	}
	users, err := p.InUse(ctx, obj)
	if err != nil {
		return Result{}, err
	}
	if len(users) > 0 {
		if p.Log != nil {
			p.Log.Info("deletion waits until the object is no longer used", "resource", p.Collection.Resource().Resource,
				"key", key.String(), "finalizer", p.Finalizer, "usedBy", strings.Join(users, ", "))
		}
		_, kind := typeMeta(obj)
		p.Events.Eventf(ctx, obj, EventWarning, EventResourceReferenced, "Cannot delete %s, because the following objects are still referencing it: %s",
			kind, strings.Join(users, ", "))
		return Result{}, nil
	}
	return Result{}, p.update(ctx, key, func(fs []string) []string {
		return slices.DeleteFunc(fs, func(f string) bool { return f == p.Finalizer })
	})
}

// update changes the finalizers of the current state of the object key.
func (p *Protection) update(ctx context.Context, key Key, change func([]string) []string) error {
	_, err := p.Collection.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		has := slices.Contains(md.GetFinalizers(), p.Finalizer)
		// Re-decide on the current state: never add to an object being deleted (the store refuses), never remove twice.
		if (md.GetDeletionTimestamp() == nil) == has {
			return nil, nil
		}
		md.Finalizers = change(md.Finalizers)
		return cur, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update the finalizers of %s %s: %w", p.Collection.Resource().Resource, key, err)
	}
	return nil
}
