package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	rbacv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/rbac/v1"
)

// IndexReader reads the watch caches through their indexes; *api.Registry is one (with the indexes of Indexes).
type IndexReader interface {
	Reader
	ByIndex(ctx context.Context, gr schema.GroupResource, index, value string) ([]store.Object, error)
}

var accessTokensResource = auth.AccessTokens

// userRequest decides the requests of one user who is neither a cluster admin, a seed agent nor a bootstrap token
// user: by project roles, the global read rules and the user's own tokens. Memberships are read through the index
// once per request, on first need.
type userRequest struct {
	ctx    context.Context
	idx    IndexReader
	user   auth.User
	keys   []string
	ms     []membership
	loaded bool
	err    error
}

func (a *Authorizer) userRequest(ctx context.Context, u auth.User) *userRequest {
	return &userRequest{ctx: ctx, idx: a.index, user: u, keys: userKeys(u)}
}

// memberships returns the user's memberships in every project that names one of its subject keys.
func (r *userRequest) memberships() ([]membership, error) {
	if r.loaded {
		return r.ms, r.err
	}
	r.loaded = true
	seen := map[string]bool{}
	for _, k := range r.keys {
		objs, err := r.idx.ByIndex(r.ctx, projectsResource, IndexProjectMember, k)
		if err != nil {
			r.err = fmt.Errorf("read the projects of %s: %w", r.user.Name, err)
			return nil, r.err
		}
		for _, o := range objs {
			p := o.(*corev1beta1.Project)
			if name := p.GetMetadata().GetName(); !seen[name] {
				seen[name] = true
				if m := membershipIn(p, r.keys); m.member() {
					r.ms = append(r.ms, m)
				}
			}
		}
	}
	return r.ms, nil
}

// inNamespace returns the user's membership in the project whose namespace is ns.
func (r *userRequest) inNamespace(ns string) (membership, bool, error) {
	ms, err := r.memberships()
	for _, m := range ms {
		if m.project.GetSpec().GetNamespace() == ns {
			return m, true, err
		}
	}
	return membership{}, false, err
}

