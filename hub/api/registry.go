package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Routes adds one kind's REST routes to a gateway mux; every route calls the kind's server in-process, without
// serializing the request or the response to protobuf.
type Routes func(ctx context.Context, mux *runtime.ServeMux) error

// Registry wires every kind of the Kinds table to its store collection, its gRPC service and its REST routes.
// It also serves admission's reads of other kinds. Everything it is built from is fixed by NewRegistry.
type Registry struct {
	store  *store.Store
	grpc   grpc.ServiceRegistrar
	routes []Routes
	// authz is asked about every call (nil allows everything); quota about every create of a namespaced kind.
	authz Authorizer
	quota CreateQuota
	// plugins are the kinds' admission plugins; admission is their configuration, passed to them in their context.
	plugins   admission.Plugins
	admission admission.Config
	// errors hides internal errors from clients at the REST watch edge (the gateway and the interceptors do it elsewhere).
	errors Errors
	// indexes are the secondary indexes added to the kinds' built-in ones, by resource.
	indexes map[schema.GroupResource]map[string]func(store.Object) []string
	// patchMeta is Config.PatchMeta.
	patchMeta func(protoreflect.FullName) (strategicpatch.LookupPatchMeta, bool)
	// typeConverter is Config.TypeConverter.
	typeConverter managedfields.TypeConverter

	mu          sync.Mutex
	ctx         context.Context
	collections map[schema.GroupResource]*store.Collection
	// byMessage maps a served message type to its collection when it is also the stored type (no conversion).
	byMessage map[protoreflect.FullName]*store.Collection
}

// Config is what a Registry is built from.
type Config struct {
	// Store holds the kinds' collections (required).
	Store *store.Store
	// Services is where every kind's gRPC service is registered (required).
	Services grpc.ServiceRegistrar
	// Indexes are secondary indexes added to the kinds' built-in ones.
	Indexes []Index
	// PatchMeta is the strategic-merge patch meta of a kind's message (the hub's OpenAPI schema: lists merged by
	// their merge keys); nil, or a kind it does not know, applies strategic merge patches as JSON merge patches.
	PatchMeta func(protoreflect.FullName) (strategicpatch.LookupPatchMeta, bool)
	// TypeConverter is server-side apply's type converter over the kinds' schemas (the hub's OpenAPI documents,
	// openapi.TypeConverter): with it every write records metadata.managedFields and server-side apply
	// (PatchTypeApply) is served; nil refuses apply with 415 and keeps no managedFields.
	TypeConverter managedfields.TypeConverter
	// Admission is the table of admission plugins the kinds' writes run (required; the hub's is admission.Builtin()).
	Admission admission.Plugins
	// AdmissionConfig configures the plugins (token lifetimes, their clock); the zero value is admission's defaults.
	AdmissionConfig admission.Config
	// CreateQuota, when set, is asked about every create of a namespaced kind (the hub's is admission.ProjectQuotas).
	CreateQuota CreateQuota
	// Authorizer, when set, builds the authorizer every call is asked about. It is given the registry, under
	// construction, because authorizers read objects through it (package authz is the hub's); it must not call the
	// registry before NewRegistry returns. Nil allows everything.
	Authorizer func(*Registry) Authorizer
	// Log receives the details of internal errors, which clients see only as a request id (default: discarded).
	Log *slog.Logger
}

// Index is a secondary index of a resource's watch cache, added to the kinds' built-in ones (package authz finds
// the projects of a user through one, package auth the AccessToken of a token through another). Values returns the
// index values of an object; ByIndex finds the objects by one of them.
type Index struct {
	Resource schema.GroupResource
	Name     string
	Values   func(store.Object) []string
}

// NewRegistry registers every kind on cfg.Services, with collections of cfg.Store and the extra indexes. ctx bounds
// the collections' watch caches.
func NewRegistry(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Store == nil || cfg.Services == nil || cfg.Admission.Len() == 0 {
		return nil, errors.New("api: Store, Services and Admission are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{store: cfg.Store, grpc: cfg.Services, ctx: ctx, collections: map[schema.GroupResource]*store.Collection{}, byMessage: map[protoreflect.FullName]*store.Collection{},
		indexes: map[schema.GroupResource]map[string]func(store.Object) []string{},
		plugins: cfg.Admission, admission: cfg.AdmissionConfig, quota: cfg.CreateQuota, errors: Errors{Log: log}, patchMeta: cfg.PatchMeta,
		typeConverter: cfg.TypeConverter}
	for _, ix := range cfg.Indexes {
		if r.indexes[ix.Resource] == nil {
			r.indexes[ix.Resource] = map[string]func(store.Object) []string{}
		}
		if _, dup := r.indexes[ix.Resource][ix.Name]; dup || ix.Name == "" || ix.Values == nil {
			return nil, fmt.Errorf("index %q of %s: duplicate, unnamed or without values", ix.Name, ix.Resource)
		}
		r.indexes[ix.Resource][ix.Name] = ix.Values
	}
	if cfg.Authorizer != nil {
		r.authz = cfg.Authorizer(r)
	}
	if err := registerKinds(r); err != nil {
		return nil, err
	}
	return r, nil
}

// Routes returns the REST routes of every kind.
func (r *Registry) Routes() []Routes { return r.routes }

func (r *Registry) kindByID(id string) (Kind, bool) {
	for _, k := range Kinds {
		if k.id() == id {
			return k, true
		}
	}
	return Kind{}, false
}

// collection returns the store collection of a kind's resource, registering it on first use; all versions of a
// resource share one collection holding the stored shape.
func (r *Registry) collection(k Kind, newObj func() store.Object) (*store.Collection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gr := k.GroupResource()
	if c, ok := r.collections[gr]; ok {
		return c, nil
	}
	if k.StoredAs != "" {
		// The stored version registers the collection; it must come first in the table.
		return nil, fmt.Errorf("kind %s: stored version %s is not registered yet", k.id(), k.StoredAs)
	}
	getters, err := fieldGetters(newObj(), k.Fields)
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", k.id(), err)
	}
	c, err := r.store.Register(r.ctx, store.Resource{
		Group: k.Group, Resource: k.Resource, Namespaced: k.Namespaced, Encrypted: k.Encrypted,
		New: newObj, Fields: getters, Indexes: indexesFor(k, r.indexes[gr]),
		MustIncreaseGeneration: r.plugins.For(newObj()).MustIncreaseGeneration,
		Revised:                reviseJSON,
	})
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", gr, err)
	}
	r.collections[gr] = c
	return c, nil
}

