package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// SkipHealthCheckAnnotation on a live object, set to "true", leaves it out of Health (Gardener's resource manager
// honours the same annotation).
const SkipHealthCheckAnnotation = "resources.gardener.cloud/skip-health-check"

// Health is what Health found about the workloads of a release.
type Health struct {
	// Healthy is true when no workload has a problem.
	Healthy bool
	// Progressing is true while a workload's rollout is not complete.
	Progressing bool
	// Problems say, naming the object, why a workload is unhealthy or that it is missing, in manifest order.
	Problems []string
	// Rollouts say, naming the object, which rollouts are not complete, in manifest order.
	Rollouts []string
}

// Health reads the Deployments, StatefulSets and DaemonSets (apps/v1) of rel's manifest live from the seed and judges
// them with Gardener's rules (gardener/gardener pkg/utils/kubernetes/health: CheckDeployment, CheckStatefulSet,
// CheckDaemonSet; IsDeploymentProgressing, IsStatefulSetProgressing, IsDaemonSetProgressing as the resource manager's
// progressing check uses them): a workload whose controller has not observed its generation, or that is not
// available, is a problem; one missing is a problem; one whose rollout is not complete is progressing. Objects
// annotated SkipHealthCheckAnnotation=true are left out. Errors are only failures to read; a workload's state is
// never an error.
func (m *Manager) Health(ctx context.Context, rel *release.Release) (Health, error) {
	if rel == nil {
		return Health{}, errors.New("health: no release")
	}
	workloads, err := workloadsOf(rel)
	if err != nil {
		return Health{}, err
	}
	var h Health
	for _, w := range workloads {
		var (
			obj         metav1.Object
			problem     error
			progressing bool
			rollout     string
			err         error
		)
		switch w.Kind {
		case "Deployment":
			var d *appsv1.Deployment
			if d, err = m.apps.Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
				obj, problem = d, checkDeployment(d)
				progressing, rollout = deploymentProgressing(d)
			}
		case "StatefulSet":
			var s *appsv1.StatefulSet
			if s, err = m.apps.StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
				obj, problem = s, checkStatefulSet(s)
				progressing, rollout = statefulSetProgressing(s)
			}
		case "DaemonSet":
			var d *appsv1.DaemonSet
			if d, err = m.apps.DaemonSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
				obj, problem = d, checkDaemonSet(d)
				progressing, rollout = daemonSetProgressing(d)
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			h.Problems = append(h.Problems, fmt.Sprintf("%s %q is missing", w.Kind, w.key()))
			continue
		case err != nil:
			return Health{}, fmt.Errorf("health of release %s/%s: reading %s %s: %w", rel.Namespace, rel.Name, w.Kind, w.key(), err)
		case obj.GetAnnotations()[SkipHealthCheckAnnotation] == "true":
			continue
		}
		if problem != nil {
			h.Problems = append(h.Problems, fmt.Sprintf("%s %q is unhealthy: %v", w.Kind, w.key(), problem))
		}
		if progressing {
			h.Rollouts = append(h.Rollouts, fmt.Sprintf("%s %q is progressing: %s", w.Kind, w.key(), rollout))
		}
	}
	h.Healthy = len(h.Problems) == 0
	h.Progressing = len(h.Rollouts) > 0
	return h, nil
}

// workload is an apps/v1 workload of a release's manifest.
type workload struct {
	Kind            string
	name, namespace string
}

func (w workload) key() string { return w.namespace + "/" + w.name }

// workloadsOf returns the apps/v1 Deployments, StatefulSets and DaemonSets of rel's manifest, in manifest order;
// objects without a namespace are in the release's (Helm installs them there).
func workloadsOf(rel *release.Release) ([]workload, error) {
	docs := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []workload
	for _, k := range keys {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(docs[k]), &head); err != nil {
			return nil, fmt.Errorf("health of release %s/%s: reading its manifest: %w", rel.Namespace, rel.Name, err)
		}
		if head.APIVersion != appsv1.SchemeGroupVersion.String() || head.Metadata.Name == "" {
			continue
		}
		switch head.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
			ns := head.Metadata.Namespace
			if ns == "" {
				ns = rel.Namespace
			}
			out = append(out, workload{Kind: head.Kind, name: head.Metadata.Name, namespace: ns})
		}
	}
	return out, nil
}

// The checks below follow gardener/gardener pkg/utils/kubernetes/health; their messages are Gardener's.

