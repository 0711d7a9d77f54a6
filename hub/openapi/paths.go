package openapi

import (
	"strings"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/trellis-dev/trellis/hub/api"
)

// root is the REST prefix of a kind's group and version: /api/v1 or /apis/<group>/<version>.
func root(k api.Kind) string {
	if k.Group == "" {
		return "/api/" + k.Version
	}
	return "/apis/" + k.Group + "/" + k.Version
}

// collectionPath is the path of a kind's collection (in {namespace} for namespaced kinds).
func collectionPath(k api.Kind) string {
	p := root(k)
	if k.Namespaced {
		p += "/namespaces/{namespace}"
	}
	return p + "/" + k.Resource
}

// objectPath is the path of one object, as the kind's Get is routed.
func objectPath(k api.Kind) string { return collectionPath(k) + "/{name}" }

// operationName is the part of Kubernetes' operation IDs that names the group and version, e.g.
// "CoreGardenerCloudV1beta1" or "CoordinationV1" (a *.k8s.io group is named without the suffix, as kube-apiserver
// does) or "CoreV1".
func operationName(k api.Kind) string {
	g := strings.TrimSuffix(k.Group, ".k8s.io")
	if g == "" {
		g = "core"
	}
	var b strings.Builder
	for _, part := range strings.FieldsFunc(g, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + strings.ToUpper(k.Version[:1]) + k.Version[1:]
}

// tag groups a kind's operations by group and version.
func tag(k api.Kind) string {
	g := k.Group
	if g == "" {
		g = "core"
	}
	return g + "_" + k.Version
}

func queryParam(name, typ, desc string) spec.Parameter {
	return spec.Parameter{
		ParamProps:   spec.ParamProps{Name: name, In: "query", Description: desc},
		SimpleSchema: spec.SimpleSchema{Type: typ}, CommonValidations: spec.CommonValidations{UniqueItems: true},
	}
}

func pathParam(name, desc string) spec.Parameter {
	return spec.Parameter{
		ParamProps:   spec.ParamProps{Name: name, In: "path", Description: desc, Required: true},
		SimpleSchema: spec.SimpleSchema{Type: "string"}, CommonValidations: spec.CommonValidations{UniqueItems: true},
	}
}

func bodyParam(schema spec.Schema) spec.Parameter {
	return spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: true, Schema: &schema}}
}

// The query parameters the hub honours (gateway and hub/api); docs/api.md has the table of every parameter
// kube-apiserver accepts, with those the hub refuses.
var (
	paramLabelSelector  = queryParam("labelSelector", "string", "A selector to restrict the list of returned objects by their labels (Kubernetes' syntax, e.g. \"env=prod,tier in (a,b)\").")
	paramFieldSelector  = queryParam("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields: metadata.name, metadata.namespace and the kind's own field paths.")
	paramLimit          = queryParam("limit", "integer", "The maximum number of items of one page; the list's metadata.continue then names the next page.")
	paramContinue       = queryParam("continue", "string", "The continue token of the previous page.")
	paramResourceVer    = queryParam("resourceVersion", "string", "For a list, \"0\" allows any cached version and \"\" the latest; for a watch, the version to resume from (410 Gone when it is no longer kept).")
	paramWatch          = queryParam("watch", "boolean", "Watch for changes to the described resources and return them as a stream of watch events (one JSON object per line).")
	paramBookmarks      = queryParam("allowWatchBookmarks", "boolean", "Ask for BOOKMARK events, which carry only the resourceVersion a watch may be resumed from.")
	paramTimeoutSeconds = queryParam("timeoutSeconds", "integer", "How long a watch may last.")
	paramFieldValid     = queryParam("fieldValidation", "string", "How unknown fields in the body are handled: Strict (the default: the request fails naming the field), Warn or Ignore (the fields are dropped).")
	paramDryRun         = queryParam("dryRun", "string", "All: admission, defaulting and validation run and the answer is what the write would return, but nothing is stored or deleted. Any other value is refused (422).")
	paramPropagation    = queryParam("propagationPolicy", "string", "Background (the default: the garbage collector deletes the dependents after the owner), Foreground (the owner waits, behind the foregroundDeletion finalizer, until its dependents with blockOwnerDeletion are gone) or Orphan (the dependents stay, without their references to the owner, which waits behind the orphan finalizer).")
	paramPrecondRV      = queryParam("preconditions.resourceVersion", "string", "Delete only if the object's resourceVersion is this one (409 Conflict otherwise).")
	paramPrecondUID     = queryParam("preconditions.uid", "string", "Delete only if the object's uid is this one (409 Conflict otherwise).")
	paramNamespace      = pathParam("namespace", "The object's namespace.")
	paramName           = pathParam("name", "The object's name.")
)

func init() {
	paramFieldValid.Enum = []any{"Strict", "Warn", "Ignore"}
	paramDryRun.Enum = []any{"All"}
	paramPropagation.Enum = []any{"Background", "Foreground", "Orphan"}
}

// patchTypes are the content types of the patch bodies the hub applies (a strategic merge patch is applied as a
// JSON merge patch: Gardener's kinds are not built-in kinds with patch strategies).
var patchTypes = []string{"application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json"}

