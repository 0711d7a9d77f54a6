package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// Patch types accepted by Patch. Strategic merge patches are applied as JSON merge patches: Trellis kinds carry no
// patch-merge keys, so lists are replaced as a whole (what Kubernetes does for custom resources).
const (
	PatchTypeMerge     = "application/merge-patch+json"
	PatchTypeJSON      = "application/json-patch+json"
	PatchTypeStrategic = "application/strategic-merge-patch+json"
)

// Subresources a kind may have (Kind.Status, Kind.Binding), as they appear in paths and in Attributes.Subresource.
const (
	SubresourceStatus  = "status"
	SubresourceBinding = "binding"
)

// Server is the one implementation of every kind's typed service. T is the kind's message, L its list, E its watch
// event (PE = *E). The generated <Kind>ServiceServer interfaces are satisfied by *Server instantiated with their types.
type Server[T store.Object, L proto.Message, E any, PE interface {
	*E
	proto.Message
}] struct {
	kind   Kind
	reg    *Registry
	coll   *store.Collection
	reader admission.Reader
	plugin admission.Plugin
	conv   *converter // nil when the served shape is the stored one
	// fields record metadata.managedFields and merge server-side applies; nil without a type converter.
	fields fieldManagers
	// fitting remembers what the field managers typed of each object for its next write; nil without them.
	fitting *fittingMembers

	apiVersionField, kindField, metadataField, statusField protoreflect.FieldDescriptor
	listItems, listMeta, listAPIVersion, listKind          protoreflect.FieldDescriptor
	eventType, eventObject                                 protoreflect.FieldDescriptor
	// specField and seedNameField locate spec.seedName, what the binding subresource writes (Kind.Binding).
	specField, seedNameField protoreflect.FieldDescriptor
}

func newServer[T store.Object, L proto.Message, E any, PE interface {
	*E
	proto.Message
}](r *Registry, group, version, kind string) (*Server[T, L, E, PE], error) {
	k, ok := r.kindByID(group + "/" + version + "/" + kind)
	if !ok {
		return nil, fmt.Errorf("kind %s/%s %s is not in the kind table", group, version, kind)
	}
	var zero T
	var zeroL L
	s := &Server[T, L, E, PE]{kind: k, reg: r, reader: r, plugin: r.plugins.For(zero)}
	td := zero.ProtoReflect().Descriptor()
	s.apiVersionField = td.Fields().ByName("api_version")
	s.kindField = td.Fields().ByName("kind")
	s.metadataField = td.Fields().ByName("metadata")
	s.statusField = td.Fields().ByName("status")
	ld := zeroL.ProtoReflect().Descriptor()
	s.listItems, s.listMeta = ld.Fields().ByName("items"), ld.Fields().ByName("metadata")
	s.listAPIVersion, s.listKind = ld.Fields().ByName("api_version"), ld.Fields().ByName("kind")
	ed := PE(new(E)).ProtoReflect().Descriptor()
	s.eventType, s.eventObject = ed.Fields().ByName("type"), ed.Fields().ByName("object")
	if s.apiVersionField == nil || s.kindField == nil || s.metadataField == nil || s.listItems == nil || s.eventObject == nil {
		return nil, fmt.Errorf("kind %s: message %s lacks apiVersion, kind or metadata", k.id(), td.FullName())
	}
	if k.Binding {
		if s.specField = td.Fields().ByName("spec"); s.specField != nil && s.specField.Message() != nil {
			s.seedNameField = s.specField.Message().Fields().ByName("seed_name")
		}
		if s.seedNameField == nil || s.seedNameField.Kind() != protoreflect.StringKind {
			return nil, fmt.Errorf("kind %s has the binding subresource but no string spec.seedName", k.id())
		}
	}
	var err error
	if k.StoredAs != "" {
		c, ok := converters[k.id()]
		if !ok {
			return nil, fmt.Errorf("kind %s is stored as %s but has no converter", k.id(), k.StoredAs)
		}
		s.conv = &c
	}
	if s.fields, err = newFieldManagers(r.typeConverter, k); err != nil {
		return nil, err
	}
	if s.fields != nil {
		s.fitting = newFittingMembers()
	}
	coll, err := r.collection(k, s.storedNew())
	if err != nil {
		return nil, err
	}
	s.coll = coll
	if s.conv == nil {
		r.byMessage[td.FullName()] = coll
	}
	return s, nil
}

func (s *Server[T, L, E, PE]) newT() T {
	var zero T
	return zero.ProtoReflect().Type().New().Interface().(T)
}

