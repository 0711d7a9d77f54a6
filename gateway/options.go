package gateway

import (
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	ivalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kvalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// gRPC metadata by which the options of a write travel to the kinds' services: the REST gateway sets them from the
// query (and a delete's body); gRPC clients set them themselves (metadata.AppendToOutgoingContext).
const (
	// MetadataDryRun carries Kubernetes' dryRun option of Create, Update, UpdateStatus, UpdateBinding, Patch and
	// Delete: "All" decides the write (admission, defaulting, validation, preconditions) and answers what it would
	// return, without writing anything. Any other value is refused with 422, as kube-apiserver refuses it.
	MetadataDryRun = "x-trellis-dry-run"
	// MetadataFieldValidation carries a Patch's fieldValidation ("Ignore" or "Warn" drop unknown fields of the
	// patched object instead of refusing them; "Strict", the default, refuses them).
	MetadataFieldValidation = "x-trellis-field-validation"
	// MetadataPropagationPolicy carries a Delete's propagationPolicy: "Orphan" (the dependents lose their owner
	// reference to the object, which waits for that behind the orphan finalizer), "Foreground" (the object waits,
	// behind the foregroundDeletion finalizer, until its dependents that block owner deletion are gone) or
	// "Background" (the default: the object goes at once, the garbage collector deletes its dependents after it).
	MetadataPropagationPolicy = "x-trellis-propagation-policy"
	// MetadataFieldManager carries the fieldManager of a write (Create, Update, UpdateStatus, UpdateBinding, Patch):
	// the name its changes are recorded under in metadata.managedFields. Server-side apply (a Patch of type
	// application/apply-patch+yaml) requires it; other writes default to the client's user agent, as in Kubernetes.
	MetadataFieldManager = "x-trellis-field-manager"
	// MetadataForce carries a server-side apply's force option: "true" takes the fields it conflicts on from their
	// other managers instead of failing with 409 Conflict.
	MetadataForce = "x-trellis-force"
	// MetadataResetManagedFields is set by the REST gateway when an update's body has an empty
	// metadata.managedFields list, which resets them (protobuf, and so gRPC, cannot tell an empty list from none; a
	// gRPC client sends a single empty entry instead).
	MetadataResetManagedFields = "x-trellis-reset-managed-fields"
)

// PatchTypeApply is server-side apply's patch type.
const PatchTypeApply = string(types.ApplyYAMLPatchType)

// Media types the REST face reads and writes. Bodies in any other type are refused with 415, answers in any other
// type with 406, both naming these, as kube-apiserver names its own.
var (
	bodyTypes  = []string{MIMEJSON, MIMEYAML}
	patchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), PatchTypeApply}
)

// options is what the gateway read from a request's options: the metadata for the kinds' services and the
// query parameters of the grpc-gateway route.
type options struct {
	dryRun          []string
	fieldValidation string
	// fieldManager and force are a write's fieldManager and a patch's force.
	fieldManager string
	force        bool
	// propagation is a delete's propagationPolicy (orphanDependents true is Orphan), "" when it names none.
	propagation string
	// route holds parameters for the route's request message (a delete's preconditions from its body).
	route map[string]string
}

