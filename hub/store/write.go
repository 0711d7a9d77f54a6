package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/tracing"
)

const (
	// generateNameSuffix is the length of the random suffix of a generated name; the alphabet is Kubernetes' (no
	// vowels, no look-alikes), a subset of [a-z0-9].
	generateNameSuffix   = 5
	generateNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"
	maxNameLength        = 63
	generateNameAttempts = 8
	// maxUpdateAttempts bounds compare-and-swap retries under contention.
	maxUpdateAttempts = 64
)

// Create stores a new object. The server owns uid, creationTimestamp, generation (1) and deletion fields; a name is
// generated from metadata.generateName when metadata.name is empty. The returned object belongs to the caller.
func (c *Collection) Create(ctx context.Context, obj Object) (Object, error) {
	return c.create(ctx, obj, false)
}

// create is Create, or its dry run: the same checks and server-owned fields, the name's existence read from etcd,
// and nothing written; the result then has no resourceVersion.
func (c *Collection) create(ctx context.Context, obj Object, dryRun bool) (_ Object, err error) {
	ctx, span := c.startSpan(ctx, "store.Create")
	defer func() { endSpan(span, err) }()
	if obj == nil {
		return nil, apierrors.NewBadRequest("no object")
	}
	obj, m := c.writable(encodedAnswer(ctx), obj)
	if m.ResourceVersion != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	generate := m.Name == "" && m.GenerateName != ""
	var errs field.ErrorList
	nsPath := field.NewPath("metadata", "namespace")
	if c.res.Namespaced {
		errs = append(errs, validatePathSegment(nsPath, m.Namespace)...)
	} else if m.Namespace != "" {
		errs = append(errs, field.Forbidden(nsPath, "not allowed on a cluster-scoped resource"))
	}
	if generate {
		errs = append(errs, validatePathSegment(field.NewPath("metadata", "generateName"), m.GenerateName+"x")...)
	} else {
		errs = append(errs, validatePathSegment(field.NewPath("metadata", "name"), m.Name)...)
	}
	if len(errs) > 0 {
		return nil, c.invalid(m.Name, errs)
	}
	m.Uid = uuid.NewString()
	m.CreationTimestamp = timestamppb.New(time.Now().Truncate(time.Second))
	m.Generation = 1
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil

	for attempt := 1; ; attempt++ {
		if generate {
			m.Name = generateName(m.GenerateName)
		}
		key := c.prefix + objectKey(m.Namespace, m.Name)
		if dryRun {
			resp, err := c.store.client.Get(ctx, key, clientv3.WithCountOnly())
			if err != nil {
				return nil, c.internal("create", err)
			}
			if resp.Count == 0 {
				return obj, nil
			}
			if generate && attempt < generateNameAttempts {
				continue
			}
			return nil, apierrors.NewAlreadyExists(c.gr, m.Name)
		}
		val, err := c.encode(key, obj)
		if err != nil {
			return nil, c.internal("create", err)
		}
		if err := waitWrite(ctx); err != nil {
			return nil, err
		}
		endTrace := c.store.cfg.Traces.Begin(tracing.ObjectKey(c.gr.String(), m.Namespace, m.Name), tracing.Traceparent(ctx))
		resp, err := c.store.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			endTrace(0)
			return nil, c.internal("create", err)
		}
		if !resp.Succeeded {
			endTrace(0)
			if generate && attempt < generateNameAttempts {
				continue
			}
			return nil, apierrors.NewAlreadyExists(c.gr, m.Name)
		}
		c.wrote(resp.Header.Revision)
		endTrace(resp.Header.Revision)
		m.ResourceVersion = strconv.FormatInt(resp.Header.Revision, 10)
		if encodedAnswer(ctx) {
			c.answered(objectKey(m.Namespace, m.Name), resp.Header.Revision, obj)
		}
		return obj, nil
	}
}

func generateName(base string) string {
	if len(base) > maxNameLength-generateNameSuffix {
		base = base[:maxNameLength-generateNameSuffix]
	}
	b := []byte(base)
	for range generateNameSuffix {
		b = append(b, generateNameAlphabet[rand.IntN(len(generateNameAlphabet))]) //nolint:gosec // G404: as Kubernetes' generateName, unique, not secret
	}
	return string(b)
}