func (s *Server[T, L, E, PE]) storedNew() func() store.Object {
	if s.conv != nil {
		return s.conv.newStored
	}
	return func() store.Object { return s.newT() }
}

// restKey marks the context of a call through the REST gateway (WithREST).
type restKey struct{}

// WithREST marks ctx as a call through the REST gateway, which answers a write with the JSON of the object the
// server returns, from the store's CachedEncoding (Registry.ObjectJSON).
func WithREST(ctx context.Context) context.Context { return context.WithValue(ctx, restKey{}, true) }

// answeredAsStored is ctx for a write whose result the server answers as the store returns it (no conversion, no
// concealed field revealed), marked for the store when the call came through the REST gateway
// (store.WithEncodedAnswer): the JSON of the answer is then the written state's memoized encoding, made once for
// the answer and the reads and watches of that state. The server only reads the result and changes no more than the
// metadata of an object it created afterwards (a retry without managedFields), so the store copies only the metadata.
func (s *Server[T, L, E, PE]) answeredAsStored(ctx context.Context) context.Context {
	if s.conv != nil || ctx.Value(restKey{}) == nil {
		return ctx
	}
	return store.WithEncodedAnswer(ctx)
}

// out converts a stored object to the served type. Without conversion the stored (shared, immutable) object is
// returned as is.
func (s *Server[T, L, E, PE]) out(obj store.Object) (T, error) {
	if s.conv == nil {
		return obj.(T), nil
	}
	o, err := s.conv.fromStored(obj)
	if err != nil {
		var zero T
		return zero, apierrors.NewInternalError(err)
	}
	return o.(T), nil
}

func (s *Server[T, L, E, PE]) in(obj T) (store.Object, error) {
	if s.conv == nil {
		return obj, nil
	}
	return s.conv.toStored(obj)
}

func (s *Server[T, L, E, PE]) meta(obj T) *metav1.ObjectMeta {
	if md := obj.GetMetadata(); md != nil {
		return md
	}
	md := &metav1.ObjectMeta{}
	obj.ProtoReflect().Set(s.metadataField, protoreflect.ValueOfMessage(md.ProtoReflect()))
	return md
}

// checkTypeMeta accepts an object whose apiVersion and kind are empty or this kind's, and sets them.
func (s *Server[T, L, E, PE]) checkTypeMeta(obj T) error {
	m := obj.ProtoReflect()
	av, kd := m.Get(s.apiVersionField).String(), m.Get(s.kindField).String()
	if av != "" && av != s.kind.APIVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("apiVersion %q does not match the expected %q", av, s.kind.APIVersion()))
	}
	if kd != "" && kd != s.kind.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("kind %q does not match the expected %q", kd, s.kind.Kind))
	}
	m.Set(s.apiVersionField, protoreflect.ValueOfString(s.kind.APIVersion()))
	m.Set(s.kindField, protoreflect.ValueOfString(s.kind.Kind))
	return nil
}

func (s *Server[T, L, E, PE]) checkScope(namespace string) error {
	if !s.kind.Namespaced && namespace != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s is cluster-scoped: namespace must be empty", s.kind.Resource))
	}
	return nil
}

func (s *Server[T, L, E, PE]) validate(ctx context.Context, obj, old T) error {
	ctx = admission.WithSpecComparison(ctx)
	var oldMeta *metav1.ObjectMeta
	if any(old) != nil && old.ProtoReflect().IsValid() {
		oldMeta = old.GetMetadata()
	}
	errs := validateObjectMeta(s.meta(obj), oldMeta, s.kind.Namespaced)
	var o store.Object
	if oldMeta != nil {
		o = old
	}
	if s.plugin.Validate != nil {
		errs = append(errs, s.plugin.Validate(ctx, s.reader, obj, o)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(s.kind.GroupKind(), s.meta(obj).GetName(), errs)
	}
	if s.plugin.Admit != nil {
		if err := s.plugin.Admit(ctx, s.reader, obj, o); err != nil {
			return err
		}
	}
	if s.plugin.Warnings != nil {
		for _, w := range s.plugin.Warnings(obj, o) {
			gateway.Warn(ctx, w)
		}
	}
	return nil
}

// Get reads one object from the watch cache.
func (s *Server[T, L, E, PE]) Get(ctx context.Context, req *metav1.GetRequest) (T, error) {
	var zero T
	if err := s.checkScope(req.GetNamespace()); err != nil {
		return zero, err
	}
	if err := s.coll.AtLeast(ctx, req.GetResourceVersion()); err != nil {
		return zero, err
	}
	obj, err := s.coll.Get(ctx, req.GetNamespace(), req.GetName())
	// Authorized before the lookup's result is told: a denied get is Forbidden whether or not the object exists.
	if aerr := s.authorize(ctx, Attributes{Verb: VerbGet, Namespace: req.GetNamespace(), Name: req.GetName(), Current: present(obj, err)}); aerr != nil {
		return zero, aerr
	}
	if err != nil {
		return zero, err
	}
	return s.out(obj)
}

func parseSelectors(ls, fs string) (labels.Selector, fields.Selector, error) {
	l, err := labels.Parse(ls)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("labelSelector: %v", err))
	}
	f, err := fields.ParseSelector(fs)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: %v", err))
	}
	return l, f, nil
}

