package local

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// recorder serves kinds whose local stand-in only records what was asked (Network, ContainerRuntime, Extension): a
// ConfigMap <kind>-<name> in the object's namespace. It is seed-local: Migrate deletes it.
type recorder[T extensionsv1alpha1.Object] struct {
	seed
	kind string // lowercase
	// data returns what the ConfigMap records.
	data func(obj T) (map[string]string, error)
	// status, when set, sets the kind's status fields.
	status func(obj T)
}

// RecordConfigMapName is the ConfigMap in which provider-local records a Network, ContainerRuntime or Extension
// (kind in lowercase).
func RecordConfigMapName(kind, name string) string {
	return shorten(kind+"-"+name, 253)
}

func (a *recorder[T]) Reconcile(ctx context.Context, _ logr.Logger, obj T, _ *extsdk.Cluster) error {
	data, err := a.data(obj)
	if err != nil {
		return err
	}
	data["type"] = obj.GetExtensionSpec().Type
	if pc := obj.GetExtensionSpec().ProviderConfig; pc != nil && len(pc.Raw) > 0 {
		data["providerConfig"] = string(pc.Raw)
	}
	cm := corev1ac.ConfigMap(RecordConfigMapName(a.kind, obj.GetName()), obj.GetNamespace()).
		WithLabels(ownerLabels(a.kind, obj.GetName())).WithData(data)
	if err := a.apply(ctx, cm); err != nil {
		return fmt.Errorf("record the %s: %w", a.kind, err)
	}
	if a.status != nil {
		a.status(obj)
	}
	return nil
}

func (a *recorder[T]) Delete(ctx context.Context, _ logr.Logger, obj T, _ *extsdk.Cluster) error {
	return a.remove(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordConfigMapName(a.kind, obj.GetName()), Namespace: obj.GetNamespace()}})
}

// Migrate deletes the ConfigMap; the destination seed records the object again.
func (a *recorder[T]) Migrate(ctx context.Context, log logr.Logger, obj T, cluster *extsdk.Cluster) error {
	return a.Delete(ctx, log, obj, cluster)
}

func newNetwork(s seed) *recorder[*extensionsv1alpha1.Network] {
	return &recorder[*extensionsv1alpha1.Network]{seed: s, kind: "network",
		data: func(n *extensionsv1alpha1.Network) (map[string]string, error) {
			families := make([]string, 0, len(n.Spec.IPFamilies))
			for _, f := range n.Spec.IPFamilies {
				families = append(families, string(f))
			}
			return map[string]string{"podCIDR": n.Spec.PodCIDR, "serviceCIDR": n.Spec.ServiceCIDR,
				"ipFamilies": strings.Join(families, ",")}, nil
		},
		status: func(n *extensionsv1alpha1.Network) {
			n.Status.IPFamilies = n.Spec.IPFamilies
			if len(n.Status.IPFamilies) == 0 {
				n.Status.IPFamilies = []extensionsv1alpha1.IPFamily{extensionsv1alpha1.IPFamilyIPv4}
			}
		},
	}
}

func newContainerRuntime(s seed) *recorder[*extensionsv1alpha1.ContainerRuntime] {
	return &recorder[*extensionsv1alpha1.ContainerRuntime]{seed: s, kind: "containerruntime",
		data: func(cr *extensionsv1alpha1.ContainerRuntime) (map[string]string, error) {
			selector, err := json.Marshal(cr.Spec.WorkerPool.Selector)
			if err != nil {
				return nil, err
			}
			return map[string]string{"binaryPath": cr.Spec.BinaryPath, "workerPool": cr.Spec.WorkerPool.Name,
				"selector": string(selector)}, nil
		},
	}
}

func newExtension(s seed) *recorder[*extensionsv1alpha1.Extension] {
	return &recorder[*extensionsv1alpha1.Extension]{seed: s, kind: "extension",
		data: func(*extensionsv1alpha1.Extension) (map[string]string, error) { return map[string]string{}, nil },
	}
}
