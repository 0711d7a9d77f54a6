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
	// Admit runs on create and update after Validate found nothing: it may refuse the write with a status of its own
	// (an apierrors.StatusError), e.g. 403 Forbidden for a shoot beyond its quotas as Gardener's admission plugins
	// answer, where Validate's field errors give 422. old is nil on create.
	Admit func(ctx context.Context, r Reader, obj, old store.Object) error
	// Warnings are the warnings of a create or update that Validate and Admit let through, for the client (the
	// strategies' WarningsOnCreate and WarningsOnUpdate); old is nil on create.
	Warnings func(obj, old store.Object) []string
	// ValidateDelete may refuse a delete, e.g. without Gardener's deletion confirmation.
	ValidateDelete func(ctx context.Context, r Reader, obj store.Object) error
	// MustIncreaseGeneration reports an update that moves metadata.generation although the desired state stays
	// (store.Resource.MustIncreaseGeneration); it applies to every write of the kind, by users and controllers alike.
	MustIncreaseGeneration func(next, cur store.Object) bool
}

// Plugins is a table of admission plugins by message type: what the API server runs for each kind, and what
// controllers that create or change objects as the API server would run too. Builtin returns the hub's; the zero
// table has no plugins. A table is read-only once built.
type Plugins struct {
	byMessage map[protoreflect.FullName]Plugin
}

// For returns the plugin of the message type of m (the zero Plugin when the table has none for it).
func (p Plugins) For(m proto.Message) Plugin {
	return p.byMessage[m.ProtoReflect().Descriptor().FullName()]
}

// Len is the number of kinds with a plugin.
func (p Plugins) Len() int { return len(p.byMessage) }

// row is one kind's plugin in a table.
type row interface {
	name() protoreflect.FullName
	plugin() Plugin
}

// newPlugins builds a table; a kind given twice is a programming error.
func newPlugins(rows ...row) Plugins {
	p := Plugins{byMessage: make(map[protoreflect.FullName]Plugin, len(rows))}
	for _, r := range rows {
		if _, dup := p.byMessage[r.name()]; dup {
			panic(fmt.Sprintf("admission: two plugins for %s", r.name()))
		}
		p.byMessage[r.name()] = r.plugin()
	}
	return p
}

// typed is a kind's plugin written for its message type T; kind builds one, the with methods add hooks.
type typed[T store.Object] struct {
	def            func(T)
	validate       func(ctx context.Context, r Reader, obj, old T) field.ErrorList
	validateDelete func(ctx context.Context, r Reader, obj T) error
	admit          func(ctx context.Context, r Reader, obj, old T) error
	prepareCreate  func(ctx context.Context, obj T)
	prepareUpdate  func(obj, old T)
	conceal        func(obj T) func(created T) T
	mustIncrease   func(next, cur T) bool
	warnings       func(obj, old T) []string
}

// kind starts the plugin of T (inferred from validate) with its defaulting, validation and delete validation; each
// may be nil.
func kind[T store.Object](def func(T), validate func(ctx context.Context, r Reader, obj, old T) field.ErrorList, validateDelete func(ctx context.Context, r Reader, obj T) error) typed[T] {
	return typed[T]{def: def, validate: validate, validateDelete: validateDelete}
}

func (t typed[T]) withPrepareCreate(f func(ctx context.Context, obj T)) typed[T] {
	t.prepareCreate = f
	return t
}
func (t typed[T]) withAdmit(f func(ctx context.Context, r Reader, obj, old T) error) typed[T] {
	t.admit = f
	return t
}
func (t typed[T]) withPrepareUpdate(f func(obj, old T)) typed[T]        { t.prepareUpdate = f; return t }
func (t typed[T]) withConceal(f func(obj T) func(created T) T) typed[T] { t.conceal = f; return t }
func (t typed[T]) withWarnings(f func(obj, old T) []string) typed[T]    { t.warnings = f; return t }
func (t typed[T]) withMustIncreaseGeneration(f func(next, cur T) bool) typed[T] {
	t.mustIncrease = f
	return t
}

func (t typed[T]) name() protoreflect.FullName {
	var zero T
	return zero.ProtoReflect().Descriptor().FullName()
}

// plugin adapts the typed functions to Plugin's.
func (t typed[T]) plugin() Plugin {
	var p Plugin
	if t.def != nil {
		p.Default = func(obj store.Object) { t.def(obj.(T)) }
	}
	if t.validate != nil {
		p.Validate = func(ctx context.Context, r Reader, obj, old store.Object) field.ErrorList {
			var o T
			if old != nil {
				o = old.(T)
			}
			return t.validate(ctx, r, obj.(T), o)
		}
	}
	if t.admit != nil {
		p.Admit = func(ctx context.Context, r Reader, obj, old store.Object) error {
			var o T
			if old != nil {
				o = old.(T)
			}
			return t.admit(ctx, r, obj.(T), o)
		}
	}
	if t.warnings != nil {
		p.Warnings = func(obj, old store.Object) []string {
			var o T
			if old != nil {
				o = old.(T)
			}
			return t.warnings(obj.(T), o)
		}
	}
	if t.validateDelete != nil {
		p.ValidateDelete = func(ctx context.Context, r Reader, obj store.Object) error { return t.validateDelete(ctx, r, obj.(T)) }
	}
	if t.prepareCreate != nil {
		p.PrepareCreate = func(ctx context.Context, obj store.Object) { t.prepareCreate(ctx, obj.(T)) }
	}
	if t.prepareUpdate != nil {
		p.PrepareUpdate = func(obj, old store.Object) { t.prepareUpdate(obj.(T), old.(T)) }
	}
	if t.conceal != nil {
		p.Conceal = func(obj store.Object) func(store.Object) store.Object {
			reveal := t.conceal(obj.(T))
			return func(created store.Object) store.Object { return reveal(created.(T)) }
		}
	}
	if t.mustIncrease != nil {
		p.MustIncreaseGeneration = func(next, cur store.Object) bool {
			n, ok1 := next.(T)
			c, ok2 := cur.(T)
			return ok1 && ok2 && t.mustIncrease(n, c)
		}
	}
	return p
}
