package api

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
)

// Verbs of authorization Attributes, as Kubernetes names them. UpdateStatus is VerbUpdate with Subresource
// "status"; a status patch is VerbPatch with Subresource "status"; UpdateBinding and a binding patch likewise with
// "binding".
const (
	VerbGet    = "get"
	VerbList   = "list"
	VerbWatch  = "watch"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
)

// Attributes describe one request to authorize.
type Attributes struct {
	User        auth.User
	Verb        string
	Resource    schema.GroupResource
	Subresource string // "", "status" or "binding"
	Namespace   string // "" for cluster-scoped resources, and for a list or watch across all namespaces
	Name        string // "" for list and watch
	// Object is the object the request writes: the request's object on create and update, the patched object on
	// patch. It is nil on get, list, watch and delete, and when a patch is checked before it is applied.
	Object store.Object
	// Current is the stored object a get, update, patch or delete applies to; nil when it does not exist (or on
	// create, list and watch).
	//
	// Object and Current may be in any served version of the resource (the stored one, or the request's).
	Current store.Object
}

// Authorizer decides who may do what. The kinds' servers ask it about every call, before they reveal whether the
// object exists: a denied request is Forbidden whether or not its object exists, as in Kubernetes.
type Authorizer interface {
	// Authorize returns nil to allow the request and an error to deny it (Forbidden, see Forbidden). An update or
	// patch is asked once before it is applied, then again, with Current and Object, each time it is applied to the
	// stored state. A list or watch is asked once, without objects.
	Authorize(ctx context.Context, a Attributes) error
	// Filter returns which objects an allowed list or watch may see (nil: all). Lists leave out the others; watches
	// leave them out too, and send an object that stops being visible as DELETED (its last visible state), once.
	Filter(ctx context.Context, a Attributes) func(obj store.Object) bool
}

// Forbidden returns the error that denies a request, worded as kube-apiserver words it, with reason appended:
//
//	shoots.core.gardener.cloud "x" is forbidden: User "u" cannot get resource "shoots" in API group
//	"core.gardener.cloud" in the namespace "garden-dev": <reason>
func Forbidden(a Attributes, reason string) error {
	resource := a.Resource.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", a.User.Name, a.Verb, resource, a.Resource.Group)
	if a.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(a.Resource, a.Name, errors.New(msg))
}

// Authorizer returns the registry's authorizer (Config.Authorizer), nil when everything is allowed. Endpoints
// outside the kinds' servers (access reviews) ask it what the kinds' servers would decide.
func (r *Registry) Authorizer() Authorizer { return r.authz }

// authz returns the function that authorizes this call's requests (it fills in the user and the resource), or nil
// when there is no authorizer.
func (s *Server[T, L, E, PE]) authz(ctx context.Context) func(a Attributes) error {
	az := s.reg.Authorizer()
	if az == nil {
		return nil
	}
	u, _ := auth.UserFrom(ctx)
	return func(a Attributes) error {
		a.User, a.Resource = u, s.kind.GroupResource()
		return az.Authorize(ctx, a)
	}
}

// authorize asks the authorizer, if any, about one request.
func (s *Server[T, L, E, PE]) authorize(ctx context.Context, a Attributes) error {
	if check := s.authz(ctx); check != nil {
		return check(a)
	}
	return nil
}

// authorizeCollection authorizes a list or watch and returns the filter of the objects it may see (nil: all).
func (s *Server[T, L, E, PE]) authorizeCollection(ctx context.Context, verb, namespace string) (func(store.Object) bool, error) {
	az := s.reg.Authorizer()
	if az == nil {
		return nil, nil
	}
	u, _ := auth.UserFrom(ctx)
	a := Attributes{User: u, Verb: verb, Resource: s.kind.GroupResource(), Namespace: namespace}
	if err := az.Authorize(ctx, a); err != nil {
		return nil, err
	}
	return az.Filter(ctx, a), nil
}

// present returns obj as an interface value, nil when the lookup failed (so no typed nil reaches an authorizer).
func present(obj store.Object, err error) store.Object {
	if err != nil {
		return nil
	}
	return obj
}

// visibility filters one watch's events by what its user may see. It remembers the objects sent, so an object that
// stops being visible is sent as DELETED (in its last visible state, at the event's resourceVersion) once and then
// no more, and one that becomes visible is sent as ADDED — what Kubernetes' watch cache does for selectors. A watch
// resumed from a resourceVersion cannot know what the client was sent before: there an event of a visible object
// keeps its type, and a DELETED object is sent when its last state is visible.
type visibility struct {
	visible func(store.Object) bool
	resumed bool
	sent    map[string]store.Object // namespace/name → last state sent
}

func newVisibility(visible func(store.Object) bool, resourceVersion string) *visibility {
	if visible == nil {
		return nil
	}
	return &visibility{visible: visible, resumed: resourceVersion != "" && resourceVersion != "0", sent: map[string]store.Object{}}
}

// filter returns the event to send for ev, and false when nothing is sent. A nil visibility passes everything.
func (v *visibility) filter(ev store.Event) (store.Event, bool) {
	if v == nil || ev.Object == nil || ev.Type == store.Bookmark || ev.Type == store.Error {
		return ev, true
	}
	md := ev.Object.GetMetadata()
	key := md.GetNamespace() + "/" + md.GetName()
	prev, wasSent := v.sent[key]
	if ev.Type == store.Deleted {
		if wasSent {
			delete(v.sent, key)
			return ev, true
		}
		return ev, v.resumed && v.visible(ev.Object)
	}
	if v.visible(ev.Object) {
		v.sent[key] = ev.Object
		if !wasSent && !v.resumed {
			ev.Type = store.Added
		}
		return ev, true
	}
	if !wasSent {
		return ev, false
	}
	delete(v.sent, key)
	gone := proto.Clone(prev).(store.Object)
	gone.GetMetadata().ResourceVersion = md.GetResourceVersion()
	return store.Event{Type: store.Deleted, Object: gone}, true
}
