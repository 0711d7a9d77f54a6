package store

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// resourcePrefix is the key prefix of a resource, ending in "/": <prefix>/<group or "core">/<resource>/.
func resourcePrefix(prefix, group, resource string) string {
	if group == "" {
		group = "core"
	}
	return prefix + "/" + group + "/" + resource + "/"
}

// objectKey is the part of a key after the resource prefix: "<namespace>/<name>" or "<name>".
func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// namespaceOfKey returns the namespace part of an object key of a namespaced resource.
func namespaceOfKey(k string) string {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return ""
}

// validatePathSegment rejects names that cannot be a key segment. Everything else about a name (DNS rules) is
// admission's business.
func validatePathSegment(p *field.Path, v string) field.ErrorList {
	switch {
	case v == "":
		return field.ErrorList{field.Required(p, "")}
	case v == "." || v == "..":
		return field.ErrorList{field.Invalid(p, v, "may not be '.' or '..'")}
	case strings.ContainsAny(v, "/%"):
		return field.ErrorList{field.Invalid(p, v, "may not contain '/' or '%'")}
	}
	return nil
}
