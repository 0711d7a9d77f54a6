package cache

import (
	"context"
	"errors"
	"fmt"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Traceparent is the W3C trace context the hub sent with the version of an object that asked for work: its creation,
// its latest spec change (generation) or its deletion; "" when that write was not traced.
func (c *Cache) Traceparent(resource, namespace, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objects[resource][Key(namespace, name)].traceparent
}

// Key is the cache key of an object: "namespace/name", or "name" for a cluster-scoped object.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Handler receives the changes of one resource, like client-go's ResourceEventHandler.
type Handler interface {
	// OnAdd is called for an object that appeared; isInInitialList is true for objects of the initial sync and for
	// the objects already cached when the handler was added.
	OnAdd(obj proto.Message, isInInitialList bool)
	// OnUpdate is called when an object changed (its resourceVersion moved).
	OnUpdate(oldObj, newObj proto.Message)
	// OnDelete is called with the last known state of an object that was removed from the seed or deleted.
	OnDelete(obj proto.Message)
}

// HandlerFuncs adapts functions to Handler; nil functions are skipped.
type HandlerFuncs struct {
	AddFunc    func(obj proto.Message)
	UpdateFunc func(oldObj, newObj proto.Message)
	DeleteFunc func(obj proto.Message)
}

// OnAdd calls AddFunc.
func (f HandlerFuncs) OnAdd(obj proto.Message, _ bool) {
	if f.AddFunc != nil {
		f.AddFunc(obj)
	}
}

// OnUpdate calls UpdateFunc.
func (f HandlerFuncs) OnUpdate(oldObj, newObj proto.Message) {
	if f.UpdateFunc != nil {
		f.UpdateFunc(oldObj, newObj)
	}
}

// OnDelete calls DeleteFunc.
func (f HandlerFuncs) OnDelete(obj proto.Message) {
	if f.DeleteFunc != nil {
		f.DeleteFunc(obj)
	}
}

type entry struct {
	obj         proto.Message
	rv          int64
	traceparent string // Assignment.traceparent of this version
}

type eventType uint8

const (
	added eventType = iota
	updated
	deleted
)

type event struct {
	typ      eventType
	resource string
	old, obj proto.Message
	initial  bool
}

type registration struct {
	h Handler
}

// Cache is the agent's local state of its seed. The zero value is not usable; use New.
type Cache struct {
	// dispatchMu serializes writers and handler registration, so that handlers receive events in the order they
	// were applied and a new handler's initial adds do not interleave with changes.
	dispatchMu sync.Mutex

	mu       sync.RWMutex
	objects  map[string]map[string]entry // resource → key → entry
	versions map[string]int64
	synced   chan struct{}
	isSynced bool

	hmu      sync.RWMutex
	handlers map[string][]*registration
}

// New returns an empty, unsynced cache.
func New() *Cache {
	return &Cache{
		objects:  map[string]map[string]entry{},
		versions: map[string]int64{},
		synced:   make(chan struct{}),
		handlers: map[string][]*registration{},
	}
}

// Get returns the object of resource with key ("namespace/name" or "name").
func (c *Cache) Get(resource, key string) (proto.Message, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.objects[resource][key]
	return e.obj, ok
}

// GetObject returns the object of resource in namespace with name.
func (c *Cache) GetObject(resource, namespace, name string) (proto.Message, bool) {
	return c.Get(resource, Key(namespace, name))
}

// List returns the objects of resource, ordered by key.
func (c *Cache) List(resource string) []proto.Message {
	c.mu.RLock()
	defer c.mu.RUnlock()
	objs := c.objects[resource]
	out := make([]proto.Message, 0, len(objs))
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		out = append(out, objs[k].obj)
	}
	return out
}

// Keys returns the keys of resource's objects, sorted.
func (c *Cache) Keys(resource string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.objects[resource]))
}

// Resources returns the resources the cache holds objects of, sorted.
func (c *Cache) Resources() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for r, objs := range c.objects {
		if len(objs) > 0 {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// Get returns the object of resource in namespace with name as a T; false when it is absent or of another type.
func Get[T proto.Message](c *Cache, resource, namespace, name string) (T, bool) {
	obj, ok := c.GetObject(resource, namespace, name)
	t, isT := obj.(T)
	return t, ok && isT
}

// List returns the objects of resource that are Ts, ordered by key.
func List[T proto.Message](c *Cache, resource string) []T {
	objs := c.List(resource)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// HasSynced reports whether the first sync completed.
func (c *Cache) HasSynced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.isSynced
}

// WaitForSync blocks until the first sync completed or ctx ends.
func (c *Cache) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SyncedVersions returns, per resource, the version through which the cache holds every change (a copy); the agent
// resumes from them.
func (c *Cache) SyncedVersions() map[string]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.versions)
}

// Snapshot returns resource → key → resourceVersion of every cached object, to compare with the hub's state.
func (c *Cache) Snapshot() map[string]map[string]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]map[string]int64, len(c.objects))
	for r, objs := range c.objects {
		if len(objs) == 0 {
			continue
		}
		m := make(map[string]int64, len(objs))
		for k, e := range objs {
			m[k] = e.rv
		}
		out[r] = m
	}
	return out
}

// AddEventHandler registers h for the changes of resource. h first receives OnAdd(obj, true) for every object already
// cached, before any later change. The returned function removes the registration.
func (c *Cache) AddEventHandler(resource string, h Handler) (remove func()) {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	reg := &registration{h: h}
	c.hmu.Lock()
	c.handlers[resource] = append(c.handlers[resource], reg)
	c.hmu.Unlock()
	for _, obj := range c.List(resource) {
		h.OnAdd(obj, true)
	}
	return func() {
		c.hmu.Lock()
		defer c.hmu.Unlock()
		c.handlers[resource] = slices.DeleteFunc(c.handlers[resource], func(r *registration) bool { return r == reg })
	}
}

