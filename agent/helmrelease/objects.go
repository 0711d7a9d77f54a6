package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Helm's ownership metadata: every object of a release carries it, and an object that exists without it (or with
// another release's) is not taken over.
const (
	managedByLabel         = "app.kubernetes.io/managed-by"
	managedByHelm          = "Helm"
	releaseNameAnnotation  = "meta.helm.sh/release-name"
	releaseNsAnnotation    = "meta.helm.sh/release-namespace"
	resourcePolicyAnnotion = "helm.sh/resource-policy"
	resourcePolicyKeep     = "keep"
)

// fieldManager is the field manager of the agent's server-side applies of release objects.
const fieldManager = "trellis-agent"

// object is one object of a release's manifest and where it lives in the seed.
type object struct {
	obj     *unstructured.Unstructured
	mapping *meta.RESTMapping
}

func (o object) key() string {
	return o.mapping.GroupVersionKind.GroupKind().String() + " " + o.obj.GetNamespace() + "/" + o.obj.GetName()
}

func (o object) String() string {
	if o.obj.GetNamespace() == "" {
		return fmt.Sprintf("%s %q", o.obj.GetKind(), o.obj.GetName())
	}
	return fmt.Sprintf("%s %q in namespace %q", o.obj.GetKind(), o.obj.GetName(), o.obj.GetNamespace())
}

// parseDocuments decodes the YAML documents of a manifest (kept in their order), expanding v1 Lists.
func parseDocuments(manifests []releaseutil.Manifest) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, m := range manifests {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(m.Content), &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(doc) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: doc}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// sortedManifest splits a stored release manifest into its documents in ordering.
func sortedManifest(manifest string, ordering releaseutil.KindSortOrder) ([]releaseutil.Manifest, error) {
	_, manifests, err := releaseutil.SortManifests(releaseutil.SplitManifests(manifest), nil, ordering)
	return manifests, err
}

// objects maps decoded documents to the seed's resources; a namespaced object without a namespace is put in
// namespace.
func (op *operation) objects(docs []*unstructured.Unstructured) ([]object, error) {
	out := make([]object, 0, len(docs))
	for _, u := range docs {
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, fmt.Errorf("object %q has no apiVersion or kind", u.GetName())
		}
		mapping, err := op.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("resource mapping not found for name: %q namespace: %q from %q: %w; ensure CRDs are installed first", u.GetName(), u.GetNamespace(), gvk.String(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(op.namespace)
			}
		} else {
			u.SetNamespace("")
		}
		out = append(out, object{obj: u, mapping: mapping})
	}
	return out, nil
}

func (op *operation) resource(o object) dynamic.ResourceInterface {
	if o.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return op.dynamic.Resource(o.mapping.Resource).Namespace(o.obj.GetNamespace())
	}
	return op.dynamic.Resource(o.mapping.Resource)
}

// owned tells whether live carries the ownership metadata of this release, and if not, why.
func (op *operation) owned(live *unstructured.Unstructured) error {
	var problems []string
	check := func(what string, m map[string]string, key, want string) {
		switch got, ok := m[key]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s validation error: missing key %q: must be set to %q", what, key, want))
		case got != want:
			problems = append(problems, fmt.Sprintf("%s validation error: key %q must equal %q: current value is %q", what, key, want, got))
		}
	}
	check("label", live.GetLabels(), managedByLabel, managedByHelm)
	check("annotation", live.GetAnnotations(), releaseNameAnnotation, op.name)
	check("annotation", live.GetAnnotations(), releaseNsAnnotation, op.namespace)
	if len(problems) > 0 {
		return errors.New("invalid ownership metadata; " + strings.Join(problems, "; "))
	}
	return nil
}