// List reads a page of objects.
func (s *Server[T, L, E, PE]) List(ctx context.Context, req *metav1.ListRequest) (L, error) {
	var zero L
	if err := s.checkScope(req.GetNamespace()); err != nil {
		return zero, err
	}
	ls, fs, err := parseSelectors(req.GetLabelSelector(), req.GetFieldSelector())
	if err != nil {
		return zero, err
	}
	if req.GetLimit() < 0 {
		return zero, apierrors.NewBadRequest("limit must not be negative")
	}
	visible, err := s.authorizeCollection(ctx, VerbList, req.GetNamespace())
	if err != nil {
		return zero, err
	}
	if err := s.coll.AtLeast(ctx, req.GetResourceVersion()); err != nil {
		return zero, err
	}
	res, err := s.coll.List(ctx, req.GetNamespace(), store.ListOptions{Labels: ls, Fields: fs, Limit: req.GetLimit(), Continue: req.GetContinue()})
	if err != nil {
		return zero, err
	}
	list := zero.ProtoReflect().Type().New()
	list.Set(s.listAPIVersion, protoreflect.ValueOfString(s.kind.APIVersion()))
	list.Set(s.listKind, protoreflect.ValueOfString(s.kind.Kind+"List"))
	lm := &metav1.ListMeta{ResourceVersion: res.ResourceVersion, Continue: res.Continue, RemainingItemCount: res.RemainingItemCount}
	if visible != nil {
		// A filtered page may hold fewer items than the limit (even none, with a continue token), as Kubernetes
		// allows; how many remain is not known.
		lm.RemainingItemCount = nil
	}
	list.Set(s.listMeta, protoreflect.ValueOfMessage(lm.ProtoReflect()))
	items := list.Mutable(s.listItems).List()
	for _, it := range res.Items {
		if visible != nil && !visible(it) {
			continue
		}
		o, err := s.out(it)
		if err != nil {
			return zero, err
		}
		items.Append(protoreflect.ValueOfMessage(o.ProtoReflect()))
	}
	return list.Interface().(L), nil
}

// Watch streams changes until the client goes away, the timeout passes, or the store ends the watch (an Expired
// error when the client fell too far behind or asked for a version no longer kept).
func (s *Server[T, L, E, PE]) Watch(req *metav1.WatchRequest, stream grpc.ServerStreamingServer[E]) error {
	if err := s.checkScope(req.GetNamespace()); err != nil {
		return err
	}
	ls, fs, err := parseSelectors(req.GetLabelSelector(), req.GetFieldSelector())
	if err != nil {
		return err
	}
	ctx := stream.Context()
	visible, err := s.authorizeCollection(ctx, VerbWatch, req.GetNamespace())
	if err != nil {
		return err
	}
	from, err := s.watchStart(ctx, req.GetResourceVersion(), req.GetSendInitialEvents(), req.GetAllowWatchBookmarks())
	if err != nil {
		return err
	}
	vis := newVisibility(visible, from)
	if t := req.GetTimeoutSeconds(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	w, err := s.coll.Watch(ctx, req.GetNamespace(), store.WatchOptions{
		ResourceVersion: from, Labels: ls, Fields: fs, Bookmarks: req.GetAllowWatchBookmarks(), InitialEventsEnd: req.GetSendInitialEvents(),
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	// Headers go out at once, so clients know the watch is established before the first event.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				return nil
			}
			if ev.Type == store.Error {
				return ev.Err
			}
			if ev, ok = vis.filter(ev); !ok {
				continue
			}
			pe := PE(new(E))
			m := pe.ProtoReflect()
			m.Set(s.eventType, protoreflect.ValueOfString(string(ev.Type)))
			if ev.Object != nil {
				o, err := s.watchObject(ev)
				if err != nil {
					return err
				}
				m.Set(s.eventObject, protoreflect.ValueOfMessage(o.ProtoReflect()))
			}
			if err := stream.Send((*E)(pe)); err != nil {
				return err
			}
		}
	}
}

