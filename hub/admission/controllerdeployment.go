package admission

import (
	"context"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// annotationDeploymentType keeps the type of a non-helm ControllerDeployment in the core.gardener.cloud/v1 shape,
// which has no type field (Gardener's migration annotation).
const annotationDeploymentType = "migration.controllerdeployment.gardener.cloud/type"

// ociRepository is the OCI repository of a helm deployment, in either shape.
type ociRepository struct {
	Ref        *string `json:"ref,omitempty"`
	Repository *string `json:"repository,omitempty"`
	Tag        *string `json:"tag,omitempty"`
	Digest     *string `json:"digest,omitempty"`
}

// validateControllerDeployment checks the core.gardener.cloud/v1 shape: either helm (with rawChart or
// ociRepository, not both) or a custom type kept in the migration annotation.
func validateControllerDeployment(_ context.Context, _ Reader, cd, _ *corev1.ControllerDeployment) field.ErrorList {
	errs := nameIsDNSLabel(cd.GetMetadata())
	hp := field.NewPath("helm")
	h := cd.GetHelm()
	if h == nil {
		if cd.GetMetadata().GetAnnotations()[annotationDeploymentType] == "" {
			errs = append(errs, field.Required(hp, "must use either helm or a custom deployment type"))
		}
	} else {
		var oci *ociRepository
		if o := h.GetOciRepository(); o != nil {
			oci = &ociRepository{Ref: o.Ref, Repository: o.Repository, Tag: o.Tag, Digest: o.Digest}
		}
		errs = append(errs, validateHelmDeployment(hp, len(h.GetRawChart()) > 0, oci, "rawChart")...)
	}
	names := map[string]bool{}
	for i, r := range cd.GetResources() {
		np := field.NewPath("resources").Index(i).Child("name")
		switch {
		case r.GetName() == "":
			errs = append(errs, field.Required(np, "field must not be empty"))
		case names[r.GetName()]:
			errs = append(errs, field.Duplicate(np, r.GetName()))
		}
		names[r.GetName()] = true
	}
	return errs
}

// validateControllerDeploymentV1beta1 checks the core.gardener.cloud/v1beta1 shape: a type, and for type helm a
// providerConfig with chart or ociRepository, not both.
func validateControllerDeploymentV1beta1(_ context.Context, _ Reader, cd, _ *corev1beta1.ControllerDeployment) field.ErrorList {
	errs := nameIsDNSLabel(cd.GetMetadata())
	if cd.GetType() == "" {
		return append(errs, field.Required(field.NewPath("type"), "must provide a type"))
	}
	if cd.GetType() != "helm" {
		return errs
	}
	pp := field.NewPath("providerConfig")
	var pc struct {
		Chart         []byte          `json:"chart,omitempty"`
		Values        json.RawMessage `json:"values,omitempty"`
		OCIRepository *ociRepository  `json:"ociRepository,omitempty"`
	}
	if raw := cd.GetProviderConfig().GetRaw(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &pc); err != nil {
			return append(errs, field.Invalid(pp, string(raw), "not a helm deployment configuration: "+err.Error()))
		}
	}
	return append(errs, validateHelmDeployment(pp, len(pc.Chart) > 0, pc.OCIRepository, "chart")...)
}

// validateHelmDeployment is Gardener's ValidateHelmControllerDeployment and ValidateOCIRepository: a chart either
// inline or from an OCI repository, the repository by ref or by repository plus tag or digest.
func validateHelmDeployment(p *field.Path, hasChart bool, oci *ociRepository, chartField string) field.ErrorList {
	var errs field.ErrorList
	if hasChart == (oci != nil) {
		errs = append(errs, field.Required(p, "must provide either "+chartField+" or ociRepository"))
	}
	if oci == nil {
		return errs
	}
	return append(errs, validateOCIRepository(p.Child("ociRepository"), oci)...)
}

// validateOCIRepository is Gardener's ValidateOCIRepository: a ref alone, or a repository with a tag or digest.
func validateOCIRepository(op *field.Path, oci *ociRepository) field.ErrorList {
	var errs field.ErrorList
	if derefStr(oci.Ref) == "" && derefStr(oci.Repository) == "" {
		return append(errs, field.Required(op, "must provide either ref or repository"))
	}
	if oci.Ref != nil {
		for _, f := range []struct {
			name string
			val  *string
		}{{"repository", oci.Repository}, {"tag", oci.Tag}, {"digest", oci.Digest}} {
			if derefStr(f.val) != "" {
				errs = append(errs, field.Forbidden(op.Child(f.name), "cannot provide "+f.name+" when ref is set"))
			}
		}
		return errs
	}
	if derefStr(oci.Repository) == "" {
		errs = append(errs, field.Required(op.Child("repository"), "must provide a repository"))
	}
	if derefStr(oci.Tag) == "" && derefStr(oci.Digest) == "" {
		errs = append(errs, field.Required(op, "must provide either tag or digest"))
	}
	if oci.Digest != nil && !strings.HasPrefix(*oci.Digest, "sha256:") {
		errs = append(errs, field.Invalid(op.Child("digest"), *oci.Digest, "must start with 'sha256:'"))
	}
	return errs
}
