package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Name is the controller's name in --controllers.
const Name = "garbagecollector"

// Kind is a kind the collector looks after: what owner references call it and where its objects are.
type Kind struct {
	GroupKind     schema.GroupKind
	GroupResource schema.GroupResource
	Namespaced    bool
}

// Config configures the collector.
type Config struct {
	Source controller.Collections
	// Kinds are every kind the hub serves; versions of a kind may repeat it.
	Kinds []Kind
	// OwnerIndex is the index of every collection by the uids of its objects' owner references.
	OwnerIndex string
	// Workers is how many objects are looked at at once (default 1).
	Workers int
	Log     *slog.Logger
}

// Collector deletes objects whose owners are gone. Its keys carry their resource.
type Collector struct {
	cols       map[schema.GroupResource]*store.Collection
	kinds      map[schema.GroupKind]Kind
	ownerIndex string
	log        *slog.Logger
}

// New returns the collector's controller for cfg.
func New(cfg Config) (*controller.Controller, error) {
	if cfg.Source == nil || cfg.OwnerIndex == "" {
		return nil, errors.New("garbagecollector: no source or owner index")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{cols: map[schema.GroupResource]*store.Collection{}, kinds: map[schema.GroupKind]Kind{},
		ownerIndex: cfg.OwnerIndex, log: cfg.Log.With("controller", Name)}
	want := map[schema.GroupResource]**store.Collection{}
	for _, k := range cfg.Kinds {
		c.kinds[k.GroupKind] = k
		if _, ok := want[k.GroupResource]; !ok {
			var col *store.Collection
			want[k.GroupResource] = &col
		}
	}
	if err := controller.OpenCollections(cfg.Source, Name, want); err != nil {
		return nil, err
	}
	for gr, col := range want {
		c.cols[gr] = *col
	}
	var sources []controller.Source
	for _, gr := range slices.SortedFunc(maps.Keys(c.cols), func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) }) {
		sources = append(sources, controller.Source{Collection: c.cols[gr], Map: c.keysOf(gr), Digest: ownersDigest})
	}
	return controller.New(controller.Config{Name: Name, Reconciler: c, Workers: cfg.Workers, Log: cfg.Log, Sources: sources})
}

// ownersDigest is what of an object the collector acts on: the uids of its owners, and whether it waits for the
// collector (being deleted with the orphan or foregroundDeletion finalizer).
func ownersDigest(o store.Object) string {
	var b strings.Builder
	md := o.GetMetadata()
	for _, r := range md.GetOwnerReferences() {
		b.WriteString(r.GetUid())
		if r.GetBlockOwnerDeletion() {
			b.WriteByte('!')
		}
		b.WriteByte(',')
	}
	if md.GetDeletionTimestamp() != nil {
		b.WriteString("deleting")
		for _, f := range md.GetFinalizers() {
			if f == kmetav1.FinalizerOrphanDependents || f == kmetav1.FinalizerDeleteDependents {
				b.WriteString("," + f)
			}
		}
	}
	return b.String()
}

// keysOf returns the Map of the collection of gr: an object with owner references is looked at itself, and so are
// its owners (one of them may wait for it to go); an object that waits for the collector is looked at itself; an
// object that is gone (deleted, or replaced by another of the same name), or waits for its dependents to go, has
// its dependents looked at.
func (c *Collector) keysOf(gr schema.GroupResource) func(store.Object) []controller.Key {
	col := c.cols[gr]
	return func(o store.Object) []controller.Key {
		md := o.GetMetadata()
		var keys []controller.Key
		self := controller.Key{Resource: gr, Namespace: md.GetNamespace(), Name: md.GetName()}
		if len(md.GetOwnerReferences()) > 0 || waitsFor(md, kmetav1.FinalizerOrphanDependents) || waitsFor(md, kmetav1.FinalizerDeleteDependents) {
			keys = append(keys, self)
		}
		for _, ref := range md.GetOwnerReferences() {
			if k, ok := c.ownerKey(self, ref); ok {
				keys = append(keys, k)
			}
		}
		// Bounded, so that a store that stopped answering cannot hold the source forever.
		ctx, cancel := context.WithTimeout(context.Background(), mapTimeout)
		defer cancel()
		if cur, err := col.Get(ctx, md.GetNamespace(), md.GetName()); err == nil && cur.GetMetadata().GetUid() == md.GetUid() &&
			!waitsFor(cur.GetMetadata(), kmetav1.FinalizerDeleteDependents) {
			return keys // still there
		}
		for dgr, dcol := range c.cols {
			deps, err := dcol.ByIndex(ctx, c.ownerIndex, md.GetUid())
			if err != nil {
				continue
			}
			for _, d := range deps {
				keys = append(keys, controller.Key{Resource: dgr, Namespace: d.GetMetadata().GetNamespace(), Name: d.GetMetadata().GetName()})
			}
		}
		return keys
	}
}

