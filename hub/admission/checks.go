package admission

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// Shared building blocks of the per-kind validations: they mirror the helpers of Gardener's
// pkg/apis/core/validation (utils.go) and of apimachinery, over the Trellis protos.

const (
	// gardenNamespace is the namespace ManagedSeeds, ManagedSeedSets and Gardenlets live in.
	gardenNamespace = "garden"
	// annotationOperation is Gardener's operation annotation (gardener.cloud/operation).
	annotationOperation = "gardener.cloud/operation"
	// immutableMsg is apimachinery's message for changed immutable fields.
	immutableMsg = apivalidation.FieldImmutableErrorMsg
)

var metadataPath = field.NewPath("metadata")

// Group/version/kinds credentials references may name.
var (
	gvkSecret           = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvkWorkloadIdentity = schema.GroupVersionKind{Group: "security.gardener.cloud", Version: "v1alpha1", Kind: "WorkloadIdentity"}
	gvkInternalSecret   = schema.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "InternalSecret"}
)

// nameIsDNSLabel adds what a DNS-1123 label requires beyond the DNS subdomain the generic metadata validation
// already checks, for kinds whose names Gardener restricts to labels (they become parts of other names).
func nameIsDNSLabel(md *metav1.ObjectMeta) field.ErrorList {
	name := md.GetName()
	if name == "" || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil // reported by the generic metadata validation
	}
	return dnsLabel(metadataPath.Child("name"), name)
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// requireGardenNamespace refuses objects outside the garden namespace (ManagedSeed, ManagedSeedSet, Gardenlet).
func requireGardenNamespace(md *metav1.ObjectMeta, forbidden bool) field.ErrorList {
	ns := md.GetNamespace()
	if ns == gardenNamespace || ns == "" { // an empty namespace is reported by the generic metadata validation
		return nil
	}
	p := metadataPath.Child("namespace")
	if forbidden {
		return field.ErrorList{field.Forbidden(p, "namespace must be garden")}
	}
	return field.ErrorList{field.Invalid(p, ns, "namespace must be garden")}
}

// operationAnnotation checks the gardener.cloud/operation annotation against the operations a kind knows, and that
// an operation in progress is not replaced by another one.
func operationAnnotation(md, old *metav1.ObjectMeta, valid []string) field.ErrorList {
	p := metadataPath.Child("annotations").Key(annotationOperation)
	op := md.GetAnnotations()[annotationOperation]
	var errs field.ErrorList
	if op != "" && !contains(valid, op) {
		errs = append(errs, field.NotSupported(p, op, valid))
	}
	if oldOp := old.GetAnnotations()[annotationOperation]; old != nil && op != "" && oldOp != "" && op != oldOp {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("must not overwrite operation %q with %q", oldOp, op)))
	}
	return errs
}

// immutable reports a changed value (apimachinery's ValidateImmutableField); immutableMessage(s) compare messages
// with proto.Equal.
func immutable[T comparable](p *field.Path, newVal, oldVal T) field.ErrorList {
	if newVal != oldVal {
		return field.ErrorList{field.Invalid(p, newVal, immutableMsg)}
	}
	return nil
}

func immutableMessage(p *field.Path, newVal, oldVal proto.Message) field.ErrorList {
	if !proto.Equal(newVal, oldVal) {
		return field.ErrorList{field.Invalid(p, jsonValue(newVal), immutableMsg)}
	}
	return nil
}

// jsonValue renders messages as their Kubernetes JSON in error messages.
func jsonValue(ms ...proto.Message) any {
	var out []json.RawMessage
	for _, m := range ms {
		if m == nil || !m.ProtoReflect().IsValid() {
			out = append(out, json.RawMessage("null"))
			continue
		}
		b, err := kjson.Marshal(m)
		if err != nil {
			return field.OmitValueType{}
		}
		out = append(out, b)
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

func protoEqual(a, b proto.Message) bool { return proto.Equal(a, b) }

func immutableList[T comparable](p *field.Path, newVal, oldVal []T) field.ErrorList {
	if len(newVal) != len(oldVal) {
		return field.ErrorList{field.Invalid(p, newVal, immutableMsg)}
	}
	for i := range newVal {
		if newVal[i] != oldVal[i] {
			return field.ErrorList{field.Invalid(p, newVal, immutableMsg)}
		}
	}
	return nil
}

func immutableMessages[T proto.Message](p *field.Path, newVal, oldVal []T) field.ErrorList {
	changed := len(newVal) != len(oldVal)
	for i := 0; !changed && i < len(newVal); i++ {
		changed = !proto.Equal(newVal[i], oldVal[i])
	}
	if !changed {
		return nil
	}
	ms := make([]proto.Message, len(newVal))
	for i, m := range newVal {
		ms[i] = m
	}
	v := jsonValue(ms...)
	if len(ms) == 1 {
		v = []any{v}
	}
	return field.ErrorList{field.Invalid(p, v, immutableMsg)}
}

// derefStr reads an optional string.
func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptrTo[T any](v T) *T { return &v }

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// quantity checks a Kubernetes quantity that must not be negative (Gardener's ValidateResourceQuantityValue). An empty
// string is the zero quantity, as an absent resource.Quantity is in Gardener's Go types.
func quantity(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, err.Error())}
	}
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, v, "must be greater than or equal to 0")}
	}
	return nil
}

func nonNegative(p *field.Path, v *int32) field.ErrorList {
	if v != nil && *v < 0 {
		return apivalidation.ValidateNonnegativeField(int64(*v), p)
	}
	return nil
}

