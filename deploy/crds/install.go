package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
// an older version installed.
func Install(ctx context.Context, c apiextensionsclientset.Interface) error {
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
func Apply(ctx context.Context, c apiextensionsclientset.Interface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	api := c.ApiextensionsV1().CustomResourceDefinitions()
	force := true
	for _, crd := range crds {
		body, err := applyBody(crd)
		if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		if _, err := api.Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
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
func waitEstablished(ctx context.Context, c apiextensionsclientset.Interface, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
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