// watchObject is the object a watch event carries: a bookmark's (shared, bare) object gets the kind's apiVersion
// and kind on a copy, as kube-apiserver's bookmarks have them, so that clients decoding by kind (client-go's
// unstructured watches) read it.
func (s *Server[T, L, E, PE]) watchObject(ev store.Event) (T, error) {
	o, err := s.out(ev.Object)
	if err != nil || ev.Type != store.Bookmark {
		return o, err
	}
	o = proto.Clone(o).(T)
	m := o.ProtoReflect()
	m.Set(s.apiVersionField, protoreflect.ValueOfString(s.kind.APIVersion()))
	m.Set(s.kindField, protoreflect.ValueOfString(s.kind.Kind))
	return o, nil
}

// watchStart returns the resourceVersion a watch starts from. Kubernetes' watch-list (sendInitialEvents) starts
// from the current state, at least as new as rv, whose end a bookmark marks (store.WatchOptions.InitialEventsEnd).
func (s *Server[T, L, E, PE]) watchStart(ctx context.Context, rv string, sendInitialEvents, bookmarks bool) (string, error) {
	if !sendInitialEvents {
		return rv, nil
	}
	if !bookmarks {
		return "", apierrors.NewBadRequest("sendInitialEvents needs allowWatchBookmarks: the end of the initial events is a bookmark")
	}
	return "", s.coll.AtLeast(ctx, rv)
}

// Create defaults, validates and stores a new object. Status is not taken from the request for kinds with a status
// subresource, and server-owned metadata is reset.
func (s *Server[T, L, E, PE]) Create(ctx context.Context, obj T) (T, error) {
	var zero T
	w, err := s.writer(ctx, optionsCreate)
	if err != nil {
		return zero, err
	}
	return s.create(s.reg.admissionContext(ctx), w, obj, false)
}

// create writes a new object with w; applied is a server-side apply's object, whose managedFields the apply set.
func (s *Server[T, L, E, PE]) create(ctx context.Context, w writer, obj T, applied bool) (T, error) {
	var zero T
	if err := s.checkTypeMeta(obj); err != nil {
		return zero, err
	}
	md := s.meta(obj)
	md.Uid, md.ResourceVersion, md.Generation = "", "", 0
	md.CreationTimestamp, md.DeletionTimestamp, md.DeletionGracePeriodSeconds = nil, nil, nil
	if s.kind.Status && s.statusField != nil {
		obj.ProtoReflect().Clear(s.statusField)
	}
	if s.plugin.PrepareCreate != nil {
		s.plugin.PrepareCreate(ctx, obj)
	}
	if s.plugin.Default != nil {
		s.plugin.Default(obj)
	}
	if !applied {
		var noLive T
		if err := s.recordUpdate(ctx, "", noLive, obj, false); err != nil {
			return zero, err
		}
	}
	if err := s.authorize(ctx, Attributes{Verb: VerbCreate, Namespace: md.GetNamespace(), Name: md.GetName(), Object: obj}); err != nil {
		return zero, err
	}
	if s.kind.Namespaced {
		if err := s.namespaceActive(ctx, md.GetNamespace()); err != nil {
			return zero, err
		}
	}
	var noOld T
	if err := s.validate(ctx, obj, noOld); err != nil {
		return zero, err
	}
	in, err := s.in(obj)
	if err != nil {
		return zero, err
	}
	if s.kind.Namespaced {
		release, err := s.reg.admitQuota(ctx, s.kind.GroupResource(), obj)
		if err != nil {
			return zero, err
		}
		defer release()
	}
	var reveal func(store.Object) store.Object
	if s.plugin.Conceal != nil {
		reveal = s.plugin.Conceal(in)
	}
	wctx := ctx
	if reveal == nil {
		wctx = s.answeredAsStored(ctx)
	}
	// A server-side apply's managed fields are what it asks for; an object without any has none to leave out.
	retry := !applied && len(in.GetMetadata().GetManagedFields()) > 0
	stored, err := writeOrDropManagedFields(retry, func(drop bool) (store.Object, error) {
		if drop {
			in.GetMetadata().ManagedFields = nil
		}
		return w.Create(wctx, in)
	})
	if err != nil {
		return zero, err
	}
	gateway.SetHTTPCode(ctx, http.StatusCreated)
	out, err := s.out(stored)
	if _, dry := w.(store.DryRun); err != nil || reveal == nil || dry {
		// A dry run does not reveal what the store never holds (an AccessToken's token): it would be a credential
		// that was never issued.
		return out, err
	}
	return reveal(out).(T), nil
}

