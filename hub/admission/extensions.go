package admission

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// requiredExtension is an extension kind and type an object needs registered, and where the object names it.
type requiredExtension struct {
	kind, typ, what string
	path            *field.Path
}

// shootExtensions are the extension kinds and types a shoot needs, as Gardener's ExtensionValidator lists them: its
// provider type for ControlPlane, Infrastructure and Worker, its networking type (Network), its primary managed DNS
// provider (DNSRecord), its extensions (Extension), its workers' container runtimes (ContainerRuntime) and machine
// images (OperatingSystemConfig).
func shootExtensions(s *corev1beta1.Shoot) []requiredExtension {
	spec, p := s.GetSpec(), field.NewPath("spec")
	provider := spec.GetProvider().GetType()
	out := []requiredExtension{
		{"ControlPlane", provider, "provider type", p.Child("provider", "type")},
		{"Infrastructure", provider, "provider type", p.Child("provider", "type")},
		{"Worker", provider, "provider type", p.Child("provider", "type")},
	}
	if n := spec.GetNetworking(); n != nil && n.Type != nil {
		out = append(out, requiredExtension{"Network", n.GetType(), "networking type", p.Child("networking", "type")})
	}
	for i, dp := range spec.GetDns().GetProviders() {
		if dp.Type == nil || dp.GetType() == "unmanaged" || !dp.GetPrimary() {
			continue
		}
		out = append(out, requiredExtension{"DNSRecord", dp.GetType(), "extension type", p.Child("dns", "providers").Index(i).Child("type")})
	}
	for i, e := range spec.GetExtensions() {
		out = append(out, requiredExtension{"Extension", e.GetType(), "extension type", p.Child("extensions").Index(i).Child("type")})
	}
	for i, w := range spec.GetProvider().GetWorkers() {
		wp := p.Child("provider", "workers").Index(i)
		for j, cr := range w.GetCri().GetContainerRuntimes() {
			out = append(out, requiredExtension{"ContainerRuntime", cr.GetType(), "container runtime type", wp.Child("cri", "containerRuntimes").Index(j).Child("type")})
		}
		if img := w.GetMachine().GetImage(); img != nil {
			out = append(out, requiredExtension{"OperatingSystemConfig", img.GetName(), "operating system type", wp.Child("machine", "image", "name")})
		}
	}
	return out
}

// admitShootExtensions is Gardener's ExtensionValidator for shoots, when the hub requires registered extensions
// (Config.RequireRegisteredExtensions): a shoot whose spec changes must name only extension types some
// ControllerRegistration registers as primary (a resource without primary: false), each refused with Gardener's
// words ("given Shoot uses non-registered provider type: spec.provider.type (\"foo\")") as a Forbidden cause of the
// field. Gardener answers 403 with the same words; the hub answers 422 naming the fields.
func admitShootExtensions(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) field.ErrorList {
	if !configFrom(ctx).RequireRegisteredExtensions || old != nil && proto.Equal(s.GetSpec(), old.GetSpec()) {
		return nil
	}
	regs, err := r.List(ctx, controllerRegistrations, "")
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), fmt.Errorf("reading ControllerRegistrations: %w", err))}
	}
	registered := map[string]map[string]bool{}
	for _, o := range regs {
		reg, ok := o.(*corev1beta1.ControllerRegistration)
		if !ok {
			continue
		}
		for _, res := range reg.GetSpec().GetResources() {
			if res.Primary != nil && !res.GetPrimary() {
				continue
			}
			if registered[res.GetKind()] == nil {
				registered[res.GetKind()] = map[string]bool{}
			}
			registered[res.GetKind()][res.GetType()] = true
		}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, req := range shootExtensions(s) {
		if registered[req.kind][req.typ] {
			continue
		}
		// The provider type is one error for its three kinds, as Gardener's message is the same for them.
		key := req.path.String() + "\x00" + req.typ
		if seen[key] {
			continue
		}
		seen[key] = true
		errs = append(errs, field.Forbidden(req.path, fmt.Sprintf("given Shoot uses non-registered %s: %s (%q)", req.what, req.path, req.typ)))
	}
	return errs
}