// cidr parses a CIDR (IPv4 or IPv6).
func cidr(p *field.Path, v string) (*net.IPNet, field.ErrorList) {
	if v == "" {
		return nil, field.ErrorList{field.Required(p, "a CIDR is required")}
	}
	_, n, err := net.ParseCIDR(v)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(p, v, "must be a valid CIDR, e.g. 10.0.0.0/16 or fd00::/8")}
	}
	return n, nil
}

func overlaps(a, b *net.IPNet) bool { return a.Contains(b.IP) || b.Contains(a.IP) }

// credentialsRef validates a reference to credentials: apiVersion, kind, name and namespace are required, and the
// group/version/kind is one of allowed (Gardener's ValidateCredentialsRef).
func credentialsRef(p *field.Path, ref *metav1.ObjectReference, allowed ...schema.GroupVersionKind) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(p, "must refer to credentials")}
	}
	var errs field.ErrorList
	if ref.GetApiVersion() == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), "must provide an apiVersion"))
	}
	if ref.GetKind() == "" {
		errs = append(errs, field.Required(p.Child("kind"), "must provide a kind"))
	}
	if ref.GetName() == "" {
		errs = append(errs, field.Required(p.Child("name"), "must provide a name"))
	} else {
		errs = append(errs, dnsSubdomain(p.Child("name"), ref.GetName())...)
	}
	if ref.GetNamespace() == "" {
		errs = append(errs, field.Required(p.Child("namespace"), "must provide a namespace"))
	} else {
		errs = append(errs, dnsSubdomain(p.Child("namespace"), ref.GetNamespace())...)
	}
	if ref.GetApiVersion() == "" || ref.GetKind() == "" {
		return errs
	}
	gvk := schema.FromAPIVersionAndKind(ref.GetApiVersion(), ref.GetKind())
	var valid []string
	for _, a := range allowed {
		if gvk == a {
			return errs
		}
		valid = append(valid, a.GroupVersion().String()+", Kind="+a.Kind)
	}
	return append(errs, field.NotSupported(p, ref.GetApiVersion()+", Kind="+ref.GetKind(), valid))
}

// labelSelector validates a Kubernetes label selector (invalid label values tolerated, as Gardener allows them).
func labelSelector(p *field.Path, sel *metav1.LabelSelector) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(toKubeSelector(sel.GetMatchLabels(), sel.GetMatchExpressions()),
		metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: true}, p)
}

func seedSelector(p *field.Path, sel *corev1beta1.SeedSelector) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(toKubeSelector(sel.GetMatchLabels(), sel.GetMatchExpressions()),
		metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: true}, p)
}

func toKubeSelector(matchLabels map[string]string, exprs []*metav1.LabelSelectorRequirement) *kmetav1.LabelSelector {
	ks := &kmetav1.LabelSelector{MatchLabels: matchLabels}
	for _, e := range exprs {
		ks.MatchExpressions = append(ks.MatchExpressions, kmetav1.LabelSelectorRequirement{
			Key: e.GetKey(), Operator: kmetav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues(),
		})
	}
	return ks
}

// tolerations validates Gardener tolerations (core.gardener.cloud Toleration): a key is required and key/value pairs
// are unique.
func tolerations(p *field.Path, ts []*metav1.Toleration) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range ts {
		ip := p.Index(i)
		if t.GetKey() == "" {
			errs = append(errs, field.Required(ip.Child("key"), "cannot be empty"))
		}
		id := keyWithOptionalValue(t.GetKey(), t.Value)
		if seen[id] {
			errs = append(errs, field.Duplicate(ip, id))
		}
		seen[id] = true
	}
	return errs
}

// keyWithOptionalValue is Gardener's utils.IDForKeyWithOptionalValue.
func keyWithOptionalValue(key string, value *string) string {
	if value == nil {
		return key
	}
	return key + "=" + *value
}

// semverLoose is the version grammar of Masterminds' semver.NewVersion, which Gardener uses for machine image
// versions: v?MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], leading zeros allowed in the numbers.
var semverLoose = regexp.MustCompile(`^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?` +
	`(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?` +
	`(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$`)

func isSemver(v string) bool {
	m := semverLoose.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	// Numeric pre-release identifiers must not have leading zeros (semver 2.0, enforced by Masterminds).
	if m[5] != "" {
		for _, id := range strings.Split(m[5], ".") {
			if len(id) > 1 && id[0] == '0' && strings.Trim(id, "0123456789") == "" {
				return false
			}
		}
	}
	return true
}

// pemCertificates checks that s holds at least one PEM-encoded X.509 certificate (Gardener's caBundle rule).
func pemCertificates(p *field.Path, s string) field.ErrorList {
	rest := []byte(s)
	found := false
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(p, s, "caBundle is not a valid PEM-encoded certificate: "+err.Error())}
		}
		found = true
	}
	if !found {
		return field.ErrorList{field.Invalid(p, s, "caBundle is not a valid PEM-encoded certificate")}
	}
	return nil
}

// objectReferenceName requires the name of an object reference (quotas of bindings).
func objectReferenceName(p *field.Path, ref *metav1.ObjectReference) field.ErrorList {
	if ref.GetName() == "" {
		return field.ErrorList{field.Required(p.Child("name"), "must provide a name")}
	}
	return nil
}

// duration parses a Kubernetes metav1.Duration string such as "3m0s".
func duration(p *field.Path, v *string) field.ErrorList {
	if v == nil {
		return nil
	}
	if _, err := time.ParseDuration(*v); err != nil {
		return field.ErrorList{field.Invalid(p, *v, "must be a duration such as 3m0s: "+err.Error())}
	}
	return nil
}