// Update writes the desired state and metadata of obj. With metadata.resourceVersion set it is a compare-and-swap on
// it (Conflict when the object has moved on); without, it applies to the current object. Status and the server-owned
// metadata are kept from the stored object; generation moves when the desired state changes. An update that changes
// nothing is not written and returns the stored object. An update removing the last finalizer of an object being
// deleted deletes it.
func (c *Collection) Update(ctx context.Context, obj Object) (Object, error) {
	return c.update(ctx, obj, false)
}

// UpdateStatus writes the status of obj and nothing else, with the same concurrency rules as Update.
func (c *Collection) UpdateStatus(ctx context.Context, obj Object) (Object, error) {
	return c.update(ctx, obj, true)
}

func (c *Collection) update(ctx context.Context, obj Object, status bool) (Object, error) {
	if obj == nil {
		return nil, apierrors.NewBadRequest("no object")
	}
	if status && c.shape.status == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s has no status", c.gr))
	}
	m := obj.GetMetadata()
	namespace, name := m.GetNamespace(), m.GetName()
	if err := c.checkName(namespace, name); err != nil {
		return nil, err
	}
	out, _, err := c.guaranteed(ctx, namespace, name, false, func(cur Object) (plan, error) {
		if err := c.preconditions(cur, obj); err != nil {
			return plan{}, err
		}
		return c.planUpdate(cur, obj, status, encodedAnswer(ctx))
	})
	return out, err
}

// GuaranteedUpdate reads the object, applies mutate to a private copy and writes the result as Update (status false)
// or UpdateStatus (status true) would, calling mutate again on the new state when the object changed in between.
// If the mutated object carries a resourceVersion, it must match the current one (Conflict otherwise, no retry).
// Errors of mutate are returned as they are (StatusErrors) or as internal errors.
func (c *Collection) GuaranteedUpdate(ctx context.Context, namespace, name string, status bool, mutate func(cur Object) (Object, error)) (Object, error) {
	return c.guaranteedUpdate(ctx, namespace, name, status, false, mutate)
}

func (c *Collection) guaranteedUpdate(ctx context.Context, namespace, name string, status, dryRun bool, mutate func(cur Object) (Object, error)) (Object, error) {
	if status && c.shape.status == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s has no status", c.gr))
	}
	if err := c.checkName(namespace, name); err != nil {
		return nil, err
	}
	out, _, err := c.guaranteed(ctx, namespace, name, dryRun, func(cur Object) (plan, error) {
		next, err := mutate(clone(cur))
		if err != nil {
			return plan{}, c.internal("update", err)
		}
		if next == nil {
			return plan{result: clone(cur)}, nil
		}
		if err := c.preconditions(cur, next); err != nil {
			return plan{}, err
		}
		return c.planUpdate(cur, next, status, encodedAnswer(ctx))
	})
	return out, err
}

// preconditions checks the resourceVersion and uid an update request carries against the current object.
func (c *Collection) preconditions(cur, req Object) error {
	rm, cm := req.GetMetadata(), cur.GetMetadata()
	name := cm.GetName()
	if uid := rm.GetUid(); uid != "" && uid != cm.GetUid() {
		return apierrors.NewConflict(c.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cm.GetUid()))
	}
	if rv := rm.GetResourceVersion(); rv != "" {
		want, err := strconv.ParseInt(rv, 10, 64)
		if err != nil {
			return c.invalid(name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), rv, "must be an integer")})
		}
		if want != revisionOf(cur) {
			return c.conflict(name)
		}
	}
	return nil
}

