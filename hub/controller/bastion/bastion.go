package bastion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

// DefaultMaxLifetime is Gardener's default of controllers.bastion.maxLifetime.
const DefaultMaxLifetime = 24 * time.Hour

// Config configures the controller.
type Config struct {
	Source controller.Collections
	// Workers is controllers.bastion.concurrentSyncs (default 5).
	Workers int
	// MaxLifetime is controllers.bastion.maxLifetime (default 24h).
	MaxLifetime time.Duration
	// Clock is the controller's clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Reconciler deletes Bastions that must go and says when to look at the others again.
type Reconciler struct {
	Bastions, Shoots *store.Collection
	MaxLifetime      time.Duration
	Clock            clock.PassiveClock
	Log              *slog.Logger
}

// New returns the Bastion controller for cfg.
func New(cfg Config) (*controller.Controller, error) {
	if cfg.Source == nil {
		return nil, errors.New("bastion: no source")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	if cfg.MaxLifetime <= 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var bastions, shoots *store.Collection
	if err := controller.OpenCollections(cfg.Source, "bastion", map[schema.GroupResource]**store.Collection{
		{Group: "operations.gardener.cloud", Resource: "bastions"}: &bastions, {Group: "core.gardener.cloud", Resource: "shoots"}: &shoots,
	}); err != nil {
		return nil, err
	}
	r := &Reconciler{Bastions: bastions, Shoots: shoots, MaxLifetime: cfg.MaxLifetime, Clock: cfg.Clock, Log: cfg.Log.With("controller", "bastion")}
	return controller.New(controller.Config{Name: "bastion", Reconciler: r, Workers: cfg.Workers, Clock: cfg.Clock, Log: cfg.Log,
		Sources: []controller.Source{
			{Collection: bastions, Digest: func(o store.Object) string {
				b := o.(*operationsv1alpha1.Bastion)
				return fmt.Sprintf("%s|%v|%t", b.GetSpec().GetSeedName(), b.GetStatus().GetExpirationTimestamp().AsTime(), b.GetMetadata().GetDeletionTimestamp() != nil)
			}},
			// A shoot that goes, is being deleted or moves takes its bastions with it.
			{Collection: shoots, Map: func(o store.Object) []controller.Key { return r.bastionsOf(o.(*corev1beta1.Shoot)) },
				Digest: func(o store.Object) string {
					s := o.(*corev1beta1.Shoot)
					return fmt.Sprintf("%s|%t", s.GetSpec().GetSeedName(), s.GetMetadata().GetDeletionTimestamp() != nil)
				}},
		}})
}

// bastionsOf are the keys of the bastions of a shoot.
func (r *Reconciler) bastionsOf(s *corev1beta1.Shoot) []controller.Key {
	res, err := r.Bastions.List(context.Background(), s.GetMetadata().GetNamespace(), store.ListOptions{})
	if err != nil {
		return nil
	}
	var keys []controller.Key
	for _, o := range res.Items {
		if b := o.(*operationsv1alpha1.Bastion); b.GetSpec().GetShootRef().GetName() == s.GetMetadata().GetName() {
			keys = append(keys, controller.Key{Namespace: b.GetMetadata().GetNamespace(), Name: b.GetMetadata().GetName()})
		}
	}
	return keys
}

// Reconcile deletes the bastion key if it must go, or asks to be called again when it expires or reaches its
// maximum lifetime, whichever is sooner.
func (r *Reconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	b, ok, err := controller.Get[*operationsv1alpha1.Bastion](ctx, r.Bastions, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	if b.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, nil
	}
	now := r.Clock.Now()
	reason, err := r.mustGo(ctx, b, now)
	if err != nil {
		return controller.Result{}, err
	}
	if reason != "" {
		r.log().Info("deleting bastion", "bastion", key.String(), "reason", reason)
		if _, _, err := r.Bastions.Delete(ctx, key.Namespace, key.Name, nil); err != nil && !apierrors.IsNotFound(err) {
			return controller.Result{}, fmt.Errorf("delete bastion %s (%s): %w", key, reason, err)
		}
		return controller.Result{}, nil
	}
	after := b.GetMetadata().GetCreationTimestamp().AsTime().Add(r.MaxLifetime).Sub(now)
	if exp := b.GetStatus().GetExpirationTimestamp(); exp != nil {
		after = min(after, exp.AsTime().Sub(now))
	}
	// Called again a moment after the deadline, so that the deadline has passed then.
	return controller.Result{RequeueAfter: max(after, 0) + time.Second}, nil
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// mustGo says why the bastion must be deleted now ("" when it may stay).
func (r *Reconciler) mustGo(ctx context.Context, b *operationsv1alpha1.Bastion, now time.Time) (string, error) {
	obj, err := r.Shoots.Get(ctx, b.GetMetadata().GetNamespace(), b.GetSpec().GetShootRef().GetName())
	switch {
	case apierrors.IsNotFound(err):
		return "its shoot is gone", nil
	case err != nil:
		return "", fmt.Errorf("read the bastion's shoot: %w", err)
	}
	s := obj.(*corev1beta1.Shoot)
	switch {
	case s.GetMetadata().GetDeletionTimestamp() != nil:
		return "its shoot is being deleted", nil
	case s.GetSpec().GetSeedName() != b.GetSpec().GetSeedName():
		return fmt.Sprintf("its shoot moved from seed %q to seed %q", b.GetSpec().GetSeedName(), s.GetSpec().GetSeedName()), nil
	}
	if exp := b.GetStatus().GetExpirationTimestamp(); exp != nil && now.After(exp.AsTime()) {
		return fmt.Sprintf("it expired at %s", exp.AsTime().Format(time.RFC3339)), nil
	}
	if created := b.GetMetadata().GetCreationTimestamp().AsTime(); now.Sub(created) > r.MaxLifetime {
		return fmt.Sprintf("it reached its maximum lifetime of %s", r.MaxLifetime), nil
	}
	return "", nil
}
