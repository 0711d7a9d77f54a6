package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// requiredExtension is an extension kind and type an object needs registered, where the object names it, and the
// words of its refusal (Gardener's: "given Shoot uses non-registered provider type: spec.provider.type"), to which the
// type is added.
type requiredExtension struct {
	kind, typ, message string
	path               *field.Path
}

// uses is the requiredExtension of a kind and type of obj ("Shoot", "Seed", ...) at path, for a refusal saying "given
// <obj> uses non-registered <what>: <path>".
func uses(obj, kind, typ, what string, path *field.Path) requiredExtension {
	return requiredExtension{kind: kind, typ: typ, message: fmt.Sprintf("given %s uses non-registered %s: %s", obj, what, path), path: path}
}

// shootExtensions are the extension kinds and types a shoot needs, as Gardener's ExtensionValidator lists them: its
// provider type for ControlPlane, Infrastructure and Worker, its networking type (Network), its primary managed DNS
// provider (DNSRecord), its extensions (Extension), its workers' container runtimes (ContainerRuntime) and machine
// images (OperatingSystemConfig).
func shootExtensions(s *corev1beta1.Shoot) []requiredExtension {
	spec, p := s.GetSpec(), field.NewPath("spec")
	provider := spec.GetProvider().GetType()
	out := []requiredExtension{
		uses("Shoot", "ControlPlane", provider, "provider type", p.Child("provider", "type")),
		uses("Shoot", "Infrastructure", provider, "provider type", p.Child("provider", "type")),
		uses("Shoot", "Worker", provider, "provider type", p.Child("provider", "type")),
	}
	if n := spec.GetNetworking(); n != nil && n.Type != nil {
		out = append(out, uses("Shoot", "Network", n.GetType(), "networking type", p.Child("networking", "type")))
	}
	for i, dp := range spec.GetDns().GetProviders() {
		if dp.Type == nil || dp.GetType() == "unmanaged" || !dp.GetPrimary() {
			continue
		}
		out = append(out, uses("Shoot", "DNSRecord", dp.GetType(), "extension type", p.Child("dns", "providers").Index(i).Child("type")))
	}
	for i, e := range spec.GetExtensions() {
		out = append(out, uses("Shoot", "Extension", e.GetType(), "extension type", p.Child("extensions").Index(i).Child("type")))
	}
	for i, w := range spec.GetProvider().GetWorkers() {
		wp := p.Child("provider", "workers").Index(i)
		for j, cr := range w.GetCri().GetContainerRuntimes() {
			out = append(out, uses("Shoot", "ContainerRuntime", cr.GetType(), "container runtime type", wp.Child("cri", "containerRuntimes").Index(j).Child("type")))
		}
		if img := w.GetMachine().GetImage(); img != nil {
			out = append(out, uses("Shoot", "OperatingSystemConfig", img.GetName(), "operating system type", wp.Child("machine", "image", "name")))
		}
	}
	return out
}

// seedExtensions are the extension kinds and types a seed needs (Gardener's ExtensionValidator): its provider type
// (ControlPlane), its backup provider (BackupBucket and BackupEntry) and, with an ingress, its DNS provider
// (DNSRecord).
func seedExtensions(s *corev1beta1.Seed) []requiredExtension {
	spec, p := s.GetSpec(), field.NewPath("spec")
	out := []requiredExtension{uses("Seed", "ControlPlane", spec.GetProvider().GetType(), "provider type", p.Child("provider", "type"))}
	if b := spec.GetBackup(); b != nil {
		out = append(out,
			uses("Seed", "BackupBucket", b.GetProvider(), "backup provider type", p.Child("backup", "provider")),
			uses("Seed", "BackupEntry", b.GetProvider(), "backup provider type", p.Child("backup", "provider")))
	}
	if spec.GetIngress() != nil && spec.GetDns().GetProvider() != nil {
		out = append(out, uses("Seed", "DNSRecord", spec.GetDns().GetProvider().GetType(), "extension type", p.Child("dns", "provider", "type")))
	}
	return out
}

// admitShootExtensions is Gardener's ExtensionValidator for shoots (on unless Config.AllowUnregisteredExtensions): a
// shoot whose spec changes must name only extension types some ControllerRegistration registers as primary (a
// resource without primary: false). It refuses with 403 Forbidden and Gardener's words, one line per field
// ("given Shoot uses non-registered provider type: spec.provider.type (\"foo\")"), each also a cause at its field.
func admitShootExtensions(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) error {
	if configFrom(ctx).AllowUnregisteredExtensions || old != nil && shootSpecEqual(ctx, s, old) {
		return nil
	}
	return registeredExtensions(ctx, r, shoots, s.GetMetadata().GetName(), shootExtensions(s))
}