// checkDeployment: the controller observed the current generation, Available is True, Progressing (if present) is
// True and ReplicaFailure (if present) is False.
func checkDeployment(d *appsv1.Deployment) error {
	if d.Status.ObservedGeneration < d.Generation {
		return fmt.Errorf("observed generation outdated (%d/%d)", d.Status.ObservedGeneration, d.Generation)
	}
	available := deploymentCondition(d, appsv1.DeploymentAvailable)
	if available == nil {
		return fmt.Errorf("condition %q is missing", appsv1.DeploymentAvailable)
	}
	if err := checkCondition(available, corev1.ConditionTrue); err != nil {
		return err
	}
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil {
		if err := checkCondition(c, corev1.ConditionTrue); err != nil {
			return err
		}
	}
	if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil {
		if err := checkCondition(c, corev1.ConditionFalse); err != nil {
			return err
		}
	}
	return nil
}

// deploymentProgressing: rolled out only when the generation is observed and Progressing is True with reason
// NewReplicaSetAvailable.
func deploymentProgressing(d *appsv1.Deployment) (bool, string) {
	if d.Status.ObservedGeneration < d.Generation {
		return true, fmt.Sprintf("observed generation outdated (%d/%d)", d.Status.ObservedGeneration, d.Generation)
	}
	c := deploymentCondition(d, appsv1.DeploymentProgressing)
	if c == nil {
		return true, fmt.Sprintf("condition %q is missing", appsv1.DeploymentProgressing)
	}
	if c.Status != corev1.ConditionTrue || c.Reason != "NewReplicaSetAvailable" {
		return true, c.Message
	}
	return false, ""
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func checkCondition(c *appsv1.DeploymentCondition, want corev1.ConditionStatus) error {
	if c.Status != want {
		return fmt.Errorf("condition %q has invalid status %s (expected %s) due to %s: %s", c.Type, c.Status, want, c.Reason, c.Message)
	}
	return nil
}

// checkStatefulSet: the controller observed the current generation and enough replicas are ready.
func checkStatefulSet(s *appsv1.StatefulSet) error {
	if s.Status.ObservedGeneration < s.Generation {
		return fmt.Errorf("observed generation outdated (%d/%d)", s.Status.ObservedGeneration, s.Generation)
	}
	if replicas := replicasOf(s.Spec.Replicas); s.Status.ReadyReplicas < replicas {
		return fmt.Errorf("not enough ready replicas (%d/%d)", s.Status.ReadyReplicas, replicas)
	}
	return nil
}

func statefulSetProgressing(s *appsv1.StatefulSet) (bool, string) {
	if s.Status.ObservedGeneration < s.Generation {
		return true, fmt.Sprintf("observed generation outdated (%d/%d)", s.Status.ObservedGeneration, s.Generation)
	}
	if replicas := replicasOf(s.Spec.Replicas); s.Status.UpdatedReplicas < replicas {
		return true, fmt.Sprintf("%d of %d replica(s) have been updated", s.Status.UpdatedReplicas, replicas)
	}
	return false, ""
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// checkDaemonSet: the controller observed the current generation, every desired pod is scheduled, none is
// misscheduled, and no more pods are unavailable than the rolling update allows while it runs (none after).
func checkDaemonSet(d *appsv1.DaemonSet) error {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return fmt.Errorf("observed generation outdated (%d/%d)", st.ObservedGeneration, d.Generation)
	}
	if st.CurrentNumberScheduled < st.DesiredNumberScheduled {
		return fmt.Errorf("not enough scheduled pods (%d/%d)", st.CurrentNumberScheduled, st.DesiredNumberScheduled)
	}
	if st.NumberMisscheduled > 0 {
		return fmt.Errorf("misscheduled pods found (%d)", st.NumberMisscheduled)
	}
	if st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
		if maxUnavailable := daemonSetMaxUnavailable(d); int(st.NumberUnavailable) > maxUnavailable {
			return fmt.Errorf("too many unavailable pods found (%d/%d, only max. %d unavailable pods allowed)", st.NumberUnavailable, st.CurrentNumberScheduled, maxUnavailable)
		}
	} else if st.NumberUnavailable > 0 {
		return fmt.Errorf("too many unavailable pods found (%d/%d)", st.NumberUnavailable, st.CurrentNumberScheduled)
	}
	return nil
}

func daemonSetMaxUnavailable(d *appsv1.DaemonSet) int {
	if d.Status.DesiredNumberScheduled == 0 || d.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return 0
	}
	ru := d.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(d.Status.DesiredNumberScheduled), false)
	if err != nil {
		return 0
	}
	return n
}

func daemonSetProgressing(d *appsv1.DaemonSet) (bool, string) {
	if d.Status.ObservedGeneration < d.Generation {
		return true, fmt.Sprintf("observed generation outdated (%d/%d)", d.Status.ObservedGeneration, d.Generation)
	}
	if d.Status.UpdatedNumberScheduled < d.Status.DesiredNumberScheduled {
		return true, fmt.Sprintf("%d of %d replica(s) have been updated", d.Status.UpdatedNumberScheduled, d.Status.DesiredNumberScheduled)
	}
	return false, ""
}
