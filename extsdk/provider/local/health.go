package local

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/healthcheck"
)

// Health checks, registered per type with the kind's controller (Add).

// controlPlaneChecks: ControlPlaneHealthy (the cloud-controller-manager's ConfigMap and server secret),
// SystemComponentsHealthy (local-path-provisioner), ObservabilityComponentsHealthy (its dashboard).
func controlPlaneChecks() []healthcheck.ConditionCheck {
	return []healthcheck.ConditionCheck{
		{ConditionType: extensionsv1alpha1.ShootControlPlaneHealthy, Check: healthcheck.ConfigMapExists(CCMConfigMap)},
		{ConditionType: extensionsv1alpha1.ShootControlPlaneHealthy, Check: healthcheck.SecretExists(CCMServerSecret)},
		{ConditionType: extensionsv1alpha1.ShootSystemComponentsHealthy, Check: healthcheck.ConfigMapExists(StorageConfigMap)},
		{ConditionType: extensionsv1alpha1.ShootObservabilityComponentsReady, Check: healthcheck.ConfigMapExists(ObservabilityConfigMap)},
	}
}

// workerChecks: EveryNodeReady (a Service for every machine of status.state), SystemComponentsHealthy
// (machine-controller-manager).
func workerChecks() []healthcheck.ConditionCheck {
	return []healthcheck.ConditionCheck{
		{ConditionType: extensionsv1alpha1.ShootEveryNodeReady, Check: healthcheck.CheckFunc(everyMachineExists)},
		{ConditionType: extensionsv1alpha1.ShootSystemComponentsHealthy, Check: healthcheck.ConfigMapExists(MCMConfigMap)},
	}
}

// networkChecks: SystemComponentsHealthy (the Network's ConfigMap).
func networkChecks() []healthcheck.ConditionCheck {
	return []healthcheck.ConditionCheck{{ConditionType: extensionsv1alpha1.ShootSystemComponentsHealthy,
		Check: healthcheck.CheckFunc(func(ctx context.Context, req healthcheck.Request) (healthcheck.Result, error) {
			return healthcheck.ConfigMapExists(RecordConfigMapName("network", req.Object.GetName())).Check(ctx, req)
		})}}
}

// everyMachineExists is EveryNodeReady of a Worker: every machine in status.state has its Service, and it is not
// being deleted.
func everyMachineExists(ctx context.Context, req healthcheck.Request) (healthcheck.Result, error) {
	w, ok := req.Object.(*extensionsv1alpha1.Worker)
	if !ok {
		return healthcheck.Result{}, fmt.Errorf("not a Worker: %T", req.Object)
	}
	st, err := workerState(w)
	if err != nil {
		return healthcheck.Result{}, err
	}
	list := &corev1.ServiceList{}
	if err := req.Reader.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingLabels(machineSelector(w.Name))); err != nil {
		return healthcheck.Result{}, fmt.Errorf("list machines: %w", err)
	}
	live := map[string]bool{}
	for _, s := range list.Items {
		live[s.Name] = s.DeletionTimestamp == nil
	}
	var missing []string
	for _, m := range st.Machines {
		if !live[m.Name] {
			missing = append(missing, m.Name)
		}
	}
	if len(missing) > 0 {
		return healthcheck.Unhealthy("%d of %d machines have no node: %s", len(missing), len(st.Machines), strings.Join(missing, ", ")), nil
	}
	return healthcheck.Healthy(), nil
}