// admitSeedExtensions is admitShootExtensions for Seeds: "given Seed uses non-registered backup provider type:
// spec.backup.provider (\"foo\")".
func admitSeedExtensions(ctx context.Context, r Reader, s, old *corev1beta1.Seed) error {
	if configFrom(ctx).AllowUnregisteredExtensions || old != nil && proto.Equal(s.GetSpec(), old.GetSpec()) {
		return nil
	}
	return registeredExtensions(ctx, r, seeds, s.GetMetadata().GetName(), seedExtensions(s))
}

// admitBackupBucketExtensions is admitShootExtensions for BackupBuckets: the provider type must be registered for
// BackupBucket ("given BackupBucket uses non-registered provider type: spec.provider.type (\"foo\")").
func admitBackupBucketExtensions(ctx context.Context, r Reader, b, old *corev1beta1.BackupBucket) error {
	if configFrom(ctx).AllowUnregisteredExtensions || old != nil && proto.Equal(b.GetSpec(), old.GetSpec()) {
		return nil
	}
	p := field.NewPath("spec", "provider", "type")
	return registeredExtensions(ctx, r, backupBuckets, b.GetMetadata().GetName(),
		[]requiredExtension{uses("BackupBucket", "BackupBucket", b.GetSpec().GetProvider().GetType(), "provider type", p)})
}

// admitBackupEntryExtensions is admitShootExtensions for BackupEntries: the provider type of the bucket the entry
// names must be registered for BackupEntry ("given BackupEntry references bucket (spec.bucketName) using
// non-registered provider type (\"foo\")"); a bucket that does not exist is 404 Not Found, as Gardener's lister
// answers.
func admitBackupEntryExtensions(ctx context.Context, r Reader, e, old *corev1beta1.BackupEntry) error {
	if configFrom(ctx).AllowUnregisteredExtensions || old != nil && proto.Equal(e.GetSpec(), old.GetSpec()) {
		return nil
	}
	p := field.NewPath("spec", "bucketName")
	o, err := r.Get(ctx, backupBuckets, "", e.GetSpec().GetBucketName())
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(backupBuckets, e.GetSpec().GetBucketName())
	}
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading BackupBucket %s of spec.bucketName: %w", e.GetSpec().GetBucketName(), err))
	}
	bucket, _ := o.(*corev1beta1.BackupBucket)
	return registeredExtensions(ctx, r, backupEntries, e.GetMetadata().GetName(), []requiredExtension{{kind: "BackupEntry", typ: bucket.GetSpec().GetProvider().GetType(),
		message: fmt.Sprintf("given BackupEntry references bucket (%s) using non-registered provider type", p), path: p}})
}

// registeredExtensions refuses the write of object name of resource gr when a required extension is not registered
// as primary by any ControllerRegistration: 403 Forbidden with Gardener's message (its list of errors, "1 error
// occurred:\n\t* given Shoot uses ...\n\n"), each refusal also a cause at its field. A field and type is named once
// (a shoot's provider type once for its three kinds, where Gardener repeats the line).
func registeredExtensions(ctx context.Context, r Reader, gr schema.GroupResource, name string, required []requiredExtension) error {
	regs, err := r.List(ctx, controllerRegistrations, "")
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading ControllerRegistrations: %w", err))
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
	var lines []string
	var causes []kmetav1.StatusCause
	seen := map[string]bool{}
	for _, req := range required {
		if registered[req.kind][req.typ] {
			continue
		}
		key := req.path.String() + "\x00" + req.typ
		if seen[key] {
			continue
		}
		seen[key] = true
		msg := fmt.Sprintf("%s (%q)", req.message, req.typ)
		lines = append(lines, msg)
		causes = append(causes, kmetav1.StatusCause{Type: kmetav1.CauseType(field.ErrorTypeForbidden), Message: msg, Field: req.path.String()})
	}
	if len(lines) == 0 {
		return nil
	}
	err = apierrors.NewForbidden(gr, name, errors.New(errorList(lines)))
	if st, ok := err.(*apierrors.StatusError); ok && st.ErrStatus.Details != nil {
		st.ErrStatus.Details.Causes = causes
	}
	return err
}

// errorList formats errors as Gardener's admission plugins do (hashicorp/go-multierror's list format).
func errorList(lines []string) string {
	if len(lines) == 1 {
		return fmt.Sprintf("1 error occurred:\n\t* %s\n\n", lines[0])
	}
	return fmt.Sprintf("%d errors occurred:\n\t* %s\n\n", len(lines), strings.Join(lines, "\n\t* "))
}

// admitShootWrite is the admission of a shoot after validation, in Gardener's plugin order: ExtensionValidator, then
// ShootQuotaValidator.
func admitShootWrite(ctx context.Context, r Reader, s, old *corev1beta1.Shoot) error {
	if err := admitShootExtensions(ctx, r, s, old); err != nil {
		return err
	}
	return admitShootQuota(ctx, r, s, old)
}
