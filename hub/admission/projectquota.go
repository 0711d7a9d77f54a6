package admission

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/componentconfig"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// ProjectQuotaName is the name of the quota in refusals: Gardener's project controller writes the default quota of
// a project as the ResourceQuota "gardener" in its namespace.
const ProjectQuotaName = "gardener"

// labelProjectName on a namespace names the project it belongs to (Gardener's project.gardener.cloud/name).
const labelProjectName = "project.gardener.cloud/name"

var namespaces = schema.GroupResource{Resource: "namespaces"}

// legacyCountNames are the core resources Kubernetes also counts under their bare name ("secrets" besides
// "count/secrets").
var legacyCountNames = map[string]bool{"secrets": true, "configmaps": true, "services": true, "pods": true,
	"persistentvolumeclaims": true, "replicationcontrollers": true, "resourcequotas": true}

// ProjectQuotas enforces the default project quotas of the controller manager's configuration
// (controllers.project.quotas) when objects are created: Gardener writes the first quota whose projectSelector
// matches a project's labels as a ResourceQuota into the project namespace and kube-apiserver's quota admission
// enforces its object counts; the hub has no ResourceQuota kind, so ProjectQuotas counts instead.
//
// A create in a project namespace (one labelled project.gardener.cloud/name=<p> with Project p's spec.namespace
// naming it) is refused with 403 Forbidden and Kubernetes' message ("exceeded quota: gardener, requested: ..., used:
// ..., limited: ...") when the objects of its resource already in the namespace reach a limit of the quota:
// count/<resource>.<group> (count/<resource> for the core group, or the bare legacy name: secrets, configmaps).
// Objects being deleted count until they are gone, as in Kubernetes. Other resource names (cpu, requests.*) are
// accepted and do not apply to the hub's kinds.
//
// Counting and storing are not one transaction: Admit serializes the creates it limits per resource and namespace
// in this hub replica, so that they cannot overshoot a limit together; creates through different replicas at the
// same moment can.
type ProjectQuotas struct {
	quotas []projectQuota
	locks  [64]sync.Mutex
}

// projectQuota is one configured quota: the projects it selects and its object-count limits.
type projectQuota struct {
	selector labels.Selector
	hard     map[string]resource.Quantity
}

// NewProjectQuotas returns the enforcement of quotas (a defaulted, validated configuration's
// controllers.project.quotas); an empty list limits nothing.
func NewProjectQuotas(quotas []componentconfig.QuotaConfiguration) (*ProjectQuotas, error) {
	q := &ProjectQuotas{}
	var errs []error
	for i, c := range quotas {
		pq := projectQuota{hard: map[string]resource.Quantity{}}
		sel := c.ProjectSelector
		if sel == nil {
			sel = &kmetav1.LabelSelector{}
		}
		s, err := kmetav1.LabelSelectorAsSelector(sel)
		if err != nil {
			errs = append(errs, fmt.Errorf("quotas[%d].projectSelector: %w", i, err))
			continue
		}
		pq.selector = s
		for name, v := range c.Config.Spec.Hard {
			qty, err := resource.ParseQuantity(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("quotas[%d].config.spec.hard[%s]: %w", i, name, err))
				continue
			}
			pq.hard[name] = qty
		}
		q.quotas = append(q.quotas, pq)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// countNames are the quota resource names under which a create of gr counts one object.
func countNames(gr schema.GroupResource) []string {
	if gr.Group == "" {
		names := []string{"count/" + gr.Resource}
		if legacyCountNames[gr.Resource] {
			names = append(names, gr.Resource)
		}
		return names
	}
	return []string{"count/" + gr.Resource + "." + gr.Group}
}

// Admit refuses the create of obj (of resource gr) when it exceeds its project's quota. Otherwise it returns a
// release function the caller calls once the object is stored (or its create failed); until then other creates the
// quota limits in the same namespace wait.
func (q *ProjectQuotas) Admit(ctx context.Context, r Reader, gr schema.GroupResource, obj store.Object) (release func(), err error) {
	release = func() {}
	namespace := obj.GetMetadata().GetNamespace()
	if q == nil || len(q.quotas) == 0 || namespace == "" {
		return release, nil
	}
	limits, err := q.limitsFor(ctx, r, namespace)
	if err != nil || len(limits) == 0 {
		return release, err
	}
	var names []string
	for _, n := range countNames(gr) {
		if _, ok := limits[n]; ok {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return release, nil
	}
	slices.Sort(names) // Kubernetes lists the exceeded resources sorted
	mu := q.lock(gr, namespace)
	mu.Lock()
	items, err := r.List(ctx, gr, namespace)
	if err != nil {
		mu.Unlock()
		return release, apierrors.NewInternalError(fmt.Errorf("count %s in namespace %s: %w", gr, namespace, err))
	}
	used := resource.NewQuantity(int64(len(items)), resource.DecimalSI)
	one := resource.NewQuantity(1, resource.DecimalSI)
	var requested, usedText, limited []string
	for _, n := range names {
		next := used.DeepCopy()
		next.Add(*one)
		if hard := limits[n]; next.Cmp(hard) > 0 {
			requested = append(requested, n+"="+one.String())
			usedText = append(usedText, n+"="+used.String())
			limited = append(limited, n+"="+hard.String())
		}
	}
	if len(limited) > 0 {
		mu.Unlock()
		return release, apierrors.NewForbidden(gr, obj.GetMetadata().GetName(), fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
			ProjectQuotaName, strings.Join(requested, ","), strings.Join(usedText, ","), strings.Join(limited, ",")))
	}
	return mu.Unlock, nil
}

// limitsFor returns the limits of the first quota that selects the project of namespace (nil: none applies).
func (q *ProjectQuotas) limitsFor(ctx context.Context, r Reader, namespace string) (map[string]resource.Quantity, error) {
	ns, err := r.Get(ctx, namespaces, "", namespace)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("get namespace %s: %w", namespace, err))
	}
	name := ns.GetMetadata().GetLabels()[labelProjectName]
	if name == "" {
		return nil, nil
	}
	obj, err := r.Get(ctx, projects, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("get project %s: %w", name, err))
	}
	p := obj.(*corev1beta1.Project)
	if p.GetSpec().GetNamespace() != namespace {
		return nil, nil // a label naming a project that does not own the namespace
	}
	set := labels.Set(p.GetMetadata().GetLabels())
	for _, pq := range q.quotas {
		if pq.selector.Matches(set) {
			return pq.hard, nil
		}
	}
	return nil, nil
}

// lock returns the mutex serializing the limited creates of gr in namespace (striped: unrelated pairs may share one).
func (q *ProjectQuotas) lock(gr schema.GroupResource, namespace string) *sync.Mutex {
	h := fnv.New32a()
	for _, s := range []string{gr.Group, gr.Resource, namespace} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return &q.locks[h.Sum32()%uint32(len(q.locks))]
}