// SetSynced records what a heartbeat acknowledgement says the hub has sent every change through: versions, as a
// batch's synced versions are recorded, or revision (when not zero) for every resource the hub streams
// (resources.SyncedAt). The hub attaches them while nothing is queued for the agent, after every batch before them,
// so that an idle agent resumes from a recent version.
func (c *Cache) SetSynced(versions map[string]int64, revision int64) {
	if len(versions) == 0 && revision == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.Copy(c.versions, versions)
	if revision != 0 {
		maps.Copy(c.versions, resources.SyncedAt(revision))
	}
}

// Apply applies an assignment batch: it stores or removes each object and then records the batch's synced versions.
// An object whose type is not linked into the binary is kept as its *anypb.Any, and Apply reports it; everything else
// in the batch is applied regardless.
func (c *Cache) Apply(batch *agentv1.AssignmentBatch) error {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	var errs []error
	decoded := make([]proto.Message, len(batch.GetAssignments()))
	for i, a := range batch.GetAssignments() {
		if a.GetRemoved() || a.GetObject() == nil {
			continue
		}
		obj, err := a.GetObject().UnmarshalNew()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.GetResource(), Key(a.GetNamespace(), a.GetName()), err))
			obj = a.GetObject()
		}
		decoded[i] = obj
	}

	c.mu.Lock()
	var events []event
	for i, a := range batch.GetAssignments() {
		res, key := a.GetResource(), Key(a.GetNamespace(), a.GetName())
		objs := c.objects[res]
		old, exists := objs[key]
		if a.GetRemoved() {
			if exists {
				delete(objs, key)
				events = append(events, event{typ: deleted, resource: res, obj: old.obj})
			}
			continue
		}
		obj := decoded[i]
		if obj == nil {
			errs = append(errs, fmt.Errorf("%s %s: assignment without object", res, key))
			continue
		}
		if objs == nil {
			objs = map[string]entry{}
			c.objects[res] = objs
		}
		tp := a.GetTraceparent()
		if exists && !intentChanged(old.obj, obj) {
			// Writes of status, labels and finalizers (hub loops, the agent itself) keep the trace of the write that
			// asked for the work: the creation, a spec change (generation) or the deletion.
			tp = old.traceparent
		}
		objs[key] = entry{obj: obj, rv: a.GetResourceVersion(), traceparent: tp}
		switch {
		case !exists:
			events = append(events, event{typ: added, resource: res, obj: obj, initial: !c.isSynced})
		case old.rv != a.GetResourceVersion():
			events = append(events, event{typ: updated, resource: res, old: old.obj, obj: obj})
		}
	}
	maps.Copy(c.versions, batch.GetSyncedVersions())
	c.mu.Unlock()

	c.dispatch(events)
	return errors.Join(errs...)
}

// CompleteSync ends a sync: for each listed resource it drops the cached objects whose keys are not listed, it drops
// every object of the resources not listed at all, and it marks the cache synced.
func (c *Cache) CompleteSync(sc *agentv1.SyncComplete) {
	c.dispatchMu.Lock()
	defer c.dispatchMu.Unlock()
	keep := make(map[string]map[string]bool, len(sc.GetResources()))
	for _, rk := range sc.GetResources() {
		m := keep[rk.GetResource()]
		if m == nil {
			m = make(map[string]bool, len(rk.GetKeys()))
			keep[rk.GetResource()] = m
		}
		for _, k := range rk.GetKeys() {
			m[k] = true
		}
	}

	c.mu.Lock()
	var events []event
	for _, res := range slices.Sorted(maps.Keys(c.objects)) {
		objs := c.objects[res]
		listed := keep[res] // nil for a resource not listed: drop all of it
		for _, k := range slices.Sorted(maps.Keys(objs)) {
			if listed[k] {
				continue
			}
			events = append(events, event{typ: deleted, resource: res, obj: objs[k].obj})
			delete(objs, k)
		}
		if len(objs) == 0 {
			delete(c.objects, res)
		}
	}
	if !c.isSynced {
		c.isSynced = true
		close(c.synced)
	}
	c.mu.Unlock()

	c.dispatch(events)
}

// dispatch delivers events to the handlers of their resources, in order. The caller holds dispatchMu, not mu.
func (c *Cache) dispatch(events []event) {
	for _, ev := range events {
		c.hmu.RLock()
		regs := slices.Clone(c.handlers[ev.resource])
		c.hmu.RUnlock()
		for _, r := range regs {
			switch ev.typ {
			case added:
				r.h.OnAdd(ev.obj, ev.initial)
			case updated:
				r.h.OnUpdate(ev.old, ev.obj)
			case deleted:
				r.h.OnDelete(ev.obj)
			}
		}
	}
}

// intentChanged reports whether cur asks for other work than old: a new generation or a new deletion timestamp.
func intentChanged(old, cur proto.Message) bool {
	type meta interface{ GetMetadata() *metav1.ObjectMeta }
	o, ok1 := old.(meta)
	c, ok2 := cur.(meta)
	if !ok1 || !ok2 {
		return true
	}
	om, cm := o.GetMetadata(), c.GetMetadata()
	return om.GetGeneration() != cm.GetGeneration() || (om.GetDeletionTimestamp() == nil) != (cm.GetDeletionTimestamp() == nil)
}
