package api

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/store"
)

// CreateQuota limits creates by what already exists, as Kubernetes' ResourceQuota admission does; the hub's is
// admission.ProjectQuotas (the default project quotas). Admit is called for every create of a namespaced kind after
// validation, right before the object is stored; an error refuses the create. release is called once the store
// has answered, so that an implementation may keep the creates it counts from overtaking each other.
type CreateQuota interface {
	Admit(ctx context.Context, r admission.Reader, gr schema.GroupResource, obj store.Object) (release func(), err error)
}

// admitQuota asks the CreateQuota (Config.CreateQuota), if any, about a create of obj.
func (r *Registry) admitQuota(ctx context.Context, gr schema.GroupResource, obj store.Object) (release func(), err error) {
	if r.quota == nil {
		return func() {}, nil
	}
	return r.quota.Admit(ctx, r, gr, obj)
}
