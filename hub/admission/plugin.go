package admission

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/store"
)

// Reader reads other objects for admission checks, from the hub's caches.
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]store.Object, error)
}

// Collections gives the store's collections by resource; *api.Registry is one.
type Collections interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// CollectionsReader is the Reader over a source of collections, for the API server and the controllers that create
// objects as the API server would.
type CollectionsReader struct{ Source Collections }

// Get reads an object of any served kind.
func (r CollectionsReader) Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error) {
	c, ok := r.Source.Collection(gr)
	if !ok {
		return nil, fmt.Errorf("resource %s is not served", gr)
	}
	return c.Get(ctx, namespace, name)
}

// List reads all objects of a served resource in a namespace ("": all namespaces).
func (r CollectionsReader) List(ctx context.Context, gr schema.GroupResource, namespace string) ([]store.Object, error) {
	c, ok := r.Source.Collection(gr)
	if !ok {
		return nil, fmt.Errorf("resource %s is not served", gr)
	}
	res, err := c.List(ctx, namespace, store.ListOptions{})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

// Plugin is what one kind adds to the generic server. Every function may be nil.
type Plugin struct {
	// PrepareCreate sets what the server owns on create from the request (e.g. the requester of a CSR), before
	// defaulting; Kubernetes' strategies do this in PrepareForCreate.
	PrepareCreate func(ctx context.Context, obj store.Object)
	// PrepareUpdate keeps what the server owns on update (and patch) from the stored object old, e.g. a status only
	// the hub writes; Kubernetes' strategies do this in PrepareForUpdate. It may run more than once for one request
	// (a conflict retries the write), so it must be idempotent.
	PrepareUpdate func(obj, old store.Object)
	// Conceal runs on create, after validation, right before the object is stored: it removes from obj what the
	// create's response shows but the store must never hold (an AccessToken's token), and returns the function that
	// puts it back into a copy of the created object for the response.
	Conceal func(obj store.Object) (reveal func(created store.Object) store.Object)
	// Default fills in defaults on create and update, before validation.
	Default func(obj store.Object)
	// Validate checks obj; old is nil on create. Errors name their field path.
	Validate func(ctx context.Context, r Reader, obj, old store.Object) field.ErrorList
	// ValidateDelete may refuse a delete, e.g. without Gardener's deletion confirmation.
	ValidateDelete func(ctx context.Context, r Reader, obj store.Object) error
	// MustIncreaseGeneration reports an update that moves metadata.generation although the desired state stays
	// (store.Resource.MustIncreaseGeneration); it applies to every write of the kind, by users and controllers alike.
	MustIncreaseGeneration func(next, cur store.Object) bool
}

var plugins = map[protoreflect.FullName]Plugin{}

// For returns the plugin of the message type of m (zero Plugin when the kind has none).
func For(m proto.Message) Plugin { return plugins[m.ProtoReflect().Descriptor().FullName()] }

// register adds a typed plugin for T.
func register[T store.Object](def func(T), validate func(ctx context.Context, r Reader, obj, old T) field.ErrorList, validateDelete func(ctx context.Context, r Reader, obj T) error) {
	var zero T
	p := Plugin{}
	if def != nil {
		p.Default = func(obj store.Object) { def(obj.(T)) }
	}
	if validate != nil {
		p.Validate = func(ctx context.Context, r Reader, obj, old store.Object) field.ErrorList {
			var o T
			if old != nil {
				o = old.(T)
			}
			return validate(ctx, r, obj.(T), o)
		}
	}
	if validateDelete != nil {
		p.ValidateDelete = func(ctx context.Context, r Reader, obj store.Object) error { return validateDelete(ctx, r, obj.(T)) }
	}
	plugins[zero.ProtoReflect().Descriptor().FullName()] = p
}

// registerPrepareCreate adds a PrepareCreate hook to T's plugin.
func registerPrepareCreate[T store.Object](prepare func(ctx context.Context, obj T)) {
	var zero T
	name := zero.ProtoReflect().Descriptor().FullName()
	p := plugins[name]
	p.PrepareCreate = func(ctx context.Context, obj store.Object) { prepare(ctx, obj.(T)) }
	plugins[name] = p
}

// registerPrepareUpdate adds a PrepareUpdate hook to T's plugin.
func registerPrepareUpdate[T store.Object](prepare func(obj, old T)) {
	var zero T
	name := zero.ProtoReflect().Descriptor().FullName()
	p := plugins[name]
	p.PrepareUpdate = func(obj, old store.Object) { prepare(obj.(T), old.(T)) }
	plugins[name] = p
}

// registerConceal adds a Conceal hook to T's plugin.
func registerConceal[T store.Object](conceal func(obj T) func(created T) T) {
	var zero T
	name := zero.ProtoReflect().Descriptor().FullName()
	p := plugins[name]
	p.Conceal = func(obj store.Object) func(store.Object) store.Object {
		reveal := conceal(obj.(T))
		return func(created store.Object) store.Object { return reveal(created.(T)) }
	}
	plugins[name] = p
}

// registerMustIncreaseGeneration adds a MustIncreaseGeneration hook to T's plugin.
func registerMustIncreaseGeneration[T store.Object](must func(next, cur T) bool) {
	var zero T
	name := zero.ProtoReflect().Descriptor().FullName()
	p := plugins[name]
	p.MustIncreaseGeneration = func(next, cur store.Object) bool {
		n, ok1 := next.(T)
		c, ok2 := cur.(T)
		return ok1 && ok2 && must(n, c)
	}
	plugins[name] = p
}