// requestOptions reads and validates the options of a request to a resource path as kube-apiserver does: with
// apimachinery's option types, parameter codec and validation, so that bad values get kube-apiserver's 400 (not
// decodable) or 422 (invalid) with its words. Options the hub cannot honour are refused with 400 naming the
// parameter and the reason; what it accepts without acting on is only what cannot change the outcome (see the
// table in docs/api.md). body is a delete's body.
func requestOptions(method, path string, q url.Values, contentType string, body []byte) (options, *apierrors.StatusError) {
	var o options
	invalid := func(kind string, errs field.ErrorList) *apierrors.StatusError {
		return apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: kind}, "", errs)
	}
	switch method {
	case http.MethodPost:
		var opts kmetav1.CreateOptions
		if err := decodeParameters(q, &opts); err != nil {
			return o, err
		}
		if errs := kvalidation.ValidateCreateOptions(&opts); len(errs) > 0 {
			return o, invalid("CreateOptions", errs)
		}
		o.dryRun, o.fieldValidation, o.fieldManager = opts.DryRun, opts.FieldValidation, opts.FieldManager
	case http.MethodPut:
		var opts kmetav1.UpdateOptions
		if err := decodeParameters(q, &opts); err != nil {
			return o, err
		}
		if errs := kvalidation.ValidateUpdateOptions(&opts); len(errs) > 0 {
			return o, invalid("UpdateOptions", errs)
		}
		o.dryRun, o.fieldValidation, o.fieldManager = opts.DryRun, opts.FieldValidation, opts.FieldManager
	case http.MethodPatch:
		var opts kmetav1.PatchOptions
		if err := decodeParameters(q, &opts); err != nil {
			return o, err
		}
		if errs := kvalidation.ValidatePatchOptions(&opts, types.PatchType(contentType)); len(errs) > 0 {
			return o, invalid("PatchOptions", errs)
		}
		o.dryRun, o.fieldValidation, o.fieldManager = opts.DryRun, opts.FieldValidation, opts.FieldManager
		o.force = opts.Force != nil && *opts.Force
	case http.MethodDelete:
		opts, err := DeleteOptions(q, body)
		if err != nil {
			return o, err
		}
		o.dryRun = opts.DryRun
		if p := opts.PropagationPolicy; p != nil {
			o.propagation = string(*p)
		} else if v := opts.OrphanDependents; v != nil { //nolint:staticcheck // the deprecated field is still served, as kube-apiserver serves it
			o.propagation = string(kmetav1.DeletePropagationBackground)
			if *v {
				o.propagation = string(kmetav1.DeletePropagationOrphan)
			}
		}
		if p := opts.Preconditions; p != nil {
			o.route = map[string]string{}
			if p.UID != nil {
				o.route["preconditions.uid"] = string(*p.UID)
			}
			if p.ResourceVersion != nil {
				o.route["preconditions.resource_version"] = *p.ResourceVersion
			}
		}
	case http.MethodGet:
		_, legacyWatch, _ := resourcePath(path)
		if !isCollection(path) {
			// GetOptions: resourceVersion alone, served as "not older than".
			var opts kmetav1.GetOptions
			return o, decodeParameters(q, &opts)
		}
		return o, listOptions(q, legacyWatch)
	}
	return o, nil
}

// listOptions checks the options of a list or watch (legacyWatch: a /watch/ path, a watch without ?watch=true).
func listOptions(q url.Values, legacyWatch bool) *apierrors.StatusError {
	var opts internalversion.ListOptions
	if err := decodeParameters(q, &opts); err != nil {
		return err
	}
	opts.Watch = opts.Watch || legacyWatch
	if errs := ivalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if v := opts.SendInitialEvents; v != nil && !*v && (opts.ResourceVersion == "" || opts.ResourceVersion == "0") {
		return apierrors.NewBadRequest("sendInitialEvents: false without a resourceVersion is not supported: a watch from no resourceVersion starts with the current state; watch from a list's resourceVersion instead")
	}
	if opts.ResourceVersionMatch == kmetav1.ResourceVersionMatchExact {
		return apierrors.NewBadRequest("resourceVersionMatch: Exact is not supported: lists are served from the hub's watch cache at its newest revision, not at an older one; use NotOlderThan")
	}
	return nil
}

// decodeParameters decodes q into into with kube-apiserver's parameter codec. Its errors do not say which parameter
// is wrong, so a failure names the first parameter that fails alone ("limit: strconv.ParseInt: ...").
func decodeParameters(q url.Values, into runtime.Object) *apierrors.StatusError {
	err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, kmetav1.SchemeGroupVersion, into)
	if err == nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(q))
	for _, k := range keys {
		one := into.DeepCopyObject()
		if e := metainternalversionscheme.ParameterCodec.DecodeParameters(url.Values{k: q[k]}, kmetav1.SchemeGroupVersion, one); e != nil {
			return apierrors.NewBadRequest(k + ": " + e.Error())
		}
	}
	return apierrors.NewBadRequest(err.Error())
}

