package authz

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	rbacv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/rbac/v1"
)

// Project member roles, as Gardener names them (Project.spec.members[].role and .roles).
const (
	RoleOwner                 = "owner"
	RoleAdmin                 = "admin"
	RoleViewer                = "viewer"
	RoleUAM                   = "uam"
	RoleServiceAccountManager = "serviceaccountmanager"
	// ExtensionRolePrefix starts an extension role: extension:<name> grants the union of the rules of the
	// ClusterRoles labelled LabelExtensionRole=<name>, in the project namespace.
	ExtensionRolePrefix = "extension:"
	// LabelExtensionRole on a ClusterRole names the extension role it adds its rules to (Gardener's label).
	LabelExtensionRole = "rbac.gardener.cloud/aggregate-to-extension-role"
)

// Indexes of the watch caches the user decisions read (the Registry must have them, see Indexes).
const (
	// IndexProjectMember finds the Projects of a subject: values "u:<user name>" (users, and service accounts by
	// their user name) and "g:<group>", for spec.owner and every member.
	IndexProjectMember = "member"
	// IndexExtensionRole finds the ClusterRoles of an extension role by LabelExtensionRole.
	IndexExtensionRole = "extension-role"
)

var (
	projectsResource     = gr("core.gardener.cloud", "projects")
	namespacesResource   = gr("", "namespaces")
	clusterRolesResource = gr("rbac.authorization.k8s.io", "clusterroles")
	ncpResource          = gr("core.gardener.cloud", "namespacedcloudprofiles")
	cloudProfilesRes     = gr("core.gardener.cloud", "cloudprofiles")
	configMapsResource   = gr("", "configmaps")
)

// Indexes returns the watch cache indexes the user decisions need; the hub passes them to api.NewRegistry.
func Indexes() []api.Index {
	return []api.Index{
		{Resource: projectsResource, Name: IndexProjectMember, Values: projectSubjects},
		{Resource: clusterRolesResource, Name: IndexExtensionRole, Values: extensionRoleOf},
	}
}

func userKey(name string) string  { return "u:" + name }
func groupKey(name string) string { return "g:" + name }

// subjectKey is the IndexProjectMember value of an rbacv1.Subject; "" for an unknown kind. A ServiceAccount subject
// and a User subject named system:serviceaccount:<ns>:<name> are the same user, as in Kubernetes' RBAC.
func subjectKey(kind, name, namespace string) string {
	switch kind {
	case "User":
		return userKey(name)
	case "Group":
		return groupKey(name)
	case "ServiceAccount":
		return userKey(auth.ServiceAccountUserName(namespace, name))
	}
	return ""
}

// userKeys are the IndexProjectMember values a user matches: its name and its groups.
func userKeys(u auth.User) []string {
	keys := make([]string, 0, 1+len(u.Groups))
	keys = append(keys, userKey(u.Name))
	for _, g := range u.Groups {
		keys = append(keys, groupKey(g))
	}
	return keys
}