// Collection returns the collection of a resource, for controllers and tests.
func (r *Registry) Collection(gr schema.GroupResource) (*store.Collection, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.collections[gr]
	return c, ok
}

// Get reads an object of any kind (admission.Reader).
func (r *Registry) Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error) {
	return admission.CollectionsReader{Source: r}.Get(ctx, gr, namespace, name)
}

// ByIndex reads the objects of a resource whose index yields value, from the watch cache. The objects are shared:
// do not modify them.
func (r *Registry) ByIndex(ctx context.Context, gr schema.GroupResource, index, value string) ([]store.Object, error) {
	c, ok := r.Collection(gr)
	if !ok {
		return nil, fmt.Errorf("resource %s is not served", gr)
	}
	return c.ByIndex(ctx, index, value)
}

// Sync waits until the resource's watch cache reflects every write committed to etcd before the call, by any replica
// (store.Collection.Sync).
func (r *Registry) Sync(ctx context.Context, gr schema.GroupResource) error {
	c, ok := r.Collection(gr)
	if !ok {
		return fmt.Errorf("resource %s is not served", gr)
	}
	return c.Sync(ctx)
}

// admissionContext returns ctx carrying the admission configuration, for the plugins a write calls.
func (r *Registry) admissionContext(ctx context.Context) context.Context {
	return admission.WithConfig(ctx, r.admission)
}

// List reads all objects of a resource in a namespace (admission.Reader).
func (r *Registry) List(ctx context.Context, gr schema.GroupResource, namespace string) ([]store.Object, error) {
	return admission.CollectionsReader{Source: r}.List(ctx, gr, namespace)
}

// ObjectJSON returns the JSON of m, memoized in the watch cache, when m is the cached state of an object of a kind
// served in its stored shape; false otherwise. The REST gateway builds lists and gets from it.
func (r *Registry) ObjectJSON(m proto.Message) ([]byte, bool) {
	obj, ok := m.(store.Object)
	if !ok {
		return nil, false
	}
	return r.objectJSON(obj)
}

// ObjectDeflated returns the deflate segment (gateway.Segment) of ObjectJSON's JSON of m after before, memoized with
// the JSON in the watch cache; false when ObjectJSON has none. The REST gateway joins them into gzipped lists and
// gets.
func (r *Registry) ObjectDeflated(m proto.Message, before gateway.Before) (*gateway.Segment, bool) {
	obj, ok := m.(store.Object)
	if !ok {
		return nil, false
	}
	c := r.byMessage[obj.ProtoReflect().Descriptor().FullName()]
	if c == nil || obj.GetMetadata() == nil {
		return nil, false
	}
	v, err := c.CachedDerivedEncoding(obj, encodeJSON, func(data []byte, memo any) (any, bool) {
		s, _ := memo.(*gateway.Segment)
		next := gateway.NextSegment(s, data, before)
		return next, next != s
	})
	if err != nil {
		return nil, false
	}
	return v.(*gateway.Segment), true
}

func (r *Registry) objectJSON(obj store.Object) ([]byte, bool) {
	c := r.byMessage[obj.ProtoReflect().Descriptor().FullName()]
	if c == nil || obj.GetMetadata() == nil {
		return nil, false
	}
	b, err := c.CachedEncoding(obj, encodeJSON)
	if err != nil {
		return nil, false
	}
	return b, true
}

// encodeJSON is the encoding the watch cache memoizes for the REST gateway.
func encodeJSON(o store.Object) ([]byte, error) { return kjson.Marshal(o) }

// reviseJSON returns doc, an object's JSON (encodeJSON), with metadata.resourceVersion set to resourceVersion, a
// revision: the JSON of a deletion's answer, the deleted state at the deletion's resourceVersion
// (store.Resource.Revised). It reads doc only up to that member, which kjson writes near the start; false when doc has
// no string there or resourceVersion is not a revision.
func reviseJSON(doc []byte, resourceVersion string) ([]byte, bool) {
	if resourceVersion == "" || strings.Trim(resourceVersion, "0123456789") != "" {
		return nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(doc), jsontext.AllowDuplicateNames(true)) // kjson writes none
	if !jsonMember(dec, "metadata") || !jsonMember(dec, "resourceVersion") {
		return nil, false
	}
	v, err := dec.ReadValue()
	if err != nil || v.Kind() != '"' {
		return nil, false
	}
	end := int(dec.InputOffset())
	start := end - len(v)
	out := make([]byte, 0, len(doc)-len(v)+len(resourceVersion)+2)
	out = append(out, doc[:start]...)
	out = append(out, '"')
	out = append(out, resourceVersion...)
	out = append(out, '"')
	return append(out, doc[end:]...), true
}