// DeleteOptions reads the DeleteOptions of a delete request as kube-apiserver does: from its body when it has one
// (as kubectl sends them), from the query otherwise, then validated. A dryRun in the query is honoured even with a
// body, so that no reading of a request that asks for a dry run deletes anything. propagationPolicy (and the
// deprecated orphanDependents) are served as kube-apiserver serves them (see MetadataPropagationPolicy). No kind has
// graceful deletion, so gracePeriodSeconds changes nothing, as for such kinds in Kubernetes.
func DeleteOptions(q url.Values, body []byte) (*kmetav1.DeleteOptions, *apierrors.StatusError) {
	opts := &kmetav1.DeleteOptions{}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := utiljson.Unmarshal(body, opts); err != nil {
			return nil, apierrors.NewBadRequest("invalid DeleteOptions: " + err.Error())
		}
		if opts.Kind != "" && opts.Kind != "DeleteOptions" {
			return nil, apierrors.NewBadRequest("decoded object cannot be converted to DeleteOptions")
		}
		var query kmetav1.DeleteOptions
		if err := decodeParameters(q, &query); err != nil {
			return nil, err
		}
		if len(opts.DryRun) == 0 {
			opts.DryRun = query.DryRun
		}
	} else if err := decodeParameters(q, opts); err != nil {
		return nil, err
	}
	if errs := kvalidation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	if v := opts.IgnoreStoreReadErrorWithClusterBreakingPotential; v != nil && *v {
		return nil, apierrors.NewBadRequest("ignoreStoreReadErrorWithClusterBreakingPotential: not supported: the hub does not delete objects it cannot read")
	}
	return opts, nil
}

// checkContentType refuses a request body the hub cannot read (415, naming the types it reads). An empty
// Content-Type is read as JSON.
func checkContentType(method, contentType string) *apierrors.StatusError {
	accepted := bodyTypes
	switch method {
	case http.MethodPatch:
		accepted = patchTypes
	case http.MethodPost, http.MethodPut:
	default:
		return nil
	}
	if contentType == "" && method != http.MethodPatch {
		return nil
	}
	for _, t := range accepted {
		if contentType == t {
			return nil
		}
	}
	return UnsupportedMediaType(accepted)
}

// UnsupportedMediaType is the 415 that refuses a body in a type not among accepted, naming them as kube-apiserver does.
func UnsupportedMediaType(accepted []string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: kmetav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", "),
	}}
}

// checkAccept refuses a request whose Accept header names no type the hub can answer in (406 naming the types it
// writes, worded as kube-apiserver's router words it). Kubernetes' alternative representations (as=Table, as=PartialObjectMetadata) are not produced: an entry
// asking for one does not count, and clients such as kubectl list plain JSON after it.
func checkAccept(accept string) *apierrors.StatusError {
	if strings.TrimSpace(accept) == "" {
		return nil
	}
	for _, entry := range strings.Split(accept, ",") {
		t, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil {
			continue
		}
		if _, ok := params["as"]; ok {
			continue
		}
		switch t {
		case "*/*", "application/*", MIMEJSON, MIMEYAML:
			return nil
		}
	}
	return &apierrors.StatusError{ErrStatus: kmetav1.Status{
		Status: kmetav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: kmetav1.StatusReasonNotAcceptable,
		Message: "406: Not Acceptable\n\nAvailable representations: " + strings.Join(bodyTypes, ", "),
	}}
}

// isCollection reports whether a resource path names a collection (list, watch, create) rather than one object:
// /api/v1/<resource>, /api/v1/namespaces/<ns>/<resource>, and the same under /apis/<group>/<version>.
func isCollection(path string) bool {
	rest, _, ok := resourcePath(path)
	if !ok {
		return false
	}
	switch len(rest) {
	case 1:
		return true
	case 3:
		// namespaces/<name>/status and /finalize are the namespace's subresources.
		return rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize"
	}
	return false
}

// resourcePath returns the segments of path after its group and version, and whether they follow the legacy
// "watch" segment, when it is a resource path.
func resourcePath(path string) (rest []string, watch, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return nil, false, false
	}
	if len(parts) > 0 && parts[0] == "watch" {
		parts, watch = parts[1:], true
	}
	return parts, watch, len(parts) > 0
}
