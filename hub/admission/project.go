package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

func init() { register(defaultProject, validateProject, confirmDeletion[*corev1beta1.Project]) }

// projectNameMaxLength is Gardener's limit: shoot namespaces on seeds are shoot--<project>--<shoot>.
const projectNameMaxLength = 10

// Project member roles Gardener knows; extension roles are "extension:<name>".
var projectRoles = map[string]bool{"owner": true, "admin": true, "viewer": true, "uam": true, "serviceaccountmanager": true}

func defaultProject(p *corev1beta1.Project) {
	if p.Spec == nil {
		p.Spec = &corev1beta1.ProjectSpec{}
	}
	if p.Spec.Namespace == nil && p.GetMetadata().GetName() != "" {
		ns := "garden-" + p.GetMetadata().GetName()
		p.Spec.Namespace = &ns
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
	for i, m := range p.GetSpec().GetMembers() {
		mp := spec.Child("members").Index(i)
		if m.GetName() == "" {
			errs = append(errs, field.Required(mp.Child("name"), "a member needs a name"))
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
	const prefix = "extension:"
	return len(role) > len(prefix) && role[:len(prefix)] == prefix
}
