package admission

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// projectNameMaxLength is Gardener's limit: shoot namespaces on seeds are shoot--<project>--<shoot>.
const projectNameMaxLength = 10

// Project member roles Gardener knows; extension roles are "extension:<name>".
var projectRoles = map[string]bool{"owner": true, "admin": true, "viewer": true, "uam": true, "serviceaccountmanager": true}

// Project member roles and subject kinds.
const (
	RoleOwner           = "owner"
	rbacGroup           = "rbac.authorization.k8s.io"
	subjectUser         = "User"
	subjectGroup        = "Group"
	subjectSA           = "ServiceAccount"
	extensionRolePrefix = "extension:"
)

// prepareProject records who creates the Project in spec.createdBy and, when spec.owner is not set, makes the member
// with the owner role, or else the creator, the owner — what Gardener's ResourceReferenceManager admission does.
func prepareProject(ctx context.Context, p *corev1beta1.Project) {
	if p.Spec == nil {
		p.Spec = &corev1beta1.ProjectSpec{}
	}
	p.Spec.CreatedBy = nil
	if u, ok := auth.UserFrom(ctx); ok && u.Name != "" {
		p.Spec.CreatedBy = &corev1beta1.Subject{ApiGroup: rbacGroup, Kind: subjectUser, Name: u.Name}
	}
	if p.Spec.Owner != nil {
		return
	}
	for _, m := range p.Spec.Members {
		if hasRole(m, RoleOwner) {
			p.Spec.Owner = &corev1beta1.Subject{ApiGroup: m.GetApiGroup(), Kind: m.GetKind(), Name: m.GetName(), Namespace: m.GetNamespace()}
			return
		}
	}
	if p.Spec.CreatedBy != nil {
		p.Spec.Owner = proto.Clone(p.Spec.CreatedBy).(*corev1beta1.Subject)
	}
}

// defaultProject defaults spec.namespace (garden-<name>) and the subjects' apiGroups, makes the owner a member (roles
// admin and owner) when it is not one, and gives the owner role to the owner's member entry alone, as Gardener's
// admission and Project strategy (Canonicalize) do.
func defaultProject(p *corev1beta1.Project) {
	if p.Spec == nil {
		p.Spec = &corev1beta1.ProjectSpec{}
	}
	if p.Spec.Namespace == nil && p.GetMetadata().GetName() != "" {
		ns := "garden-" + p.GetMetadata().GetName()
		p.Spec.Namespace = &ns
	}
	for _, s := range []*corev1beta1.Subject{p.Spec.Owner, p.Spec.CreatedBy} {
		if s != nil && s.ApiGroup == "" && (s.Kind == subjectUser || s.Kind == subjectGroup) {
			s.ApiGroup = rbacGroup
		}
	}
	for _, m := range p.Spec.Members {
		if m.ApiGroup == "" && (m.Kind == subjectUser || m.Kind == subjectGroup) {
			m.ApiGroup = rbacGroup
		}
	}
	owner := p.Spec.Owner
	if owner == nil {
		return
	}
	found := false
	for _, m := range p.Spec.Members {
		if !isOwnerMember(owner, m) {
			dropOwnerRole(m)
			continue
		}
		found = true
		if !hasRole(m, RoleOwner) {
			m.Roles = append(m.Roles, RoleOwner)
		}
	}
	if !found {
		p.Spec.Members = append(p.Spec.Members, &corev1beta1.ProjectMember{ApiGroup: owner.GetApiGroup(), Kind: owner.GetKind(),
			Name: owner.GetName(), Namespace: owner.GetNamespace(), Role: "admin", Roles: []string{RoleOwner}})
	}
}

// hasRole reports whether m has role, as its role or one of its roles.
func hasRole(m *corev1beta1.ProjectMember, role string) bool {
	return m.GetRole() == role || slices.Contains(m.GetRoles(), role)
}

// dropOwnerRole takes the owner role from a member that is not the owner; its next role becomes its role when the
// owner role was its role.
func dropOwnerRole(m *corev1beta1.ProjectMember) {
	m.Roles = slices.DeleteFunc(m.Roles, func(r string) bool { return r == RoleOwner })
	if m.Role == RoleOwner && len(m.Roles) > 0 {
		m.Role, m.Roles = m.Roles[0], m.Roles[1:]
	}
}

