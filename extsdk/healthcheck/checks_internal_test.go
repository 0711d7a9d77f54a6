package healthcheck

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

func TestDeploymentHealth(t *testing.T) {
	three := int32(3)
	deploy := func(gen, observed int64, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Name, d.Generation, d.Spec.Replicas = "d", gen, &three
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			AvailableReplicas: available, Conditions: conds}
		return d
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want extensionsv1alpha1.ConditionStatus
	}{
		{"ready", deploy(2, 2, 3, 3, 3), extensionsv1alpha1.ConditionTrue},
		{"generation not observed", deploy(3, 2, 3, 3, 3), extensionsv1alpha1.ConditionProgressing},
		{"rolling out", deploy(2, 2, 3, 1, 3), extensionsv1alpha1.ConditionProgressing},
		{"old replicas terminating", deploy(2, 2, 4, 3, 3), extensionsv1alpha1.ConditionProgressing},
		{"not available", deploy(2, 2, 3, 3, 2), extensionsv1alpha1.ConditionProgressing},
		{"deadline exceeded", deploy(2, 2, 3, 1, 2, appsv1.DeploymentCondition{
			Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}), extensionsv1alpha1.ConditionFalse},
	} {
		if got := deploymentHealth(tc.d); got.Status != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got.Status, got.Detail, tc.want)
		}
	}
}