func projectSubjects(obj store.Object) []string {
	p, ok := obj.(*corev1beta1.Project)
	if !ok {
		return nil
	}
	var keys []string
	add := func(k string) {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if o := p.GetSpec().GetOwner(); o != nil {
		add(subjectKey(o.GetKind(), o.GetName(), o.GetNamespace()))
	}
	for _, m := range p.GetSpec().GetMembers() {
		add(subjectKey(m.GetKind(), m.GetName(), m.GetNamespace()))
	}
	return keys
}

func extensionRoleOf(obj store.Object) []string {
	if v := obj.GetMetadata().GetLabels()[LabelExtensionRole]; v != "" {
		return []string{v}
	}
	return nil
}

// roleSet is a set of the built-in roles. The owner has what admin, uam and serviceaccountmanager have (memberships
// store it expanded) and may delete the project.
type roleSet uint8

const (
	owner roleSet = 1 << iota
	admin
	viewer
	uam
	saManager
)

var roleBits = map[string]roleSet{RoleOwner: owner | admin | uam | saManager, RoleAdmin: admin, RoleViewer: viewer, RoleUAM: uam,
	RoleServiceAccountManager: saManager}

// What the roles allow on the project itself and its namespace: Gardener's project-specific ClusterRoles
// (gardener.cloud:system:project:<name> for the owner, project-member:<name> for admins, project-uam:<name>,
// project-viewer:<name>). Service account managers and extension roles have none of them.
const (
	mayGetProject    = owner | admin | viewer | uam
	mayUpdateProject = owner | admin | uam
	mayDeleteProject = owner | admin
	mayManageMembers = owner | uam
	mayGetNamespace  = owner | admin | viewer
	memberOfAnyRole  = owner | admin | viewer | uam | saManager
)

// membership is what a user is in one project.
type membership struct {
	project    *corev1beta1.Project
	roles      roleSet
	extensions []string // extension role names
}

func (m membership) member() bool       { return m.roles&memberOfAnyRole != 0 || len(m.extensions) > 0 }
func (m membership) has(r roleSet) bool { return m.roles&r != 0 }

// membershipIn returns what the subjects keys are in project p: spec.owner is the owner, and every member entry
// matching a key adds its roles.
func membershipIn(p *corev1beta1.Project, keys []string) membership {
	m := membership{project: p}
	if o := p.GetSpec().GetOwner(); o != nil && slices.Contains(keys, subjectKey(o.GetKind(), o.GetName(), o.GetNamespace())) {
		m.roles |= roleBits[RoleOwner]
	}
	for _, mem := range p.GetSpec().GetMembers() {
		if !slices.Contains(keys, subjectKey(mem.GetKind(), mem.GetName(), mem.GetNamespace())) {
			continue
		}
		m.add(mem.GetRole())
		for _, r := range mem.GetRoles() {
			m.add(r)
		}
	}
	return m
}

// add adds a member's role.
func (m *membership) add(role string) {
	if name, ok := cutExtensionRole(role); ok {
		if !slices.Contains(m.extensions, name) {
			m.extensions = append(m.extensions, name)
		}
		return
	}
	m.roles |= roleBits[role]
}

func cutExtensionRole(role string) (string, bool) {
	name, ok := strings.CutPrefix(role, ExtensionRolePrefix)
	return name, ok && name != ""
}

// rule is an RBAC policy rule: verbs on resources ("<resource>" or "<resource>/<subresource>") of API groups,
// optionally only on objects of some names; "*" matches everything.
type rule struct {
	groups, resources, verbs, names []string
}

func matches(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}

// allows reports whether the rule allows verb on the resource (with its subresource, if any) of group, on the object
// name ("" for list, watch and create, which a rule restricted to names never allows, as in Kubernetes).
func (r rule) allows(group, resource, verb, name string) bool {
	if !matches(r.verbs, verb) || !matches(r.groups, group) || !matches(r.resources, resource) {
		return false
	}
	return len(r.names) == 0 || (name != "" && slices.Contains(r.names, name))
}

func ruleOf(p *rbacv1.PolicyRule) rule {
	return rule{groups: p.GetApiGroups(), resources: p.GetResources(), verbs: p.GetVerbs(), names: p.GetResourceNames()}
}

var (
	readVerbs = []string{"get", "list", "watch"}
	allVerbs  = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
)

// namespaceRules are what the built-in roles allow in the project namespace: Gardener's aggregated ClusterRoles
// gardener.cloud:system:project-member (admin), project-viewer (viewer) and project-serviceaccountmanager, for the
// resources the hub serves. AccessTokens are the hub's serviceaccounts/token: service account managers manage them,
// and so do admins — a project admin issues and revokes robot tokens for its project (for the ServiceAccounts that
// exist there; as in Gardener, admins only read ServiceAccounts, and managing those is the serviceaccountmanager's).
// Subresources (status, binding) are in none of them, but for the shoots' kubeconfigs: admins create
// shoots/adminkubeconfig and shoots/viewerkubeconfig, viewers shoots/viewerkubeconfig, as Gardener's project-member and
// project-viewer ClusterRoles allow.
var namespaceRules = map[roleSet][]rule{
	admin: {
		{groups: []string{"core.gardener.cloud"}, resources: []string{"shoots/adminkubeconfig", "shoots/viewerkubeconfig"}, verbs: []string{"create"}},
		{groups: []string{""}, resources: []string{"secrets", "configmaps"}, verbs: allVerbs},
		{groups: []string{""}, resources: []string{"events", "serviceaccounts"}, verbs: readVerbs},
		{groups: []string{"core.gardener.cloud"}, resources: []string{"shoots", "secretbindings", "quotas", "namespacedcloudprofiles"}, verbs: allVerbs},
		{groups: []string{"security.gardener.cloud"}, resources: []string{"credentialsbindings", "workloadidentities"}, verbs: allVerbs},
		{groups: []string{"operations.gardener.cloud"}, resources: []string{"bastions"}, verbs: allVerbs},
		{groups: []string{"auth.trellis.dev"}, resources: []string{"accesstokens"}, verbs: allVerbs},
	},
	viewer: {
		{groups: []string{"core.gardener.cloud"}, resources: []string{"shoots/viewerkubeconfig"}, verbs: []string{"create"}},
		{groups: []string{""}, resources: []string{"events", "configmaps", "serviceaccounts"}, verbs: readVerbs},
		{groups: []string{"core.gardener.cloud"}, resources: []string{"shoots", "secretbindings", "quotas", "namespacedcloudprofiles"}, verbs: readVerbs},
		{groups: []string{"security.gardener.cloud"}, resources: []string{"credentialsbindings"}, verbs: readVerbs},
		{groups: []string{"operations.gardener.cloud"}, resources: []string{"bastions"}, verbs: readVerbs},
	},
	saManager: {
		{groups: []string{""}, resources: []string{"serviceaccounts"}, verbs: allVerbs},
		{groups: []string{"auth.trellis.dev"}, resources: []string{"accesstokens"}, verbs: allVerbs},
	},
}

// globalReadable are the cluster-scoped resources every authenticated user reads: Gardener's
// gardener.cloud:system:read-global-resources.
var globalReadable = map[schema.GroupResource]bool{
	cloudProfilesRes: true,
	gr("core.gardener.cloud", "exposureclasses"): true,
	seedsResource: true,
}

// publicConfigMaps every authenticated user may get: the garden's cluster identity and gardener-info, as Gardener's
// read-cluster-identity-configmap and read-gardener-info-configmap Roles allow.
var publicConfigMaps = map[string]bool{ClusterIdentityNamespace + "/" + ClusterIdentityName: true, PublicNamespace + "/gardener-info": true}

// namespaced says which served resources are namespaced.
var namespaced = func() map[schema.GroupResource]bool {
	out := map[schema.GroupResource]bool{}
	for _, k := range api.Kinds {
		out[k.GroupResource()] = k.Namespaced
	}
	return out
}()
