package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// FieldManager is the server-side apply field manager of the CRDs Trellis installs.
	FieldManager = "trellis"
	// EstablishTimeout bounds the wait for the CRDs to be Established, after they were applied.
	EstablishTimeout = time.Minute
	// pollInterval is how often the CRDs' conditions are read while waiting.
	pollInterval = 100 * time.Millisecond
)

// Install applies every CRD of CRDs() and waits until each is Established. It is idempotent and upgrades CRDs that
// an older version installed. c needs no kinds in its scheme (it is used with unstructured objects, which a client
// with a cache also reads from the API server).
func Install(ctx context.Context, c client.Client) error {
	all, err := CRDs()
	if err != nil {
		return err
	}
	return Apply(ctx, c, all)
}

// Apply server-side applies the given CRDs, forcing ownership of the fields they set (labels and annotations are
// merged key by key; fields another manager added elsewhere stay), then waits until each is Established, at most
// EstablishTimeout. The error names the CRD that failed: a rejected apply, names not accepted (a conflict with
// another CRD), or not established in time.
//
// Established says the CRD's names are served. When an already established CRD is updated, Apply returns at once
// and kube-apiserver starts validating and pruning with the new schema moments later.
func Apply(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		body, err := applyBody(crd)
		if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		if err := c.Patch(ctx, crdObject(crd.Name), client.RawPatch(types.ApplyPatchType, body),
			client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, EstablishTimeout)
	defer cancel()
	for _, crd := range crds {
		if err := waitEstablished(waitCtx, c, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

// crdObject is the CRD named name as an unstructured object, to apply to or read into.
func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	u.SetName(name)
	return u
}

// applyBody is the apply configuration of crd: only what Trellis means to own (name, labels, annotations, spec).
// Leaving out status, creationTimestamp and the like keeps the apply free of fields no manager should claim.
func applyBody(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	type meta struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	return json.Marshal(struct {
		APIVersion string                                       `json:"apiVersion"`
		Kind       string                                       `json:"kind"`
		Metadata   meta                                         `json:"metadata"`
		Spec       apiextensionsv1.CustomResourceDefinitionSpec `json:"spec"`
	}{
		APIVersion: apiextensionsv1.SchemeGroupVersion.String(),
		Kind:       "CustomResourceDefinition",
		Metadata:   meta{Name: crd.Name, Labels: crd.Labels, Annotations: crd.Annotations},
		Spec:       crd.Spec,
	})
}

// waitEstablished polls the CRD until its Established condition is True. A NamesAccepted condition of False fails at
// once: the CRD will never be established.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		u := crdObject(name)
		if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			last = err.Error()
			return false, nil
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return false, fmt.Errorf("decode CRD %s: %w", name, err)
		}
		for _, cond := range crd.Status.Conditions {
			switch {
			case cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue:
				return true, nil
			case cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("names not accepted: %s: %s", cond.Reason, cond.Message)
			}
		}
		last = "condition Established is not True yet"
		return false, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("CRD %s not established: %w (last: %s)", name, err, last)
	}
	return fmt.Errorf("CRD %s not established: %w", name, err)
}
