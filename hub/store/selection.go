package store

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Field paths every resource supports in field selectors.
const (
	fieldMetaName      = "metadata.name"
	fieldMetaNamespace = "metadata.namespace"
)

// predicate is a compiled label and field selection.
type predicate struct {
	labels labels.Selector // nil matches everything
	fields fields.Selector // nil matches everything
	// fieldReqs are the field selector's requirements, matched without building anything per object.
	fieldReqs fields.Requirements
	getter    map[string]func(Object) string
}

// newPredicate validates the selectors: a field selector may use only metadata.name, metadata.namespace and the
// resource's Fields.
func (c *Collection) newPredicate(l labels.Selector, f fields.Selector) (predicate, error) {
	p := predicate{getter: c.res.Fields}
	if l != nil && !l.Empty() {
		p.labels = l
	}
	if f != nil && !f.Empty() {
		for _, r := range f.Requirements() {
			if r.Field == fieldMetaName || r.Field == fieldMetaNamespace {
				continue
			}
			if _, ok := c.res.Fields[r.Field]; !ok {
				return p, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
		p.fields, p.fieldReqs = f, f.Requirements()
	}
	return p, nil
}

func (p predicate) everything() bool { return p.labels == nil && p.fields == nil }

func (p predicate) matches(obj Object) bool {
	if p.labels != nil && !p.labels.Matches(labels.Set(obj.GetMetadata().GetLabels())) {
		return false
	}
	for _, r := range p.fieldReqs {
		v := p.field(obj, r.Field)
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			if v != r.Value {
				return false
			}
		case selection.NotEquals:
			if v == r.Value {
				return false
			}
		default: // fields.ParseSelector makes no other operator
			return false
		}
	}
	return true
}

// field returns the value of a selectable field of obj ("" for a field the resource does not have).
func (p predicate) field(obj Object, f string) string {
	switch f {
	case fieldMetaName:
		return obj.GetMetadata().GetName()
	case fieldMetaNamespace:
		return obj.GetMetadata().GetNamespace()
	}
	if g := p.getter[f]; g != nil {
		return g(obj)
	}
	return ""
}

// single returns the key of the one object the selection can match, when its field selector names it exactly
// (metadata.name, and metadata.namespace or the request's namespace for a namespaced resource): a watch or list of
// it looks the object up instead of matching every object of the resource (an agent's bootstrap waits for its CSR
// so, among tens of thousands).
func (p predicate) single(namespaced bool, namespace string) (string, bool) {
	if p.fields == nil {
		return "", false
	}
	name, ok := p.fields.RequiresExactMatch(fieldMetaName)
	if !ok {
		return "", false
	}
	if !namespaced {
		return name, true
	}
	if ns, ok := p.fields.RequiresExactMatch(fieldMetaNamespace); ok {
		if namespace != "" && ns != namespace {
			return "", false // matches nothing; left to the scan of the namespace
		}
		namespace = ns
	}
	if namespace == "" {
		return "", false
	}
	return namespace + "/" + name, true
}
