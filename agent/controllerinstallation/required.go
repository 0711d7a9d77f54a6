package controllerinstallation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/hubobject"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// RequiredConfig configures the required controller.
type RequiredConfig struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: its ControllerInstallations and registrations.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub.
	Hub grpc.ClientConnInterface
	// Informers are the seed's informers; the controller watches every extension kind through them.
	Informers ctrlcache.Informers
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Resync is how often the conditions are checked besides the changes watched (default 1 min).
	Resync time.Duration
	// HubTimeout bounds each call to the hub (default 30 s).
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Required keeps the Required condition of the seed's installations: whether extension objects of the kinds and
// types of their registrations exist in the seed (gardenlet's controllerinstallation-required controller).
type Required struct {
	cfg     RequiredConfig
	log     *slog.Logger
	objects *hubobject.Client[*corev1beta1.ControllerInstallation]
	nudge   chan struct{}

	mu sync.Mutex
	// types holds, per kind, the spec.type of every extension object in the seed, by object key.
	types map[string]map[string]string
}

// NewRequired returns a required controller for cfg.
func NewRequired(cfg RequiredConfig) (*Required, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Informers == nil {
		return nil, errors.New("controllerinstallation: SeedName, Cache, Hub and Informers are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = time.Minute
	}
	if cfg.HubTimeout <= 0 {
		cfg.HubTimeout = DefaultHubTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Required{
		cfg:     cfg,
		log:     cfg.Log.With("controller", "controllerinstallation-required"),
		objects: hubobject.NewClient[*corev1beta1.ControllerInstallation](corev1beta1.NewControllerInstallationServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now),
		nudge:   make(chan struct{}, 1),
		types:   map[string]map[string]string{},
	}, nil
}

func (r *Required) poke() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// Run keeps the conditions until ctx ends. It decides nothing before the informers of every extension kind have
// synced: an installation is not required only when every kind is known to have none of its objects.
func (r *Required) Run(ctx context.Context) error {
	if err := r.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil
	}
	var synced []toolscache.InformerSynced
	for _, obj := range extensionsv1alpha1.ObjectKinds() {
		kind := reflect.TypeOf(obj).Elem().Name()
		inf, err := r.cfg.Informers.GetInformer(ctx, obj)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting for the informer
			}
			return fmt.Errorf("informer of %s: %w", kind, err)
		}
		reg, err := inf.AddEventHandler(r.handler(kind))
		if err != nil {
			return fmt.Errorf("watch %s: %w", kind, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	remove := r.cfg.Cache.AddEventHandler(resources.ControllerInstallations, cache.HandlerFuncs{
		AddFunc:    func(proto.Message) { r.poke() },
		UpdateFunc: func(_, _ proto.Message) { r.poke() },
	})
	defer remove()
	removeRegs := r.cfg.Cache.AddEventHandler(resources.ControllerRegistrations, cache.HandlerFuncs{
		AddFunc:    func(proto.Message) { r.poke() },
		UpdateFunc: func(_, _ proto.Message) { r.poke() },
	})
	defer removeRegs()
	r.log.Info("controllerinstallation-required controller started")
	t := time.NewTicker(r.cfg.Resync)
	defer t.Stop()
	for {
		if err := r.sync(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("required sync failed", "err", err)
			// Try again soon: a missed transition would keep an installation the seed no longer needs.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			r.poke()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.nudge:
		}
	}
}

// handler records the types of the extension objects of one kind and pokes the loop when they change.
func (r *Required) handler(kind string) toolscache.ResourceEventHandler {
	set := func(obj any) {
		o, ok := obj.(extensionsv1alpha1.Object)
		if !ok {
			return
		}
		key := client.ObjectKeyFromObject(o).String()
		typ := o.GetExtensionSpec().Type
		r.mu.Lock()
		m := r.types[kind]
		if m == nil {
			m = map[string]string{}
			r.types[kind] = m
		}
		changed := m[key] != typ
		m[key] = typ
		r.mu.Unlock()
		if changed {
			r.poke()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			r.mu.Lock()
			delete(r.types[kind], client.ObjectKeyFromObject(o).String())
			r.mu.Unlock()
			r.poke()
		},
	}
}

// required reports whether extension objects of any kind/type of reg exist, and which.
func (r *Required) required(reg *corev1beta1.ControllerRegistration) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found []string
	for _, res := range reg.GetSpec().GetResources() {
		for _, typ := range r.types[res.GetKind()] {
			if typ == res.GetType() {
				found = append(found, res.GetKind()+"/"+res.GetType())
				break
			}
		}
	}
	sort.Strings(found)
	return slices.Compact(found)
}

// sync sets the Required condition of every installation of the seed.
func (r *Required) sync(ctx context.Context) error {
	var errs []error
	for _, ci := range cache.List[*corev1beta1.ControllerInstallation](r.cfg.Cache, resources.ControllerInstallations) {
		if ci.GetSpec().GetSeedRef().GetName() != r.cfg.SeedName {
			continue
		}
		reg, ok := cache.Get[*corev1beta1.ControllerRegistration](r.cfg.Cache, resources.ControllerRegistrations, "", ci.GetSpec().GetRegistrationRef().GetName())
		if !ok {
			continue
		}
		st, reason, msg := "False", "NoExtensionObjects", "no extension objects exist in the seed having the kind/type combinations the controller is responsible for"
		if found := r.required(reg); len(found) > 0 {
			st, reason, msg = "True", "ExtensionObjectsExist", fmt.Sprintf("extension objects still exist in the seed: [%s]", strings.Join(found, " "))
		}
		ci, _ = r.objects.Pick(hubobject.Key(ci), ci, true)
		_, err := r.objects.UpdateStatus(ctx, ci, func(cur *corev1beta1.ControllerInstallation) bool {
			if cur.Status == nil {
				cur.Status = &corev1beta1.ControllerInstallationStatus{}
			}
			var changed bool
			cur.Status.Conditions, changed = hubobject.SetCondition(cur.Status.Conditions, ConditionRequired, st, reason, msg, r.cfg.Now())
			return changed
		})
		if err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
