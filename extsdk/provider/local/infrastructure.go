package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// APIVersion is the apiVersion of provider-local's providerStatus and state documents.
const APIVersion = "local.provider.extensions.gardener.cloud/v1alpha1"

// Infrastructure outputs.
const (
	// InfrastructureConfigMap records the "network" of a shoot in its namespace.
	InfrastructureConfigMap = "infrastructure-local"
	// DefaultNodesCIDR is status.nodesCIDR when the shoot's spec.networking.nodes is empty.
	DefaultNodesCIDR = "10.250.0.0/16"
)

// InfrastructureStatus is the Infrastructure's status.providerStatus, which the agent forwards to ControlPlane and
// Worker as spec.infrastructureProviderStatus.
type InfrastructureStatus struct {
	// APIVersion is APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is "InfrastructureStatus".
	Kind string `json:"kind"`
	// Network is the network made for the shoot.
	Network InfrastructureNetwork `json:"network"`
}

// InfrastructureNetwork is the "network" of a shoot.
type InfrastructureNetwork struct {
	// ID is generated once and kept across migration (status.state).
	ID string `json:"id"`
	// NodesCIDR is the node network.
	NodesCIDR string `json:"nodesCIDR"`
}

// InfrastructureState is the Infrastructure's status.state: what Restore needs to make the same network again.
type InfrastructureState struct {
	// APIVersion is APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is "InfrastructureState".
	Kind string `json:"kind"`
	// NetworkID is the network's id.
	NetworkID string `json:"networkID"`
}

// infrastructure makes a shoot's "network": an id, generated once and kept in status.state, and a ConfigMap that
// records it. Restore is Reconcile: both reuse the id in status.state, which the agent restores from the ShootState.
type infrastructure struct{ seed }

func (a *infrastructure) Reconcile(ctx context.Context, log logr.Logger, infra *extensionsv1alpha1.Infrastructure, cluster *extsdk.Cluster) error {
	id := ""
	if infra.Status.State != nil && len(infra.Status.State.Raw) > 0 {
		var st InfrastructureState
		if err := json.Unmarshal(infra.Status.State.Raw, &st); err != nil {
			return fmt.Errorf("status.state is not an InfrastructureState: %w", err)
		}
		id = st.NetworkID
	}
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = "net-" + hex.EncodeToString(b)
		log.Info("Creating network", "id", id)
	}
	// The state is set first: the reconciler writes it even if what follows fails, and the retry reuses the id.
	state, err := json.Marshal(InfrastructureState{APIVersion: APIVersion, Kind: "InfrastructureState", NetworkID: id})
	if err != nil {
		return err
	}
	infra.Status.State = &runtime.RawExtension{Raw: state}

	networking := shootOf(cluster).GetSpec().GetNetworking()
	nodes := networking.GetNodes()
	if nodes == "" {
		nodes = DefaultNodesCIDR
	}
	cm := corev1ac.ConfigMap(InfrastructureConfigMap, infra.Namespace).
		WithLabels(ownerLabels("infrastructure", infra.Name)).
		WithData(map[string]string{"networkID": id, "nodesCIDR": nodes, "region": infra.Spec.Region,
			"secretRef": infra.Spec.SecretRef.Name})
	if err := a.apply(ctx, cm); err != nil {
		return fmt.Errorf("record the network: %w", err)
	}

	status, err := json.Marshal(InfrastructureStatus{APIVersion: APIVersion, Kind: "InfrastructureStatus",
		Network: InfrastructureNetwork{ID: id, NodesCIDR: nodes}})
	if err != nil {
		return err
	}
	infra.Status.ProviderStatus = &runtime.RawExtension{Raw: status}
	infra.Status.NodesCIDR = &nodes
	infra.Status.Networking = &extensionsv1alpha1.InfrastructureStatusNetworking{Nodes: []string{nodes}}
	if p := networking.GetPods(); p != "" {
		infra.Status.Networking.Pods = []string{p}
	}
	if s := networking.GetServices(); s != "" {
		infra.Status.Networking.Services = []string{s}
	}
	return nil
}

func (a *infrastructure) Delete(ctx context.Context, log logr.Logger, infra *extensionsv1alpha1.Infrastructure, _ *extsdk.Cluster) error {
	log.Info("Deleting network")
	return a.remove(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: InfrastructureConfigMap, Namespace: infra.Namespace}})
}

// Migrate removes the ConfigMap and keeps status.state, from which the destination seed restores the same network.
func (a *infrastructure) Migrate(ctx context.Context, _ logr.Logger, infra *extensionsv1alpha1.Infrastructure, _ *extsdk.Cluster) error {
	return a.remove(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: InfrastructureConfigMap, Namespace: infra.Namespace}})
}

// parseInfrastructureStatus reads the Infrastructure's providerStatus that ControlPlane and Worker get as
// spec.infrastructureProviderStatus.
func parseInfrastructureStatus(raw *runtime.RawExtension) (*InfrastructureStatus, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, errors.New("spec.infrastructureProviderStatus is missing: the Infrastructure's status.providerStatus " +
			"must be passed on (is the Infrastructure reconciled?)")
	}
	st := &InfrastructureStatus{}
	if err := json.Unmarshal(raw.Raw, st); err != nil {
		return nil, fmt.Errorf("spec.infrastructureProviderStatus: %w", err)
	}
	if st.Kind != "InfrastructureStatus" || st.Network.ID == "" {
		return nil, fmt.Errorf("spec.infrastructureProviderStatus is not a %s InfrastructureStatus with a network id", APIVersion)
	}
	return st, nil
}