// waitsFor says whether the object is being deleted and waits for the collector behind finalizer.
func waitsFor(md *metav1.ObjectMeta, finalizer string) bool {
	return md.GetDeletionTimestamp() != nil && slices.Contains(md.GetFinalizers(), finalizer)
}

// ownerKey is the key of the owner ref names, for the object key names.
func (c *Collector) ownerKey(key controller.Key, ref *metav1.OwnerReference) (controller.Key, bool) {
	gv, err := schema.ParseGroupVersion(ref.GetApiVersion())
	if err != nil {
		return controller.Key{}, false
	}
	k, ok := c.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.GetKind()}]
	if !ok || k.Namespaced && key.Namespace == "" {
		return controller.Key{}, false
	}
	ns := ""
	if k.Namespaced {
		ns = key.Namespace
	}
	return controller.Key{Resource: k.GroupResource, Namespace: ns, Name: ref.GetName()}, true
}

// mapTimeout bounds the reads of one Map.
const mapTimeout = 30 * time.Second

// owner states.
type ownerState int

const (
	present ownerState = iota
	absent
	unresolvable
	// waiting is an owner being deleted in the foreground: it waits for its dependents to go.
	waiting
)

// Reconcile deletes the object key names when none of its owners exists, or removes the references to owners that
// are gone when some still exist.
func (c *Collector) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	col := c.cols[key.Resource]
	if col == nil {
		return controller.Result{}, nil
	}
	obj, ok, err := controller.Get[store.Object](ctx, col, key)
	if err != nil || !ok {
		return controller.Result{}, err
	}
	md := obj.GetMetadata()
	if md.GetDeletionTimestamp() != nil {
		return controller.Result{}, c.finalize(ctx, col, key, obj)
	}
	if len(md.GetOwnerReferences()) == 0 {
		return controller.Result{}, nil
	}
	var solid, unresolved int
	var dangling []string
	foreground := false
	for _, ref := range md.GetOwnerReferences() {
		st, why, err := c.owner(ctx, key, ref)
		if err != nil {
			return controller.Result{}, err
		}
		switch st {
		case present:
			solid++
		case absent:
			dangling = append(dangling, ref.GetUid())
		case waiting:
			dangling = append(dangling, ref.GetUid())
			foreground = true
		case unresolvable:
			unresolved++
			c.log.Debug("owner reference cannot be resolved", "object", key.String(), "owner", ref.GetKind()+"/"+ref.GetName(), "reason", why)
		}
	}
	switch {
	case len(dangling) == 0 || unresolved > 0 && solid == 0:
		return controller.Result{}, nil
	case solid > 0:
		return controller.Result{}, c.dropOwners(ctx, col, key, md.GetUid(), dangling)
	}
	// As Kubernetes' collector does: a dependent of an owner deleted in the foreground that has dependents itself is
	// deleted in the foreground too, so that the owner waits for the whole chain.
	var finalize func([]string) []string
	if foreground {
		deps, err := c.dependents(ctx, md.GetUid())
		if err != nil {
			return controller.Result{}, err
		}
		if len(deps) > 0 {
			finalize = func(fs []string) []string {
				if !slices.Contains(fs, kmetav1.FinalizerDeleteDependents) {
					fs = append(fs, kmetav1.FinalizerDeleteDependents)
				}
				return fs
			}
		}
	}
	pre := &metav1.Preconditions{Uid: proto.String(md.GetUid())}
	if _, _, err := col.DeleteFinalizing(ctx, key.Namespace, key.Name, pre, finalize); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return controller.Result{}, fmt.Errorf("delete %s, whose owners are gone: %w", key, err)
	}
	c.log.Info("deleted an object whose owners are gone", "object", key.String(), "foreground", finalize != nil)
	return controller.Result{}, nil
}

// dependent is an object with an owner reference to a given owner.
type dependent struct {
	key controller.Key
	obj store.Object
}

// dependents returns the objects with an owner reference to uid.
func (c *Collector) dependents(ctx context.Context, uid string) ([]dependent, error) {
	var out []dependent
	for gr, col := range c.cols {
		deps, err := col.ByIndex(ctx, c.ownerIndex, uid)
		if err != nil {
			return nil, fmt.Errorf("list the dependents of %s in %s: %w", uid, gr, err)
		}
		for _, d := range deps {
			out = append(out, dependent{key: controller.Key{Resource: gr, Namespace: d.GetMetadata().GetNamespace(), Name: d.GetMetadata().GetName()}, obj: d})
		}
	}
	return out, nil
}