func validateProject(ctx context.Context, r Reader, p, old *corev1beta1.Project) field.ErrorList {
	var errs field.ErrorList
	name := p.GetMetadata().GetName()
	if len(name) > projectNameMaxLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), name, projectNameMaxLength))
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
	}
	spec := field.NewPath("spec")
	ns := p.GetSpec().GetNamespace()
	if old != nil && old.GetSpec().GetNamespace() != "" && ns != old.GetSpec().GetNamespace() {
		errs = append(errs, field.Invalid(spec.Child("namespace"), ns, "field is immutable"))
	}
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(spec.Child("namespace"), ns, msg))
	}
	if old != nil && old.GetSpec().GetCreatedBy() != nil {
		errs = append(errs, immutableMessage(spec.Child("createdBy"), p.GetSpec().GetCreatedBy(), old.GetSpec().GetCreatedBy())...)
	}
	if old != nil && old.GetSpec().GetOwner() != nil && p.GetSpec().GetOwner() == nil {
		errs = append(errs, field.Invalid(spec.Child("owner"), nil, "owner cannot be reset"))
	}
	for _, s := range []struct {
		path *field.Path
		s    *corev1beta1.Subject
	}{{spec.Child("owner"), p.GetSpec().GetOwner()}, {spec.Child("createdBy"), p.GetSpec().GetCreatedBy()}} {
		if s.s != nil {
			errs = append(errs, validateSubject(s.path, s.s.GetKind(), s.s.GetApiGroup(), s.s.GetName(), s.s.GetNamespace())...)
		}
	}
	members := map[string]bool{}
	for i, m := range p.GetSpec().GetMembers() {
		mp := spec.Child("members").Index(i)
		if m.GetName() == "" {
			errs = append(errs, field.Required(mp.Child("name"), "a member needs a name"))
		} else {
			errs = append(errs, validateSubject(mp, m.GetKind(), m.GetApiGroup(), m.GetName(), m.GetNamespace())...)
		}
		id := m.GetApiGroup() + "_" + m.GetKind() + "_" + m.GetNamespace() + "_" + m.GetName()
		if members[id] {
			errs = append(errs, field.Duplicate(mp, m.GetName()))
		}
		members[id] = true
		if m.GetRole() == RoleOwner && !isOwnerMember(p.GetSpec().GetOwner(), m) {
			errs = append(errs, field.Forbidden(mp.Child("role"), "only the member that is spec.owner has the owner role"))
		}
		roles := append([]string{m.GetRole()}, m.GetRoles()...)
		for j, role := range roles {
			rp := mp.Child("role")
			if j > 0 {
				rp = mp.Child("roles").Index(j - 1)
			}
			if role == "" && j == 0 {
				errs = append(errs, field.Required(rp, "a member needs a role"))
				continue
			}
			if !projectRoles[role] && !isExtensionRole(role) {
				errs = append(errs, field.NotSupported(rp, role, []string{"owner", "admin", "viewer", "uam", "serviceaccountmanager", "extension:*"}))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// A namespace belongs to at most one project.
	list, err := r.List(ctx, projects, "")
	if err != nil {
		return field.ErrorList{field.InternalError(spec.Child("namespace"), err)}
	}
	for _, o := range list {
		other := o.(*corev1beta1.Project)
		if other.GetMetadata().GetName() != name && other.GetSpec().GetNamespace() == ns {
			errs = append(errs, field.Duplicate(spec.Child("namespace"), ns))
		}
	}
	return errs
}

func isExtensionRole(role string) bool {
	return len(role) > len(extensionRolePrefix) && role[:len(extensionRolePrefix)] == extensionRolePrefix
}

func isOwnerMember(owner *corev1beta1.Subject, m *corev1beta1.ProjectMember) bool {
	return owner != nil && m.GetKind() == owner.GetKind() && m.GetApiGroup() == owner.GetApiGroup() && m.GetName() == owner.GetName() &&
		m.GetNamespace() == owner.GetNamespace()
}

// validateSubject checks an rbacv1.Subject as Gardener does: User and Group in rbac.authorization.k8s.io,
// ServiceAccount in "" with a namespace.
func validateSubject(p *field.Path, kind, apiGroup, name, namespace string) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch kind {
	case subjectSA:
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, msg))
		}
		if apiGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), apiGroup, []string{""}))
		}
		if namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case subjectUser, subjectGroup:
		if apiGroup != rbacGroup {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), apiGroup, []string{rbacGroup}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), kind, []string{subjectSA, subjectUser, subjectGroup}))
	}
	return errs
}