// pathItems are the paths of one kind with their operations, as kube-apiserver describes a resource.
func pathItems(k api.Kind, obj, list, event, status spec.Schema) map[string]spec.PathItem {
	name := operationName(k)
	ns := ""
	if k.Namespaced {
		ns = "Namespaced"
	}
	op := func(action, id, summary string, ok spec.Schema, code int, params ...spec.Parameter) *spec.Operation {
		o := &spec.Operation{OperationProps: spec.OperationProps{ID: id, Description: summary, Tags: []string{tag(k)}, Parameters: params}}
		o.Responses = &spec.Responses{ResponsesProps: spec.ResponsesProps{
			Default: &spec.Response{ResponseProps: spec.ResponseProps{
				Description: "The error as a Kubernetes Status: 400 BadRequest, 401 Unauthorized, 403 Forbidden, 404 NotFound, 406 NotAcceptable, 409 AlreadyExists or Conflict, 410 Expired, 415 UnsupportedMediaType, 422 Invalid (with the fields at fault in details.causes), 429, 500, 503.",
				Schema:      &status,
			}},
			StatusCodeResponses: map[int]spec.Response{code: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: &ok}}},
		}}
		o.AddExtension("x-kubernetes-action", action)
		o.AddExtension("x-kubernetes-group-version-kind", map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind})
		return o
	}
	listParams := []spec.Parameter{paramLabelSelector, paramFieldSelector, paramLimit, paramContinue, paramResourceVer, paramWatch, paramBookmarks, paramTimeoutSeconds}
	watchParams := []spec.Parameter{paramLabelSelector, paramFieldSelector, paramResourceVer, paramBookmarks, paramTimeoutSeconds}
	items := map[string]spec.PathItem{}
	pathParams := func(withName bool) []spec.Parameter {
		var ps []spec.Parameter
		if withName {
			ps = append(ps, paramName)
		}
		if k.Namespaced {
			ps = append(ps, paramNamespace)
		}
		return ps
	}

	coll := spec.PathItem{PathItemProps: spec.PathItemProps{
		Get:  op("list", "list"+name+ns+k.Kind, "list or watch objects of kind "+k.Kind, list, 200, listParams...),
		Post: op("post", "create"+name+ns+k.Kind, "create a "+k.Kind+" (defaulted, validated and admitted as Gardener does)", obj, 201, bodyParam(obj), paramFieldValid, paramDryRun),
	}}
	coll.Parameters = pathParams(false)
	items[collectionPath(k)] = coll

	one := spec.PathItem{PathItemProps: spec.PathItemProps{
		Get:    op("get", "read"+name+ns+k.Kind, "read the specified "+k.Kind, obj, 200, paramResourceVer),
		Put:    op("put", "replace"+name+ns+k.Kind, "replace the specified "+k.Kind+" (a set metadata.resourceVersion must match: 409 Conflict otherwise)", obj, 200, bodyParam(obj), paramFieldValid, paramDryRun),
		Patch:  op("patch", "patch"+name+ns+k.Kind, "partially update the specified "+k.Kind+" with a JSON merge patch or a JSON patch", obj, 200, bodyParam(anyObject()), paramFieldValid, paramDryRun),
		Delete: op("delete", "delete"+name+ns+k.Kind, "delete the specified "+k.Kind+"; with finalizers it only sets metadata.deletionTimestamp and returns the object", obj, 200, paramPrecondRV, paramPrecondUID, paramPropagation, paramDryRun),
	}}
	one.Patch.Consumes = patchTypes
	one.Parameters = pathParams(true)
	items[objectPath(k)] = one

	sub := func(subresource, summary string) {
		item := spec.PathItem{PathItemProps: spec.PathItemProps{
			Put:   op("put", "replace"+name+ns+k.Kind+strings.ToUpper(subresource[:1])+subresource[1:], "replace the "+subresource+" of the specified "+k.Kind+": "+summary, obj, 200, bodyParam(obj), paramFieldValid, paramDryRun),
			Patch: op("patch", "patch"+name+ns+k.Kind+strings.ToUpper(subresource[:1])+subresource[1:], "partially update the "+subresource+" of the specified "+k.Kind+": "+summary, obj, 200, bodyParam(anyObject()), paramFieldValid, paramDryRun),
		}}
		item.Patch.Consumes = patchTypes
		item.Parameters = pathParams(true)
		items[objectPath(k)+"/"+subresource] = item
	}
	if k.Status {
		sub("status", "the desired state is left as stored")
	}
	if k.Binding {
		sub("binding", "writes spec.seedName alone (scheduling; a change of a set seed starts a control-plane migration)")
	}

	// The legacy watch paths, which kube-apiserver still serves and describes.
	w := root(k) + "/watch"
	if k.Namespaced {
		all := spec.PathItem{PathItemProps: spec.PathItemProps{Get: op("watchlist", "watch"+name+k.Kind+"ListForAllNamespaces",
			"watch objects of kind "+k.Kind+" in every namespace (deprecated: use the list with ?watch=true)", event, 200, watchParams...)}}
		items[w+"/"+k.Resource] = all
		listAll := spec.PathItem{PathItemProps: spec.PathItemProps{Get: op("list", "list"+name+k.Kind+"ForAllNamespaces",
			"list or watch objects of kind "+k.Kind+" in every namespace", list, 200, listParams...)}}
		items[root(k)+"/"+k.Resource] = listAll
	}
	watch := spec.PathItem{PathItemProps: spec.PathItemProps{Get: op("watchlist", "watch"+name+ns+k.Kind+"List",
		"watch objects of kind "+k.Kind+" (deprecated: use the list with ?watch=true)", event, 200, watchParams...)}}
	watch.Parameters = pathParams(false)
	wp := w
	if k.Namespaced {
		wp += "/namespaces/{namespace}"
	}
	items[wp+"/"+k.Resource] = watch
	return items
}

// anyObject is the schema of a patch body: a JSON object (merge patch) or array (JSON patch).
func anyObject() spec.Schema {
	return spec.Schema{VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}}
}