// planUpdate computes the state an update of cur with req leads to. req is left as it is. With shared (a request
// WithEncodedAnswer, which only reads the result and hands req over), next shares with cur and req every field but
// its metadata, and every field of its metadata that the update does not set; otherwise it is a deep copy.
func (c *Collection) planUpdate(cur, req Object, status, shared bool) (plan, error) {
	cm := cur.GetMetadata()
	var next Object
	if status {
		next, _ = c.writable(shared, cur)
		c.shape.copyStatus(next, req, shared)
		if mf := req.GetMetadata().GetManagedFields(); len(mf) > 0 {
			// A status write records itself in metadata.managedFields (server-side apply's field manager).
			if !shared {
				mf = cloneManagedFields(mf)
			}
			c.shape.metaOf(next).ManagedFields = mf
		}
	} else {
		next, _ = c.writable(shared, req)
		c.shape.copyStatus(next, cur, shared)
		nm := c.shape.metaOf(next)
		nm.Namespace, nm.Name, nm.GenerateName, nm.Uid = cm.GetNamespace(), cm.GetName(), cm.GetGenerateName(), cm.GetUid()
		nm.CreationTimestamp = cloneTime(cm.GetCreationTimestamp())
		nm.DeletionTimestamp = cloneTime(cm.GetDeletionTimestamp())
		nm.DeletionGracePeriodSeconds = nil
		if cm.DeletionGracePeriodSeconds != nil {
			nm.DeletionGracePeriodSeconds = proto.Int64(*cm.DeletionGracePeriodSeconds)
		}
		nm.Generation = cm.GetGeneration()
		if cm.GetDeletionTimestamp() != nil {
			var added []string
			for _, f := range nm.Finalizers {
				if !slices.Contains(cm.GetFinalizers(), f) {
					added = append(added, f)
				}
			}
			if len(added) > 0 {
				return plan{}, c.invalid(cm.GetName(), field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
					fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %q", added))})
			}
		}
		if !c.shape.desiredEqual(next, cur) || (c.res.MustIncreaseGeneration != nil && c.res.MustIncreaseGeneration(next, cur)) {
			nm.Generation++
		}
	}
	nm := c.shape.metaOf(next)
	nm.ResourceVersion = ""
	// A moved generation is a change: only an update that keeps it may be a no-op (one comparison less per write).
	if nm.Generation == cm.GetGeneration() && c.shape.sameObject(next, cur) {
		return plan{result: clone(cur)}, nil
	}
	if nm.DeletionTimestamp != nil && len(nm.Finalizers) == 0 {
		return plan{next: next, delete: true}, nil
	}
	return plan{next: next}, nil
}

// cloneManagedFields is a deep copy of managed fields entries.
func cloneManagedFields(mf []*metav1.ManagedFieldsEntry) []*metav1.ManagedFieldsEntry {
	out := make([]*metav1.ManagedFieldsEntry, len(mf))
	for i, e := range mf {
		out[i] = proto.CloneOf(e)
	}
	return out
}

func cloneTime(t *timestamppb.Timestamp) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: t.Seconds, Nanos: t.Nanos}
}

// Delete deletes the object, or marks it for deletion (deletionTimestamp) while it has finalizers; deleted says
// which. Preconditions that do not hold give Conflict. The returned object belongs to the caller; a deleted object
// carries the deletion's resourceVersion.
func (c *Collection) Delete(ctx context.Context, namespace, name string, pre *metav1.Preconditions) (obj Object, deleted bool, err error) {
	return c.delete(ctx, namespace, name, pre, nil, false)
}

// DeleteFinalizing is Delete where finalize decides, from the object's finalizers, those it carries from the delete
// on, in the same write: kube-apiserver's deletion propagation (the orphan and foregroundDeletion finalizers), which
// it may add to an object already being deleted. With none left the object is deleted at once.
func (c *Collection) DeleteFinalizing(ctx context.Context, namespace, name string, pre *metav1.Preconditions, finalize func([]string) []string) (obj Object, deleted bool, err error) {
	return c.delete(ctx, namespace, name, pre, finalize, false)
}