// allowsIn reports whether the user's roles in m allow verb on the resource (and subresource) of gr, on the object
// name: the built-in roles' rules and the rules of the ClusterRoles of its extension roles.
func (r *userRequest) allowsIn(m membership, gr schema.GroupResource, sub, verb, name string) (bool, error) {
	resource := gr.Resource
	if sub != "" {
		resource += "/" + sub
	}
	for bits, rules := range namespaceRules {
		if !m.has(bits) {
			continue
		}
		for _, ru := range rules {
			if ru.allows(gr.Group, resource, verb, name) {
				return true, nil
			}
		}
	}
	for _, ext := range m.extensions {
		roles, err := r.idx.ByIndex(r.ctx, clusterRolesResource, IndexExtensionRole, ext)
		if err != nil {
			return false, fmt.Errorf("read the ClusterRoles of extension role %s: %w", ext, err)
		}
		for _, o := range roles {
			for _, pr := range o.(*rbacv1.ClusterRole).GetRules() {
				if ruleOf(pr).allows(gr.Group, resource, verb, name) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// authorizeUser decides a request of a user by project roles (see userRequest).
func (a *Authorizer) authorizeUser(ctx context.Context, at api.Attributes) error {
	if a.index == nil {
		return api.Forbidden(at, "project roles are not available")
	}
	r := a.userRequest(ctx, at.User)
	switch {
	case at.Resource == projectsResource:
		return r.project(at)
	case at.Resource == namespacesResource:
		return r.namespace(at)
	case globalReadable[at.Resource]:
		if at.Subresource == "" && isRead(at.Verb) {
			return nil
		}
		return api.Forbidden(at, "every user may read it; only cluster admins change it")
	case !namespaced[at.Resource]:
		return api.Forbidden(at, "only cluster admins may use it")
	}
	return r.namespaced(at)
}

func isRead(verb string) bool {
	return verb == api.VerbGet || verb == api.VerbList || verb == api.VerbWatch
}

// project decides a request on a Project: every user may create projects and list or watch them (filtered to the
// ones they may get); the roles decide the rest, on the stored project. A non-member's get is NotFound, whether or
// not the project exists.
func (r *userRequest) project(at api.Attributes) error {
	switch at.Verb {
	case api.VerbCreate:
		return r.projectCustomVerbs(at, membership{})
	case api.VerbList, api.VerbWatch:
		return nil
	}
	var m membership
	if p, ok := at.Current.(*corev1beta1.Project); ok {
		m = membershipIn(p, r.keys)
	}
	if !m.member() {
		if at.Verb == api.VerbGet {
			return apierrors.NewNotFound(at.Resource, at.Name)
		}
		return api.Forbidden(at, "it is not a member of the project")
	}
	var need roleSet
	switch {
	case at.Subresource != "":
		return api.Forbidden(at, "only cluster admins and the hub's controllers write a project's status")
	case at.Verb == api.VerbGet:
		need = mayGetProject
	case at.Verb == api.VerbUpdate || at.Verb == api.VerbPatch:
		need = mayUpdateProject
	case at.Verb == api.VerbDelete:
		need = mayDeleteProject
	}
	if !m.has(need) {
		return api.Forbidden(at, fmt.Sprintf("its roles in project %q do not allow it", at.Name))
	}
	if at.Verb == api.VerbUpdate || at.Verb == api.VerbPatch {
		return r.projectCustomVerbs(at, m)
	}
	return nil
}

// projectCustomVerbs are Gardener's CustomVerbAuthorizer for projects, checked on the object a create, update or
// patch writes: changing spec.tolerations.whitelist needs modify-spec-tolerations-whitelist (cluster admins only);
// adding or removing human users (members of kind User that are not service accounts, the owner aside) needs
// manage-members (the owner and uam) unless the user is the project's owner.
func (r *userRequest) projectCustomVerbs(at api.Attributes, m membership) error {
	p, ok := at.Object.(*corev1beta1.Project)
	if !ok {
		return nil
	}
	old, _ := at.Current.(*corev1beta1.Project)
	if !proto.Equal(&corev1beta1.ProjectTolerations{Whitelist: old.GetSpec().GetTolerations().GetWhitelist()},
		&corev1beta1.ProjectTolerations{Whitelist: p.GetSpec().GetTolerations().GetWhitelist()}) {
		return api.Forbidden(at, fmt.Sprintf("user %q is not allowed to modify .spec.tolerations.whitelist for %q", r.user.Name, at.Resource.Resource))
	}
	if !m.has(mayManageMembers) && !isOwner(r.user, p.GetSpec().GetOwner()) && humanMembersChanged(old, p) {
		return api.Forbidden(at, fmt.Sprintf("user %q is not allowed to manage human users or groups in .spec.members for %q", r.user.Name, at.Resource.Resource))
	}
	return nil
}

// isOwner reports whether u is the subject owner (everybody, when no owner is set: the creator will be).
func isOwner(u auth.User, owner *corev1beta1.Subject) bool {
	if owner == nil {
		return true
	}
	switch owner.GetKind() {
	case "ServiceAccount":
		return u.Name == auth.ServiceAccountUserName(owner.GetNamespace(), owner.GetName())
	case "User":
		return u.Name == owner.GetName()
	case "Group":
		return u.InGroup(owner.GetName())
	}
	return false
}

// humanMembersChanged reports whether p's human users differ from old's (nil: none), leaving p's owner aside.
func humanMembersChanged(old, p *corev1beta1.Project) bool {
	humans := func(pr *corev1beta1.Project) []string {
		var out []string
		for _, m := range pr.GetSpec().GetMembers() {
			if m.GetKind() == "User" && !strings.HasPrefix(m.GetName(), auth.ServiceAccountUserPrefix) {
				out = append(out, m.GetName())
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
		if o := p.GetSpec().GetOwner(); o.GetKind() == "User" {
			out = slices.DeleteFunc(out, func(n string) bool { return n == o.GetName() })
		}
		return out
	}
	return !slices.Equal(humans(old), humans(p))
}

// namespace decides a request on a Namespace: members whose roles may get their project's namespace get it, every
// user lists and watches (filtered to those), nobody else writes. A non-member's get is NotFound.
func (r *userRequest) namespace(at api.Attributes) error {
	switch at.Verb {
	case api.VerbList, api.VerbWatch:
		return nil
	case api.VerbGet:
		if at.Subresource != "" {
			break
		}
		m, ok, err := r.inNamespace(at.Name)
		switch {
		case err != nil:
			return err
		case !ok:
			return apierrors.NewNotFound(at.Resource, at.Name)
		case !m.has(mayGetNamespace):
			return api.Forbidden(at, fmt.Sprintf("its roles in project %q do not allow it", m.project.GetMetadata().GetName()))
		}
		return nil
	}
	return api.Forbidden(at, "only cluster admins and the project controller write namespaces")
}

// namespaced decides a request on a namespaced resource: in a project namespace by the user's roles there; across
// all namespaces (lists and watches) when the roles allow listing it somewhere, filtered; the user's own user tokens
// in trellis-system; the public ConfigMaps.
func (r *userRequest) namespaced(at api.Attributes) error {
	if at.Resource == accessTokensResource && at.Namespace == auth.UserTokenNamespace {
		return r.userToken(at)
	}
	if at.Namespace == "" {
		if at.Verb != api.VerbList && at.Verb != api.VerbWatch {
			return api.Forbidden(at, "")
		}
		if at.Resource == accessTokensResource {
			return nil // the user's own tokens at least
		}
		ms, err := r.memberships()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if ok, err := r.allowsIn(m, at.Resource, "", at.Verb, ""); ok || err != nil {
				return err
			}
		}
		return api.Forbidden(at, "no project role of it allows it in any namespace")
	}
	if at.Resource == configMapsResource && at.Verb == api.VerbGet && at.Subresource == "" && publicConfigMaps[at.Namespace+"/"+at.Name] {
		return nil
	}
	m, ok, err := r.inNamespace(at.Namespace)
	if err != nil {
		return err
	}
	if !ok {
		return api.Forbidden(at, "it is not a member of a project of this namespace")
	}
	name := at.Name
	if at.Verb == api.VerbCreate {
		name = "" // a rule restricted to names never allows a create, as in Kubernetes
	}
	allowed, err := r.allowsIn(m, at.Resource, at.Subresource, at.Verb, name)
	switch {
	case err != nil:
		return err
	case !allowed:
		return api.Forbidden(at, fmt.Sprintf("its roles in project %q do not allow it", m.project.GetMetadata().GetName()))
	case at.Resource == ncpResource:
		return r.ncpCustomVerbs(at)
	}
	return nil
}

// userToken decides a request on user tokens (AccessTokens in trellis-system): a user lists and watches its own,
// gets them and revokes them (update, patch); cluster admins create and delete them. Another user's token is
// NotFound, whether or not it exists.
func (r *userRequest) userToken(at api.Attributes) error {
	switch at.Verb {
	case api.VerbList, api.VerbWatch:
		return nil
	case api.VerbCreate:
		return api.Forbidden(at, "only cluster admins create user tokens")
	}
	cur, _ := at.Current.(*authv1alpha1.AccessToken)
	if cur == nil || cur.GetSpec().GetUser() != r.user.Name {
		return apierrors.NewNotFound(at.Resource, at.Name)
	}
	switch at.Verb {
	case api.VerbGet:
		return nil
	case api.VerbUpdate, api.VerbPatch:
		if next, ok := at.Object.(*authv1alpha1.AccessToken); ok && next.GetSpec().GetUser() != r.user.Name {
			return api.Forbidden(at, "a user token stays its user's")
		}
		return nil
	}
	return api.Forbidden(at, "revoke your token (spec.revoked: true); only cluster admins delete user tokens")
}

// ncpCustomVerbs are Gardener's custom verbs of NamespacedCloudProfiles, which only cluster admins have: changing
// spec.kubernetes, spec.machineImages or spec.providerConfig, or raising spec.limits.maxNodesTotal above the parent
// CloudProfile's.
func (r *userRequest) ncpCustomVerbs(at api.Attributes) error {
	p, ok := at.Object.(*corev1beta1.NamespacedCloudProfile)
	if !ok {
		return nil
	}
	old, _ := at.Current.(*corev1beta1.NamespacedCloudProfile)
	spec, oldSpec := p.GetSpec(), old.GetSpec()
	deny := func(what string) error {
		return api.Forbidden(at, fmt.Sprintf("user %q is not allowed to %s for %q", r.user.Name, what, at.Resource.Resource))
	}
	if !proto.Equal(spec.GetKubernetes(), oldSpec.GetKubernetes()) {
		return deny("modify .spec.kubernetes")
	}
	if !slices.EqualFunc(spec.GetMachineImages(), oldSpec.GetMachineImages(), func(a, b *corev1beta1.MachineImage) bool { return proto.Equal(a, b) }) {
		return deny("modify .spec.machineImages")
	}
	if !proto.Equal(spec.GetProviderConfig(), oldSpec.GetProviderConfig()) {
		return deny("modify .spec.providerConfig")
	}
	if lim := spec.GetLimits(); lim != nil && !proto.Equal(lim, oldSpec.GetLimits()) {
		parent, err := r.idx.Get(r.ctx, cloudProfilesRes, "", spec.GetParent().GetName())
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if cp, ok := parent.(*corev1beta1.CloudProfile); ok && cp.GetSpec().GetLimits().MaxNodesTotal != nil &&
			lim.GetMaxNodesTotal() > cp.GetSpec().GetLimits().GetMaxNodesTotal() {
			return deny("increase .spec.limits above parent CloudProfile limits")
		}
	}
	return nil
}

// filterUser returns which objects a user's allowed list or watch sees. Lists decide on one snapshot of the user's
// memberships; watches ask the watch cache at every event, so that a member who leaves stops seeing the project's
// objects.
func (a *Authorizer) filterUser(ctx context.Context, at api.Attributes) func(store.Object) bool {
	if a.index == nil {
		return func(store.Object) bool { return false }
	}
	req := func() *userRequest { return a.userRequest(ctx, at.User) }
	if at.Verb == api.VerbList {
		r := req()
		req = func() *userRequest { return r }
	}
	switch {
	case at.Resource == projectsResource:
		keys := userKeys(at.User)
		return func(o store.Object) bool {
			p, ok := o.(*corev1beta1.Project)
			return ok && membershipIn(p, keys).has(mayGetProject)
		}
	case at.Resource == namespacesResource:
		return func(o store.Object) bool {
			m, ok, _ := req().inNamespace(o.GetMetadata().GetName())
			return ok && m.has(mayGetNamespace)
		}
	case at.Resource == accessTokensResource && at.Namespace == auth.UserTokenNamespace:
		return func(o store.Object) bool { return ownUserToken(o, at.User) }
	case !namespaced[at.Resource] || at.Namespace != "":
		return nil // decided by Authorize as a whole
	}
	verb := at.Verb
	return func(o store.Object) bool {
		ns := o.GetMetadata().GetNamespace()
		if at.Resource == accessTokensResource && ns == auth.UserTokenNamespace {
			return ownUserToken(o, at.User)
		}
		r := req()
		m, ok, _ := r.inNamespace(ns)
		if !ok {
			return false
		}
		allowed, _ := r.allowsIn(m, at.Resource, "", verb, "")
		return allowed
	}
}

func ownUserToken(o store.Object, u auth.User) bool {
	t, ok := o.(*authv1alpha1.AccessToken)
	return ok && t.GetSpec().GetUser() == u.Name
}
