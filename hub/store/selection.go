package store

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
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
	getter map[string]func(Object) string
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
		p.fields = f
	}
	return p, nil
}

func (p predicate) everything() bool { return p.labels == nil && p.fields == nil }

func (p predicate) matches(obj Object) bool {
	if p.labels != nil && !p.labels.Matches(labels.Set(obj.GetMetadata().GetLabels())) {
		return false
	}
	if p.fields != nil && !p.fields.Matches(objectFields{obj: obj, getter: p.getter}) {
		return false
	}
	return true
}

// objectFields exposes an object's selectable fields to a fields.Selector without building a map.
type objectFields struct {
	obj    Object
	getter map[string]func(Object) string
}

func (o objectFields) Has(f string) bool {
	if f == fieldMetaName || f == fieldMetaNamespace {
		return true
	}
	_, ok := o.getter[f]
	return ok
}

func (o objectFields) Get(f string) string {
	switch f {
	case fieldMetaName:
		return o.obj.GetMetadata().GetName()
	case fieldMetaNamespace:
		return o.obj.GetMetadata().GetNamespace()
	}
	if g := o.getter[f]; g != nil {
		return g(o.obj)
	}
	return ""
}
