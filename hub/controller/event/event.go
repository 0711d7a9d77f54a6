// Package event owns the controller-manager's Event controller (Gardener's): Events about anything but Shoots
// (core.gardener.cloud) are deleted once their lastTimestamp is older than controllers.event.ttlNonShootEvents
// (default 1h). Gardener runs it only when the configuration has an event section; so does the hub.
package event

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// Config configures the controller.
type Config struct {
	Source controller.Collections
	// Workers is controllers.event.concurrentSyncs (default 5).
	Workers int
	// TTL is controllers.event.ttlNonShootEvents (default 1h).
	TTL time.Duration
	// Clock is the controller's clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// Reconciler deletes an expired Event, or asks to be called again when it expires.
type Reconciler struct {
	Events *store.Collection
	TTL    time.Duration
	Clock  clock.PassiveClock
}

// New returns the controller for cfg.
func New(cfg Config) (*controller.Controller, error) {
	if cfg.Source == nil {
		return nil, errors.New("event: no source")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	var events *store.Collection
	if err := controller.OpenCollections(cfg.Source, "event", map[schema.GroupResource]**store.Collection{{Resource: "events"}: &events}); err != nil {
		return nil, err
	}
	return controller.New(controller.Config{Name: "event", Workers: cfg.Workers, Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &Reconciler{Events: events, TTL: cfg.TTL, Clock: cfg.Clock},
		// Created Events only, as Gardener: their expiry is read at each look.
		Sources: []controller.Source{{Collection: events, Digest: func(store.Object) string { return "" }}}})
}

// Reconcile deletes the Event key once it is older than the TTL (Shoot events are kept).
func (r *Reconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	ev, ok, err := controller.Get[*kcorev1.Event](ctx, r.Events, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	if IsShootEvent(ev) {
		return controller.Result{}, nil
	}
	last := ev.GetLastTimestamp().AsTime()
	if ev.GetLastTimestamp() == nil {
		last = ev.GetMetadata().GetCreationTimestamp().AsTime()
	}
	if wait := last.Add(r.TTL).Sub(r.Clock.Now()); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	if _, _, err := r.Events.Delete(ctx, key.Namespace, key.Name, nil); err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, err
	}
	return controller.Result{}, nil
}

// IsShootEvent reports whether an Event is about a Shoot of core.gardener.cloud.
func IsShootEvent(ev *kcorev1.Event) bool {
	io := ev.GetInvolvedObject()
	group, _, _ := strings.Cut(io.GetApiVersion(), "/")
	return io.GetKind() == "Shoot" && group == "core.gardener.cloud" && strings.Contains(io.GetApiVersion(), "/")
}