func (c *Collection) delete(ctx context.Context, namespace, name string, pre *metav1.Preconditions, finalize func([]string) []string, dryRun bool) (obj Object, deleted bool, err error) {
	if err := c.checkName(namespace, name); err != nil {
		return nil, false, err
	}
	return c.guaranteed(ctx, namespace, name, dryRun, func(cur Object) (plan, error) {
		cm := cur.GetMetadata()
		if pre != nil {
			if pre.Uid != nil && *pre.Uid != cm.GetUid() {
				return plan{}, apierrors.NewConflict(c.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.Uid, cm.GetUid()))
			}
			if pre.ResourceVersion != nil && *pre.ResourceVersion != cm.GetResourceVersion() {
				return plan{}, apierrors.NewConflict(c.gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, cm.GetResourceVersion()))
			}
		}
		finalizers := cm.GetFinalizers()
		if finalize != nil {
			finalizers = finalize(slices.Clone(finalizers))
		}
		if len(finalizers) == 0 {
			return plan{delete: true}, nil
		}
		if cm.GetDeletionTimestamp() != nil && slices.Equal(finalizers, cm.GetFinalizers()) {
			return plan{result: clone(cur)}, nil
		}
		// The mark sets fields of the metadata only (a deep copy of a large object was a tenth of a REST deletion's
		// cost with the loops' finalizers on every shoot).
		next, nm := c.writable(encodedAnswer(ctx), cur)
		if nm.DeletionTimestamp == nil {
			// Marking an object as deleting moves its generation, as kube-apiserver's registry does (markAsDeleting):
			// controllers that compare status.observedGeneration with it see the deletion as a change to act on.
			if nm.Generation > 0 {
				nm.Generation++
			}
			nm.DeletionTimestamp = timestamppb.New(time.Now().Truncate(time.Second))
			nm.DeletionGracePeriodSeconds = proto.Int64(0)
		}
		nm.Finalizers = finalizers
		nm.ResourceVersion = ""
		return plan{next: next}, nil
	})
}

// plan is what an update decided: write next, delete the key (returning next, or the current state when next is
// nil), or write nothing and return result.
type plan struct {
	next   Object
	delete bool
	result Object
}

// guaranteed runs a read-decide-write cycle on one object until its compare-and-swap succeeds. The first decision
// is made on the cached object; when the cache may be behind (a failed precondition or a no-op decision on cached
// data) or the swap fails, it decides again on the state read from etcd.
//
// A dry run decides once, on the state read from etcd, and writes nothing: it returns the state the write would
// store (the current one for a delete) with the resourceVersion of the state it was decided on, as kube-apiserver's
// dry runs answer.
func (c *Collection) guaranteed(ctx context.Context, namespace, name string, dryRun bool, decide func(cur Object) (plan, error)) (_ Object, _ bool, err error) {
	requested := trace.SpanContextFromContext(ctx).IsSampled() // a traced request's write, not a hub loop's
	ctx, span := c.startSpan(ctx, "store.Update")
	defer func() { endSpan(span, err) }()
	objKey := objectKey(namespace, name)
	key := c.prefix + objKey
	if dryRun {
		return c.dryRun(ctx, key, name, decide)
	}
	// No wait for the cache to catch up: the cached object is only a first guess, the compare-and-swap on its
	// revision catches a stale one, and every decision that could be wrong on stale data is re-made on etcd's state.
	// Waiting would make every writer wait for every other writer's watch delivery.
	cur, fromEtcd := c.cache.get(namespace, name), false
	reread := func() error {
		obj, err := c.read(ctx, key)
		cur, fromEtcd = obj, true
		return err
	}
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		if cur == nil {
			if fromEtcd {
				return nil, false, c.notFound(name)
			}
			if err := reread(); err != nil {
				return nil, false, err
			}
			continue
		}
		p, err := decide(cur)
		if err != nil {
			if !fromEtcd {
				if err := reread(); err != nil {
					return nil, false, err
				}
				continue
			}
			return nil, false, err
		}
		curRev := revisionOf(cur)
		if p.next == nil && !p.delete {
			if fromEtcd && !c.res.Encrypted {
				return p.result, false, nil
			}
			// The cache may lag behind another writer: confirm that cur is current before saying "no change".
			var opts []clientv3.OpOption
			if !c.res.Encrypted {
				opts = append(opts, clientv3.WithKeysOnly())
			}
			resp, err := c.store.client.Get(ctx, key, opts...)
			if err != nil {
				return nil, false, c.internal("get", err)
			}
			if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != curRev {
				if err := reread(); err != nil {
					return nil, false, err
				}
				continue
			}
			if !c.res.Encrypted || !c.store.enc.stale(resp.Kvs[0].Value) {
				return p.result, false, nil
			}
			// Sealed with a key that is no longer the primary one (or not sealed): an update rewrites it even
			// without changes, as Kubernetes does, so rewriting every object completes a key rotation.
			next := clone(cur)
			c.shape.metaOf(next).ResourceVersion = ""
			p = plan{next: next}
		}
		var op clientv3.Op
		if p.delete {
			op = clientv3.OpDelete(key)
		} else {
			val, err := c.encode(key, p.next)
			if err != nil {
				return nil, false, c.internal("update", err)
			}
			op = clientv3.OpPut(key, string(val))
		}
		if err := waitWrite(ctx); err != nil {
			return nil, false, err
		}
		// The trace the new version continues: the request's when it asks for work, else the replaced version's, also
		// while the writer of that version has not recorded it yet (a loop reacting to a create it saw in the cache).
		var tp string
		traceKey := tracing.ObjectKey(c.gr.String(), namespace, name)
		if requested && (p.delete || p.next == nil || intentChanged(c.shape.metaOf(cur), c.shape.metaOf(p.next))) {
			tp = tracing.Traceparent(ctx)
		} else {
			tp = c.store.cfg.Traces.LookupObject(curRev, traceKey)
		}
		endTrace := c.store.cfg.Traces.Begin(traceKey, tp)
		// A deletion answered encoded answers with the deleted state's encoding, when it has one: taken now, as the
		// cache may apply the deletion (and drop the state) before the write returns.
		var deleted []byte
		if p.delete && encodedAnswer(ctx) && c.res.Revised != nil {
			deleted = c.MemoizedEncoding(namespace, name, c.shape.metaOf(cur).GetResourceVersion())
		}
		resp, err := c.store.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", curRev)).
			Then(op).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			endTrace(0)
			return nil, false, c.internal("update", err)
		}
		if !resp.Succeeded {
			endTrace(0)
			cur, fromEtcd = nil, true
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				if cur, err = c.decode(key, kvs[0].Value, kvs[0].ModRevision); err != nil {
					return nil, false, c.internal("update", err)
				}
			}
			continue
		}
		rev := resp.Header.Revision
		c.wrote(rev)
		endTrace(rev)
		out, answered := p.next, encodedAnswer(ctx)
		switch {
		case out != nil:
			c.shape.metaOf(out).ResourceVersion = strconv.FormatInt(rev, 10)
			if answered {
				c.answered(objKey, rev, out)
			}
		case answered:
			// A deletion answered encoded: the answer is only read, so it may share cur's fields.
			out = c.withRevision(cur, rev)
			if deleted != nil {
				c.deletions.put(c.shape.metaOf(out), deleted)
			}
		default:
			out = clone(cur)
			c.shape.metaOf(out).ResourceVersion = strconv.FormatInt(rev, 10)
		}
		return out, p.delete, nil
	}
	return nil, false, apierrors.NewConflict(c.gr, name, fmt.Errorf("gave up after %d conflicting attempts", maxUpdateAttempts))
}

