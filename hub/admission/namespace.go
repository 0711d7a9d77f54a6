package admission

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// defaultNamespace sets status.phase to Active, as Kubernetes' SetDefaults_NamespaceStatus does. (The status of a
// namespace is only written on create; updates keep the stored status.)
func defaultNamespace(ns *kcorev1.Namespace) {
	if ns.Status == nil {
		ns.Status = &kcorev1.NamespaceStatus{}
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = "Active"
	}
}

// validateNamespace checks what Kubernetes does beyond the generic metadata: the name is a DNS-1123 label, and
// spec.finalizers are qualified names, the unqualified one being "kubernetes".
func validateNamespace(_ context.Context, _ Reader, ns, _ *kcorev1.Namespace) field.ErrorList {
	errs := nameIsDNSLabel(ns.GetMetadata())
	for i, f := range ns.GetSpec().GetFinalizers() {
		fp := field.NewPath("spec", "finalizers").Index(i)
		msgs := validation.IsQualifiedName(f)
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fp, f, msg))
		}
		if len(msgs) == 0 && !strings.Contains(f, "/") && f != "kubernetes" {
			errs = append(errs, field.Invalid(fp, f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}