// checkOwnership fails when an object that exists but is not in known (the keys of the objects of the revision being
// replaced) lacks this release's ownership metadata: Helm does not adopt objects of others, and neither does this.
func (op *operation) checkOwnership(ctx context.Context, objs []object, known map[string]bool) error {
	for _, o := range objs {
		if known[o.key()] {
			continue
		}
		live, err := op.resource(o).Get(ctx, o.obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading %s: %w", o, err)
		}
		if err := op.owned(live); err != nil {
			return fmt.Errorf("rendered manifests contain a resource that already exists. Unable to continue: %s exists and cannot be imported into the current release: %w", o, err)
		}
	}
	return nil
}

// deploy writes objects to the seed in their order with server-side apply (fieldManager, forced), each with this
// release's ownership metadata.
func (op *operation) deploy(ctx context.Context, objs []object) error {
	force := true
	for _, o := range objs {
		labels := o.obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[managedByLabel] = managedByHelm
		o.obj.SetLabels(labels)
		annotations := o.obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[releaseNameAnnotation] = op.name
		annotations[releaseNsAnnotation] = op.namespace
		o.obj.SetAnnotations(annotations)
		data, err := o.obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o, err)
		}
		if _, err := op.resource(o).Patch(ctx, o.obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
			return fmt.Errorf("applying %s: %w", o, err)
		}
	}
	return nil
}

// remove deletes objects (in their order, in the background: dependents go with the garbage collector), except those
// kept: with keepLive, the live object's helm.sh/resource-policy: keep keeps it (an upgrade's dropped objects);
// otherwise the manifest's (an uninstall). Objects already gone are fine. Every failure is returned.
func (op *operation) remove(ctx context.Context, objs []object, keepLive bool) error {
	var errs []error
	background := metav1.DeletePropagationBackground
	for _, o := range objs {
		annotations := o.obj.GetAnnotations()
		if keepLive {
			live, err := op.resource(o).Get(ctx, o.obj.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				errs = append(errs, fmt.Errorf("reading %s: %w", o, err))
				continue
			}
			annotations = live.GetAnnotations()
		}
		if annotations[resourcePolicyAnnotion] == resourcePolicyKeep {
			op.log.Info("keeping object of the release", "object", o.key(), "reason", resourcePolicyAnnotion)
			continue
		}
		err := op.resource(o).Delete(ctx, o.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", o, err))
		}
	}
	return errors.Join(errs...)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the CRDs of a chart's crds/ directories that do not exist yet (existing ones are left alone,
// as Helm leaves them) and waits until every one is established, so that the chart's objects of those kinds map.
func (op *operation) installCRDs(ctx context.Context, crds []chart.CRD) error {
	var names []string
	for _, crd := range crds {
		docs, err := parseDocuments(crdManifests(crd))
		if err != nil {
			return fmt.Errorf("CRD file %s: %w", crd.Filename, err)
		}
		for _, u := range docs {
			if u.GroupVersionKind().GroupKind().String() != "CustomResourceDefinition.apiextensions.k8s.io" {
				return fmt.Errorf("CRD file %s holds a %s", crd.Filename, u.GetKind())
			}
			_, err := op.dynamic.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
			switch {
			case apierrors.IsAlreadyExists(err):
				op.log.Info("CRD exists; not updating it", "crd", u.GetName())
			case err != nil:
				return fmt.Errorf("creating CRD %s from %s: %w", u.GetName(), crd.Filename, err)
			default:
				names = append(names, u.GetName())
			}
		}
	}
	for _, name := range names {
		for {
			u, err := op.dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("waiting for CRD %s: %w", name, err)
			}
			if crdEstablished(u) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for CRD %s to be established: %w", name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if len(names) > 0 {
		op.resetMapper()
	}
	return nil
}

func crdManifests(crd chart.CRD) []releaseutil.Manifest {
	var out []releaseutil.Manifest
	for _, doc := range releaseutil.SplitManifests(string(crd.File.Data)) {
		out = append(out, releaseutil.Manifest{Name: crd.Filename, Content: doc})
	}
	return out
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
