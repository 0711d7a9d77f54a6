package hubobject

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Object is a core object as the hub's gRPC API carries it.
type Object interface {
	proto.Message
	GetMetadata() *metav1.ObjectMeta
}

// API is what a Client needs of the hub's gRPC client of one kind (such as corev1beta1.BackupBucketServiceClient).
type API[T Object] interface {
	Get(ctx context.Context, in *metav1.GetRequest, opts ...grpc.CallOption) (T, error)
	Update(ctx context.Context, in T, opts ...grpc.CallOption) (T, error)
	UpdateStatus(ctx context.Context, in T, opts ...grpc.CallOption) (T, error)
	Patch(ctx context.Context, in *metav1.PatchRequest, opts ...grpc.CallOption) (T, error)
}

// maxConflicts is how often Update re-reads an object after a conflict before it gives up.
const maxConflicts = 5

// Client writes the objects of one kind to the hub for a controller and remembers the hub's answers. It is safe for
// concurrent use. Create it with NewClient.
type Client[T Object] struct {
	api     API[T]
	timeout time.Duration
	now     func() time.Time

	mu      sync.Mutex
	written map[string]T // the hub's answer to the last write, by Key
}

// NewClient returns a Client that writes through api; timeout bounds each call to the hub, now is the clock of the
// times it reports (Report).
func NewClient[T Object](api API[T], timeout time.Duration, now func() time.Time) *Client[T] {
	return &Client[T]{api: api, timeout: timeout, now: now, written: map[string]T{}}
}

// Key is the agent cache's key of obj: "namespace/name", or "name" for a cluster-scoped object.
func Key(obj Object) string {
	return cache.Key(obj.GetMetadata().GetNamespace(), obj.GetMetadata().GetName())
}

// SplitKey splits a Key into namespace and name.
func SplitKey(key string) (namespace, name string) {
	if ns, name, ok := strings.Cut(key, "/"); ok {
		return ns, name
	}
	return "", key
}

// Remember records obj as the hub's answer to a write of the controller's own, such as a create, for Pick.
func (c *Client[T]) Remember(obj T) {
	c.mu.Lock()
	c.written[Key(obj)] = obj
	c.mu.Unlock()
}

// Forget drops what the client remembers of the object key, for an object that is gone.
func (c *Client[T]) Forget(key string) {
	c.mu.Lock()
	delete(c.written, key)
	c.mu.Unlock()
}

// Pick returns the newer, by resourceVersion, of the cached object (ok: the cache has it) and the one last written;
// none when the cache does not have it. Once the cache has caught up, the written one is forgotten.
func (c *Client[T]) Pick(key string, cached T, ok bool) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mine, have := c.written[key]
	if !ok || !have {
		return cached, ok
	}
	if resourceVersion(cached) >= resourceVersion(mine) {
		delete(c.written, key)
		return cached, true
	}
	return mine, true
}

func resourceVersion(obj Object) int64 {
	v, _ := strconv.ParseInt(obj.GetMetadata().GetResourceVersion(), 10, 64)
	return v
}

// kind is the kind of obj, for messages.
func kind(obj Object) string { return string(obj.ProtoReflect().Descriptor().Name()) }

// Update applies change to a copy of obj, which has metadata then, and updates the object on the hub. After a
// conflict it applies change to the hub's newest state and tries again, up to five times. change returns false
// when there is nothing to do; Update then returns the object it looked at without a write.
func (c *Client[T]) Update(ctx context.Context, obj T, change func(T) bool) (T, error) {
	return c.update(ctx, obj, change, c.api.Update, "update")
}

// UpdateStatus is Update for the status subresource: change edits the status of a copy of obj, and only the status
// is written (with obj's resourceVersion, so a concurrent writer's change is never overwritten).
func (c *Client[T]) UpdateStatus(ctx context.Context, obj T, change func(T) bool) (T, error) {
	return c.update(ctx, obj, change, c.api.UpdateStatus, "update the status of")
}

func (c *Client[T]) update(ctx context.Context, obj T, change func(T) bool, write func(context.Context, T, ...grpc.CallOption) (T, error), what string) (T, error) {
	cur := proto.Clone(obj).(T)
	for attempt := 0; ; attempt++ {
		withMetadata(cur)
		if !change(cur) {
			return cur, nil
		}
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		out, err := write(cctx, cur)
		cancel()
		if err == nil {
			c.Remember(out)
			return out, nil
		}
		var zero T
		if status.Code(err) != codes.Aborted || attempt >= maxConflicts {
			return zero, fmt.Errorf("%s %s %s: %w", what, kind(obj), Key(obj), err)
		}
		cctx, cancel = context.WithTimeout(ctx, c.timeout)
		fresh, gerr := c.api.Get(cctx, &metav1.GetRequest{Namespace: obj.GetMetadata().GetNamespace(), Name: obj.GetMetadata().GetName()})
		cancel()
		if gerr != nil {
			return zero, fmt.Errorf("%s %s %s: %w (re-read: %w)", what, kind(obj), Key(obj), err, gerr)
		}
		cur = fresh
	}
}

// withMetadata gives obj an empty metadata if it has none, for change functions to write into.
func withMetadata(obj Object) {
	m := obj.ProtoReflect()
	if fd := m.Descriptor().Fields().ByName("metadata"); fd != nil {
		m.Mutable(fd)
	}
}

// AddFinalizer adds finalizer name to obj on the hub (Update) unless it has it.
func (c *Client[T]) AddFinalizer(ctx context.Context, obj T, name string) (T, error) {
	return c.Update(ctx, obj, func(o T) bool {
		md := o.GetMetadata()
		if slices.Contains(md.Finalizers, name) {
			return false
		}
		md.Finalizers = append(md.Finalizers, name)
		return true
	})
}

// RemoveFinalizer removes finalizer name from obj on the hub (Update) if it has it.
func (c *Client[T]) RemoveFinalizer(ctx context.Context, obj T, name string) (T, error) {
	return c.Update(ctx, obj, func(o T) bool {
		md := o.GetMetadata()
		i := slices.Index(md.Finalizers, name)
		if i < 0 {
			return false
		}
		md.Finalizers = slices.Delete(slices.Clone(md.Finalizers), i, i+1)
		return true
	})
}

// PatchStatus applies a JSON merge patch of fields (Gardener JSON by field name; a nil value removes the field) to
// obj's status on the hub and returns the object as the hub has it after the write.
func (c *Client[T]) PatchStatus(ctx context.Context, obj T, fields map[string]any) (T, error) {
	var zero T
	body, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out, err := c.api.Patch(ctx, &metav1.PatchRequest{Namespace: obj.GetMetadata().GetNamespace(), Name: obj.GetMetadata().GetName(),
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json", Subresource: "status"})
	if err != nil {
		return zero, fmt.Errorf("patch status of %s %s: %w", kind(obj), Key(obj), err)
	}
	c.Remember(out)
	return out, nil
}

// JSON renders a message as Gardener JSON, for a status patch.
func JSON(m proto.Message) json.RawMessage {
	b, err := kjson.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("hubobject: encode %T: %v", m, err)) // the agent's own messages always encode
	}
	return b
}