// intentChanged reports whether a write from cur to next asks for work: a new generation (the desired state or an
// operation annotation) or the start of the deletion. The agent link sends the version such a write of a traced
// request made with the request's trace, and later versions that only move status, labels or finalizers, or that the
// hub's own loops wrote (the scheduler's binding), with that same trace (tracing.Index).
func intentChanged(cur, next *metav1.ObjectMeta) bool {
	return cur.GetGeneration() != next.GetGeneration() || (cur.GetDeletionTimestamp() == nil) != (next.GetDeletionTimestamp() == nil)
}

// dryRun is guaranteed's dry run.
func (c *Collection) dryRun(ctx context.Context, key, name string, decide func(cur Object) (plan, error)) (Object, bool, error) {
	cur, err := c.read(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if cur == nil {
		return nil, false, c.notFound(name)
	}
	p, err := decide(cur)
	if err != nil {
		return nil, false, err
	}
	out := p.result
	switch {
	case p.next != nil:
		out = p.next
	case out == nil:
		out = clone(cur)
	}
	c.shape.metaOf(out).ResourceVersion = cur.GetMetadata().GetResourceVersion()
	return out, p.delete, nil
}

// read returns the object stored at key in etcd, or nil.
func (c *Collection) read(ctx context.Context, key string) (Object, error) {
	resp, err := c.store.client.Get(ctx, key)
	if err != nil {
		return nil, c.internal("get", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	obj, err := c.decode(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return nil, c.internal("get", err)
	}
	return obj, nil
}

// revisionOf is the ModRevision of a stored object (its resourceVersion).
func revisionOf(obj Object) int64 {
	rev, _ := strconv.ParseInt(obj.GetMetadata().GetResourceVersion(), 10, 64)
	return rev
}
