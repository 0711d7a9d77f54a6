package helmrelease

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The seed's kube-controller-manager runs the deployment and replica set controllers but no node exists: a
// Deployment with a replica never becomes available, one scaled to zero does.
func TestHealthDeployment(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	ch := deploymentChart(t)

	rel, _, err := m.Apply(ctx, ch, "workload", ns, map[string]any{"replicas": 1})
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%q", ns+"/workload")
	eventually(t, 30*time.Second, func() string {
		h, err := m.Health(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		if h.Healthy || len(h.Problems) != 1 || !strings.HasPrefix(h.Problems[0], "Deployment "+key+" is unhealthy: ") ||
			!strings.Contains(h.Problems[0], `condition "Available" has invalid status False`) {
			return fmt.Sprintf("want unhealthy (Available False), got %+v", h)
		}
		if !h.Progressing || len(h.Rollouts) != 1 || !strings.HasPrefix(h.Rollouts[0], "Deployment "+key+" is progressing") {
			return fmt.Sprintf("want progressing, got %+v", h)
		}
		return ""
	})

	rel, changed, err := m.Apply(ctx, ch, "workload", ns, map[string]any{"replicas": 0})
	if err != nil || !changed {
		t.Fatalf("scale to 0: changed %v, %v", changed, err)
	}
	eventually(t, 30*time.Second, func() string {
		h, err := m.Health(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Healthy || h.Progressing || len(h.Problems)+len(h.Rollouts) != 0 {
			return fmt.Sprintf("want healthy and rolled out, got %+v", h)
		}
		return ""
	})

	// A workload deleted behind Helm's back is missing.
	if err := s.Client.AppsV1().Deployments(ns).Delete(ctx, "workload", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := m.Health(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if h.Healthy || len(h.Problems) != 1 || h.Problems[0] != "Deployment "+key+" is missing" {
		t.Errorf("after deletion: %+v", h)
	}
}

// No StatefulSet controller runs in the seed, so a StatefulSet's generation is never observed; the skip annotation
// leaves it out.
func TestHealthStatefulSetAndSkip(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	ch := buildChart(t, "sts", chartFiles{
		"Chart.yaml": chartYAML("sts", "1.0.0"),
		"templates/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 1
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: main
        image: registry.invalid/none:1
`,
	})
	rel, _, err := m.Apply(ctx, ch, "sts", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Health(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%q", ns+"/db")
	want := Health{
		Problems: []string{"StatefulSet " + key + " is unhealthy: observed generation outdated (0/1)"},
		Rollouts: []string{"StatefulSet " + key + " is progressing: observed generation outdated (0/1)"},
	}
	want.Progressing = true
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("Health = %+v\nwant %+v", h, want)
	}

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, SkipHealthCheckAnnotation)
	if _, err := s.Client.AppsV1().StatefulSets(ns).Patch(ctx, "db", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := m.Health(ctx, rel); err != nil || !h.Healthy || h.Progressing {
		t.Errorf("Health with the skip annotation = %+v, %v; want healthy", h, err)
	}
	if _, err := m.Health(ctx, nil); err == nil {
		t.Error("Health(nil) did not fail")
	}
}

func TestWorkloadsOf(t *testing.T) {
	rel := &release.Release{Name: "r", Namespace: "home", Manifest: `---
# Source: x/templates/a.yaml
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ds
  namespace: elsewhere
---
# Source: x/templates/b.yaml
apiVersion: v1
kind: Service
metadata:
  name: svc
---
apiVersion: extensions/v1beta1
kind: Deployment
metadata:
  name: old
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: dep
`}
	got, err := workloadsOf(rel)
	if err != nil {
		t.Fatal(err)
	}
	want := []workload{{Kind: "DaemonSet", name: "ds", namespace: "elsewhere"}, {Kind: "Deployment", name: "dep", namespace: "home"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workloadsOf = %v, want %v", got, want)
	}
}

// The checks on objects the seed cannot produce (no DaemonSet controller, no nodes) follow Gardener's cases.
func TestChecks(t *testing.T) {
	maxUnavailable := intstr.FromInt32(1)
	rolling := appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable}}
	ds := func(gen int64, st appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DaemonSetSpec{UpdateStrategy: rolling}, Status: st}
	}
	for _, tc := range []struct {
		name        string
		ds          *appsv1.DaemonSet
		problem     string
		progressing bool
	}{
		{"healthy", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3}), "", false},
		{"generation", ds(2, appsv1.DaemonSetStatus{ObservedGeneration: 1}), "observed generation outdated (1/2)", true},
		{"unscheduled", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 3}), "not enough scheduled pods (2/3)", false},
		{"misscheduled", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberMisscheduled: 1}), "misscheduled pods found (1)", false},
		{"rolling within budget", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 2, NumberUnavailable: 1}), "", true},
		{"rolling over budget", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberUnavailable: 2}), "too many unavailable pods found (2/3, only max. 1 unavailable pods allowed)", true},
		{"rolled out but unavailable", ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberUnavailable: 1}), "too many unavailable pods found (1/3)", false},
	} {
		err := checkDaemonSet(tc.ds)
		if got := fmt.Sprint(err); (tc.problem == "" && err != nil) || (tc.problem != "" && got != tc.problem) {
			t.Errorf("DaemonSet %s: checkDaemonSet = %v, want %q", tc.name, err, tc.problem)
		}
		if p, _ := daemonSetProgressing(tc.ds); p != tc.progressing {
			t.Errorf("DaemonSet %s: progressing = %v, want %v", tc.name, p, tc.progressing)
		}
	}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"},
	}}}
	if err := checkDeployment(dep); fmt.Sprint(err) != `condition "ReplicaFailure" has invalid status True (expected False) due to FailedCreate: quota` {
		t.Errorf("checkDeployment(ReplicaFailure) = %v", err)
	}
	dep.Status.Conditions = dep.Status.Conditions[1:2]
	if err := checkDeployment(dep); fmt.Sprint(err) != `condition "Available" is missing` {
		t.Errorf("checkDeployment(no Available) = %v", err)
	}
	if p, _ := deploymentProgressing(dep); p {
		t.Error("a Deployment with NewReplicaSetAvailable is progressing")
	}
}