// namespaceActive is Kubernetes' NamespaceLifecycle admission: objects are created only in namespaces that exist
// and are not being deleted.
func (s *Server[T, L, E, PE]) namespaceActive(ctx context.Context, ns string) error {
	if ns == "" {
		return apierrors.NewInvalid(s.kind.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "namespace"), "namespace is required")})
	}
	obj, err := s.reader.Get(ctx, namespacesResource, "", ns)
	if err != nil {
		return err
	}
	if obj.GetMetadata().GetDeletionTimestamp() != nil {
		return apierrors.NewForbidden(s.kind.GroupResource(), "", fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// Update replaces the desired state and metadata; status stays as stored.
func (s *Server[T, L, E, PE]) Update(ctx context.Context, obj T) (T, error) {
	return s.update(ctx, obj, "")
}

// UpdateStatus replaces the status; everything else stays as stored.
func (s *Server[T, L, E, PE]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	var zero T
	if !s.kind.Status {
		return zero, apierrors.NewMethodNotSupported(s.kind.GroupResource(), "update status")
	}
	return s.update(ctx, obj, SubresourceStatus)
}

// UpdateBinding writes spec.seedName (the binding subresource); everything else stays as stored, and the request's
// resourceVersion and uid are preconditions. Admission sees the write as a binding (admission.Subresource): the only
// way a Shoot's spec.seedName moves from one seed to another.
func (s *Server[T, L, E, PE]) UpdateBinding(ctx context.Context, obj T) (T, error) {
	var zero T
	if !s.kind.Binding {
		return zero, apierrors.NewMethodNotSupported(s.kind.GroupResource(), "update binding")
	}
	return s.update(ctx, obj, SubresourceBinding)
}

// bound returns cur with req's spec.seedName, and req's resourceVersion and uid, when set, as the write's
// preconditions: what a write of the binding subresource stores. Without a resourceVersion the binding applies to
// whatever is current, as a patch does.
func (s *Server[T, L, E, PE]) bound(cur, req T) T {
	next := proto.Clone(cur).(T)
	spec := next.ProtoReflect().Mutable(s.specField).Message()
	if rs := req.ProtoReflect().Get(s.specField).Message(); rs.Has(s.seedNameField) {
		spec.Set(s.seedNameField, rs.Get(s.seedNameField))
	} else {
		spec.Clear(s.seedNameField)
	}
	md, rmd := s.meta(next), req.GetMetadata()
	if rv := rmd.GetResourceVersion(); rv != "" {
		md.ResourceVersion = rv
	}
	if uid := rmd.GetUid(); uid != "" {
		md.Uid = uid
	}
	return next
}

// update writes obj as Update (sub ""), UpdateStatus (SubresourceStatus) or UpdateBinding (SubresourceBinding).
func (s *Server[T, L, E, PE]) update(ctx context.Context, obj T, sub string) (T, error) {
	var zero T
	w, err := s.writer(ctx, optionsUpdate)
	if err != nil {
		return zero, err
	}
	ctx = s.reg.admissionContext(ctx)
	if err := s.checkTypeMeta(obj); err != nil {
		return zero, err
	}
	md := s.meta(obj)
	if md.GetName() == "" {
		return zero, apierrors.NewInvalid(s.kind.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name is required")})
	}
	if err := s.checkScope(md.GetNamespace()); err != nil {
		return zero, err
	}
	if sub == "" && s.plugin.Default != nil {
		s.plugin.Default(obj)
	}
	attrs := Attributes{Verb: VerbUpdate, Subresource: sub, Namespace: md.GetNamespace(), Name: md.GetName(), Object: obj}
	status := sub == SubresourceStatus
	check := s.authz(ctx)
	if check != nil {
		// Decided before the update reveals whether the object exists, and again on the state it applies to.
		attrs.Current = present(s.coll.Get(ctx, attrs.Namespace, attrs.Name))
		if err := check(attrs); err != nil {
			return zero, err
		}
	}
	// A stale resourceVersion fails before validation and copies (once authorized: a Conflict tells the object exists).
	if err := s.coll.Outdated(md.GetNamespace(), md.GetName(), md.GetResourceVersion()); err != nil {
		return zero, err
	}
	// Validation runs against the state the write applies to (again when a concurrent write intervened).
	reset := metadataTrue(ctx, gateway.MetadataResetManagedFields)
	// Without a resourceVersion, a kind that allows it is updated whatever its current version (kube-apiserver sets
	// the current one), its status too; others are refused once the object is known to exist.
	unversioned := md.GetResourceVersion() == ""
	unconditional := sub == "" && unversioned && s.kind.UnconditionalUpdate()
	out, err := writeOrDropManagedFields(true, func(drop bool) (store.Object, error) {
		return w.GuaranteedUpdate(s.answeredAsStored(ctx), md.GetNamespace(), md.GetName(), status, func(cur store.Object) (store.Object, error) {
			if unversioned && !s.kind.UnconditionalUpdate() {
				return nil, s.resourceVersionRequired(md.GetName())
			}
			old, err := s.out(cur)
			if err != nil {
				return nil, err
			}
			if status {
				if check != nil {
					attrs.Current = cur
					if err := check(attrs); err != nil {
						return nil, err
					}
				}
				if err := s.recordSubresource(ctx, sub, old, obj); err != nil {
					return nil, err
				}
				return dropManagedFields(drop)(s.in(obj))
			}
			next, vctx := obj, ctx
			if sub == SubresourceBinding {
				next, vctx = s.bound(old, obj), admission.WithSubresource(ctx, sub)
			}
			if unconditional {
				s.meta(next).ResourceVersion = old.GetMetadata().GetResourceVersion()
			}
			if sub == "" && s.plugin.PrepareUpdate != nil {
				s.plugin.PrepareUpdate(next, old)
			}
			if sub == "" {
				err = s.recordUpdateJSON(ctx, sub, old, s.memoizedJSON(cur), next, reset)
			} else {
				err = s.recordSubresource(ctx, sub, old, next)
			}
			if err != nil {
				return nil, err
			}
			if check != nil {
				attrs.Object, attrs.Current = next, cur
				if err := check(attrs); err != nil {
					return nil, err
				}
			}
			if err := s.validate(vctx, next, old); err != nil {
				return nil, err
			}
			return dropManagedFields(drop)(s.in(next))
		})
	})
	if err != nil {
		return zero, err
	}
	return s.out(out)
}

// writeOrDropManagedFields runs write; when etcd refused the object as too large (store.IsRequestTooLarge) and retry
// is set, it runs it once more with drop set, for the write to store the object without managedFields, as
// kube-apiserver's create, update and patch handlers retry: the managed fields may be what makes the object too
// large, and they are the server's record of the writes, not a client's intent.
func writeOrDropManagedFields(retry bool, write func(drop bool) (store.Object, error)) (store.Object, error) {
	out, err := write(false)
	if retry && store.IsRequestTooLarge(err) {
		return write(true)
	}
	return out, err
}

// dropManagedFields returns what clears the managedFields of a write's object when drop is set
// (writeOrDropManagedFields).
func dropManagedFields(drop bool) func(store.Object, error) (store.Object, error) {
	return func(o store.Object, err error) (store.Object, error) {
		if drop && err == nil {
			o.GetMetadata().ManagedFields = nil
		}
		return o, err
	}
}

// resourceVersionRequired is kube-apiserver's refusal of an update without metadata.resourceVersion for a kind that
// does not allow unconditional updates (its generic registry's, before validation): the resource in the kind's
// place and the missing version as the number 0, "shoots.core.gardener.cloud "x" is invalid:
// metadata.resourceVersion: Invalid value: 0: must be specified for an update".
func (s *Server[T, L, E, PE]) resourceVersionRequired(name string) error {
	gr := s.kind.GroupResource()
	return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, field.ErrorList{
		field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update")})
}

// Patch applies a JSON merge patch, strategic merge patch or JSON patch to the current object and writes the result, retrying on
// concurrent changes. A resourceVersion in the patch acts as a precondition.
func (s *Server[T, L, E, PE]) Patch(ctx context.Context, req *metav1.PatchRequest) (T, error) {
	var zero T
	w, err := s.writer(ctx, optionsPatch)
	if err != nil {
		return zero, err
	}
	ctx = s.reg.admissionContext(ctx)
	status, binding := false, false
	switch req.GetSubresource() {
	case "":
	case SubresourceStatus:
		if !s.kind.Status {
			return zero, apierrors.NewNotFound(s.kind.GroupResource(), req.GetName()+"/status")
		}
		status = true
	case SubresourceBinding:
		if !s.kind.Binding {
			return zero, apierrors.NewNotFound(s.kind.GroupResource(), req.GetName()+"/binding")
		}
		binding = true
	default:
		return zero, apierrors.NewNotFound(s.kind.GroupResource(), req.GetName()+"/"+req.GetSubresource())
	}
	if err := s.checkScope(req.GetNamespace()); err != nil {
		return zero, err
	}
	patch := req.GetPatch().GetRaw()
	if len(patch) == 0 {
		return zero, apierrors.NewBadRequest("the patch document is empty")
	}
	applying := req.GetPatchType() == PatchTypeApply && s.fields != nil
	var apply func([]byte) ([]byte, error)
	if applying {
		apply, err = s.applyFunc(ctx, req.GetSubresource(), patch)
	} else {
		apply, err = s.patchFunc(req.GetPatchType(), patch)
	}
	decoding := patchedDecoding(ctx)
	if err != nil {
		return zero, err
	}
	attrs := Attributes{Verb: VerbPatch, Subresource: req.GetSubresource(), Namespace: req.GetNamespace(), Name: req.GetName()}
	check := s.authz(ctx)
	if check != nil {
		// Decided before the patch reveals whether the object exists, and again on each state it applies to.
		attrs.Current = present(s.coll.Get(ctx, attrs.Namespace, attrs.Name))
		if err := check(attrs); err != nil {
			return zero, err
		}
	}
	// A server-side apply's managed fields are what it asks for: it is not written without them.
	out, err := writeOrDropManagedFields(!applying, func(drop bool) (store.Object, error) {
		return w.GuaranteedUpdate(s.answeredAsStored(ctx), req.GetNamespace(), req.GetName(), status, func(cur store.Object) (store.Object, error) {
			curT, err := s.out(cur)
			if err != nil {
				return nil, err
			}
			doc := s.memoizedJSON(cur)
			if doc == nil {
				if doc, err = kjson.Marshal(curT); err != nil {
					return nil, apierrors.NewInternalError(err)
				}
			}
			patched, err := apply(doc)
			if err != nil {
				if applying {
					return nil, err
				}
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch could not be applied: %v", err))
			}
			obj := s.newT()
			if err := decoding.Unmarshal(patched, obj); err != nil {
				return nil, decodeError(s.kind, req.GetName(), err)
			}
			if err := s.checkTypeMeta(obj); err != nil {
				return nil, err
			}
			md := s.meta(obj)
			if md.GetName() != req.GetName() || md.GetNamespace() != req.GetNamespace() {
				return nil, apierrors.NewBadRequest("the patch must not change metadata.name or metadata.namespace")
			}
			if md.GetResourceVersion() == "" {
				// A patch that drops the resourceVersion applies to whatever is current, as in Kubernetes.
				md.ResourceVersion = cur.GetMetadata().GetResourceVersion()
			}
			if md.GetResourceVersion() != cur.GetMetadata().GetResourceVersion() {
				return nil, apierrors.NewConflict(s.kind.GroupResource(), req.GetName(), fmt.Errorf("the patch requires resourceVersion %s, the object has %s", md.GetResourceVersion(), cur.GetMetadata().GetResourceVersion()))
			}
			vctx := ctx
			if binding {
				obj, vctx = s.bound(curT, obj), admission.WithSubresource(ctx, SubresourceBinding)
			} else if !status && s.plugin.PrepareUpdate != nil {
				s.plugin.PrepareUpdate(obj, curT)
			}
			if check != nil {
				attrs.Object, attrs.Current = obj, cur
				if err := check(attrs); err != nil {
					return nil, err
				}
			}
			if !status && s.plugin.Default != nil && !binding {
				s.plugin.Default(obj)
			}
			switch {
			case applying:
			case req.GetSubresource() == "":
				// doc is curT's JSON: the field manager reads the live object from it.
				err = s.recordUpdateJSON(ctx, "", curT, doc, obj, resetsManagedFields(patched))
			default:
				err = s.recordSubresource(ctx, req.GetSubresource(), curT, obj)
			}
			if err != nil {
				return nil, err
			}
			if !status {
				if err := s.validate(vctx, obj, curT); err != nil {
					return nil, err
				}
			}
			return dropManagedFields(drop)(s.in(obj))
		})
	})
	if applying && apierrors.IsNotFound(err) && req.GetSubresource() == "" {
		// Server-side apply creates what does not exist, as in Kubernetes.
		return s.applyCreate(ctx, w, req, apply, decoding)
	}
	if err != nil {
		return zero, err
	}
	return s.out(out)
}

// memoizedJSON returns the JSON of cur, the stored state a write applies to, when a read or a watch of that version
// serialized it (store.Collection.MemoizedEncoding), else nil. The bytes are shared with the watch cache: the patch
// appliers and the field manager only read them (TestPatchFuncsLeaveDocument), and the capacity is cut to the length
// so that an append copies.
func (s *Server[T, L, E, PE]) memoizedJSON(cur store.Object) []byte {
	if s.conv != nil {
		return nil
	}
	md := cur.GetMetadata()
	b := s.coll.MemoizedEncoding(md.GetNamespace(), md.GetName(), md.GetResourceVersion())
	if b == nil {
		return nil
	}
	return b[:len(b):len(b)]
}

// applyCreate creates the object a server-side apply names when it does not exist: the apply merged into an empty
// object, then written as a create (admission, defaulting, validation and quota of a create).
func (s *Server[T, L, E, PE]) applyCreate(ctx context.Context, w writer, req *metav1.PatchRequest, apply func([]byte) ([]byte, error), decoding kjson.UnmarshalOptions) (T, error) {
	var zero T
	empty := s.newT()
	if err := s.checkTypeMeta(empty); err != nil {
		return zero, err
	}
	doc, err := kjson.Marshal(empty)
	if err != nil {
		return zero, apierrors.NewInternalError(err)
	}
	merged, err := apply(doc)
	if err != nil {
		return zero, err
	}
	obj := s.newT()
	if err := decoding.Unmarshal(merged, obj); err != nil {
		return zero, decodeError(s.kind, req.GetName(), err)
	}
	md := s.meta(obj)
	if md.GetNamespace() == "" {
		md.Namespace = req.GetNamespace()
	}
	if md.GetName() != req.GetName() {
		return zero, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", md.GetName(), req.GetName()))
	}
	if md.GetNamespace() != req.GetNamespace() {
		return zero, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return s.create(ctx, w, obj, true)
}

// patchFunc returns what applies a patch of patchType. A strategic merge patch merges lists by the merge keys of
// the kind's schema (Config.PatchMeta), with strategicpatch as kube-apiserver applies it.
func (s *Server[T, L, E, PE]) patchFunc(patchType string, patch []byte) (func([]byte) ([]byte, error), error) {
	if patchType == PatchTypeStrategic && s.reg.patchMeta != nil {
		if meta, ok := s.reg.patchMeta(s.newT().ProtoReflect().Descriptor().FullName()); ok {
			return func(doc []byte) ([]byte, error) {
				return strategicpatch.StrategicMergePatchUsingLookupPatchMeta(doc, patch, meta)
			}, nil
		}
	}
	switch patchType {
	case "", PatchTypeMerge, PatchTypeStrategic:
		parsed, fast := parseMergePatch(patch)
		return func(doc []byte) ([]byte, error) {
			if fast {
				if out, ok := mergePatch(doc, parsed); ok {
					return out, nil
				}
			}
			return jsonpatch.MergePatch(doc, patch)
		}, nil
	case PatchTypeJSON:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
		}
		return p.Apply, nil
	}
	return nil, &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: kmetav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the patch type %q is not supported; use %s or %s", patchType, PatchTypeMerge, PatchTypeJSON),
	}}
}

// decodeError turns a decoding error of a patched document into a 422 naming the field.
func decodeError(k Kind, name string, err error) error {
	var fe *kjson.FieldError
	if errors.As(err, &fe) {
		return apierrors.NewInvalid(k.GroupKind(), name, field.ErrorList{field.Invalid(field.NewPath(fe.Path), nil, fe.Err.Error())})
	}
	return apierrors.NewBadRequest(err.Error())
}

// Delete deletes an object, or marks it for deletion while finalizers remain.
func (s *Server[T, L, E, PE]) Delete(ctx context.Context, req *metav1.DeleteRequest) (T, error) {
	var zero T
	w, err := s.writer(ctx, optionsDelete)
	if err != nil {
		return zero, err
	}
	if err := s.checkScope(req.GetNamespace()); err != nil {
		return zero, err
	}
	cur, err := s.coll.Get(ctx, req.GetNamespace(), req.GetName())
	if aerr := s.authorize(ctx, Attributes{Verb: VerbDelete, Namespace: req.GetNamespace(), Name: req.GetName(), Current: present(cur, err)}); aerr != nil {
		return zero, aerr
	}
	if err != nil {
		return zero, err
	}
	if s.plugin.ValidateDelete != nil {
		if err := s.plugin.ValidateDelete(ctx, s.reader, cur); err != nil {
			return zero, err
		}
	}
	finalize, err := propagation(ctx)
	if err != nil {
		return zero, err
	}
	out, _, err := w.DeleteFinalizing(s.answeredAsStored(ctx), req.GetNamespace(), req.GetName(), req.GetPreconditions(), finalize)
	if err != nil {
		return zero, err
	}
	return s.out(out)
}