// finalize does what an object being deleted waits for, as Kubernetes' collector does: with the orphan finalizer its
// dependents lose their references to it, then the finalizer goes; with foregroundDeletion the finalizer goes once no
// dependent blocks its deletion (blockOwnerDeletion) any more — its dependents are deleted by their own reconciles,
// which see the owner waiting.
func (c *Collector) finalize(ctx context.Context, col *store.Collection, key controller.Key, obj store.Object) error {
	md := obj.GetMetadata()
	uid := md.GetUid()
	var done []string
	if waitsFor(md, kmetav1.FinalizerOrphanDependents) {
		deps, err := c.dependents(ctx, uid)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := c.dropOwners(ctx, c.cols[d.key.Resource], d.key, d.obj.GetMetadata().GetUid(), []string{uid}); err != nil {
				return err
			}
		}
		done = append(done, kmetav1.FinalizerOrphanDependents)
	}
	if waitsFor(md, kmetav1.FinalizerDeleteDependents) {
		deps, err := c.dependents(ctx, uid)
		if err != nil {
			return err
		}
		blocking := slices.ContainsFunc(deps, func(d dependent) bool {
			return slices.ContainsFunc(d.obj.GetMetadata().GetOwnerReferences(), func(r *metav1.OwnerReference) bool {
				return r.GetUid() == uid && r.GetBlockOwnerDeletion()
			})
		})
		if blocking {
			return nil // the dependents' deletions enqueue this object again
		}
		done = append(done, kmetav1.FinalizerDeleteDependents)
	}
	if len(done) == 0 {
		return nil
	}
	_, err := col.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		cm := cur.GetMetadata()
		if cm.GetUid() != uid {
			return nil, nil
		}
		n := len(cm.Finalizers)
		cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return slices.Contains(done, f) })
		if len(cm.Finalizers) == n {
			return nil, nil
		}
		return cur, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the finalizers %v of %s: %w", done, key, err)
	}
	c.log.Info("finished the deletion propagation of an object", "object", key.String(), "finalizers", done)
	return nil
}

// owner says whether the owner ref names exists, for the object key names.
func (c *Collector) owner(ctx context.Context, key controller.Key, ref *metav1.OwnerReference) (ownerState, string, error) {
	if ref.GetUid() == "" || ref.GetName() == "" {
		return unresolvable, "no uid or name", nil // Kubernetes' validation refuses such references
	}
	gv, err := schema.ParseGroupVersion(ref.GetApiVersion())
	if err != nil {
		return unresolvable, err.Error(), nil
	}
	k, ok := c.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.GetKind()}]
	if !ok {
		return unresolvable, "kind not served", nil
	}
	ns := ""
	if k.Namespaced {
		if key.Namespace == "" {
			return unresolvable, "a namespaced owner of a cluster-scoped object", nil
		}
		ns = key.Namespace
	}
	o, err := c.cols[k.GroupResource].Get(ctx, ns, ref.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return absent, "", nil
	case err != nil:
		return 0, "", fmt.Errorf("read owner %s %s of %s: %w", k.GroupResource, ref.GetName(), key, err)
	case o.GetMetadata().GetUid() != ref.GetUid():
		return absent, "", nil
	case waitsFor(o.GetMetadata(), kmetav1.FinalizerDeleteDependents):
		return waiting, "", nil
	}
	return present, "", nil
}

// dropOwners removes the owner references of the given uids from the object, if it is still the one of uid.
func (c *Collector) dropOwners(ctx context.Context, col *store.Collection, key controller.Key, uid string, gone []string) error {
	_, err := col.GuaranteedUpdate(ctx, key.Namespace, key.Name, false, func(cur store.Object) (store.Object, error) {
		md := cur.GetMetadata()
		if md.GetUid() != uid {
			return nil, nil
		}
		n := len(md.OwnerReferences)
		md.OwnerReferences = slices.DeleteFunc(md.OwnerReferences, func(r *metav1.OwnerReference) bool { return slices.Contains(gone, r.GetUid()) })
		if len(md.OwnerReferences) == n {
			return nil, nil
		}
		return cur, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the references to owners that are gone from %s: %w", key, err)
	}
	c.log.Info("removed references to owners that are gone", "object", key.String(), "owners", gone)
	return nil
}
