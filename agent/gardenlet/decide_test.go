package gardenlet

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

func deployedValues() map[string]any {
	return map[string]any{
		"image":  map[string]any{"repository": "local.trellis.dev/trellis-agent", "tag": "v1", "pullPolicy": "Never"},
		"hub":    map[string]any{"address": "10.0.0.1:9443"},
		"config": map[string]any{"logLevel": "info", "seedConfig": map[string]any{"metadata": map[string]any{"name": "local"}}},
	}
}

func gardenlet(gen int64, spec *seedmanagementv1alpha1.GardenletSpec) *seedmanagementv1alpha1.Gardenlet {
	return &seedmanagementv1alpha1.Gardenlet{
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "local", Generation: gen},
		Spec:     spec,
	}
}

func imageSpec(img *seedmanagementv1alpha1.Image) *seedmanagementv1alpha1.GardenletSpec {
	return &seedmanagementv1alpha1.GardenletSpec{Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{Image: img}}
}

func failedStatus(gen int64) *seedmanagementv1alpha1.GardenletStatus {
	return &seedmanagementv1alpha1.GardenletStatus{ObservedGeneration: ptr(gen), Conditions: []*metav1.Condition{
		{Type: ConditionReconciled, Status: "False", Reason: ReasonReconcileError, Message: "rolled back"}}}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	sameImage := imageSpec(&seedmanagementv1alpha1.Image{Tag: ptr("v1")})
	newImage := imageSpec(&seedmanagementv1alpha1.Image{Ref: ptr("local.trellis.dev/trellis-agent:v2")})
	for _, tc := range []struct {
		name       string
		g          *seedmanagementv1alpha1.Gardenlet
		want       Action
		removeOp   bool
		wantImage  string
		redeployed bool
	}{
		{name: "empty spec keeps", g: gardenlet(1, nil), want: Keep},
		{name: "same image keeps", g: gardenlet(2, sameImage), want: Keep},
		{name: "new image upgrades", g: gardenlet(2, newImage), want: Upgrade, wantImage: "local.trellis.dev/trellis-agent:v2"},
		{name: "failed generation holds", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(2, newImage)
			g.Status = failedStatus(2)
			return g
		}(), want: Hold},
		{name: "newer generation than the failed one upgrades", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(3, newImage)
			g.Status = failedStatus(2)
			return g
		}(), want: Upgrade, wantImage: "local.trellis.dev/trellis-agent:v2"},
		{name: "reconcile retries a failed generation", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(2, newImage)
			g.Status = failedStatus(2)
			g.Metadata.Annotations = map[string]string{AnnotationOperation: OperationReconcile}
			return g
		}(), want: Upgrade, removeOp: true, wantImage: "local.trellis.dev/trellis-agent:v2"},
		{name: "reconcile without change keeps", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(2, sameImage)
			g.Metadata.Annotations = map[string]string{AnnotationOperation: OperationReconcile}
			return g
		}(), want: Keep, removeOp: true},
		{name: "force-redeploy rolls the pod", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(2, sameImage)
			g.Metadata.Annotations = map[string]string{AnnotationOperation: OperationForceRedeploy}
			return g
		}(), want: Upgrade, removeOp: true, redeployed: true},
		{name: "another operation is not ours", g: func() *seedmanagementv1alpha1.Gardenlet {
			g := gardenlet(2, sameImage)
			g.Metadata.Annotations = map[string]string{AnnotationOperation: "renew-kubeconfig"}
			return g
		}(), want: Keep},
		{name: "config change upgrades", g: gardenlet(2, &seedmanagementv1alpha1.GardenletSpec{
			Config: &metav1.RawExtension{Raw: []byte(`{"apiVersion":"agent.trellis.dev/v1alpha1","kind":"AgentConfiguration","logLevel":"debug"}`)}}),
			want: Upgrade},
		{name: "config equal to the deployed keeps", g: gardenlet(2, &seedmanagementv1alpha1.GardenletSpec{
			Config: &metav1.RawExtension{Raw: []byte(`{"kind":"AgentConfiguration","logLevel":"info"}`)}}), want: Keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deployed := deployedValues()
			d, err := Decide(tc.g, deployed, now)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tc.want || d.RemoveOperation != tc.removeOp {
				t.Fatalf("decision %v removeOperation %v, want %v %v", d.Action, d.RemoveOperation, tc.want, tc.removeOp)
			}
			if tc.wantImage != "" {
				img := d.Values["image"].(map[string]any)
				if got := img["repository"].(string) + ":" + img["tag"].(string); got != tc.wantImage || img["pullPolicy"] != "Never" {
					t.Errorf("image %s (pullPolicy %v), want %s (pullPolicy kept)", got, img["pullPolicy"], tc.wantImage)
				}
			}
			ann, _ := d.Values["podAnnotations"].(map[string]any)
			if got := ann[AnnotationRedeployedAt] != nil; got != tc.redeployed {
				t.Errorf("pod annotation %s set: %v, want %v", AnnotationRedeployedAt, got, tc.redeployed)
			}
			if deployed["image"].(map[string]any)["tag"] != "v1" {
				t.Error("Decide changed the deployed values")
			}
		})
	}
}

// A Gardenlet as Gardener's API defaults it (two replicas, a history of two, IfNotPresent, probes, an OCI chart,
// a GardenletConfiguration with a shoot capacity) changes only what the agent's chart and configuration have.
func TestDesiredValuesMergesConfig(t *testing.T) {
	spec := &seedmanagementv1alpha1.GardenletSpec{
		Config: &metav1.RawExtension{Raw: []byte(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",` +
			`"logLevel":"debug","heartbeatIntervalSeconds":3,"resources":{"capacity":{"shoots":250}}}`)},
		Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{PodLabels: map[string]string{"a": "b"}, ImageVectorOverwrite: ptr("images: []"),
			ReplicaCount: ptr(int32(2)), RevisionHistoryLimit: ptr(int32(2)), EnableHealthProbes: ptr(true),
			Image: &seedmanagementv1alpha1.Image{PullPolicy: ptr("IfNotPresent")},
			Helm:  &seedmanagementv1alpha1.GardenletHelm{OciRepository: &gcorev1.OCIRepository{Ref: ptr("registry.example.com/charts/gardenlet:v1")}}}}
	v, err := DesiredValues(spec, deployedValues())
	if err != nil {
		t.Fatal(err)
	}
	cfg := v["config"].(map[string]any)
	if cfg["logLevel"] != "debug" || cfg["heartbeatIntervalSeconds"] != float64(3) || cfg["seedConfig"] == nil || cfg["kind"] != nil ||
		cfg["resources"] != nil {
		t.Errorf("config %v: want logLevel and heartbeat replaced, seedConfig kept, kind and resources left out", cfg)
	}
	if v["replicaCount"] != nil || v["image"].(map[string]any)["pullPolicy"] != "IfNotPresent" || v["image"].(map[string]any)["tag"] != "v1" {
		t.Errorf("replicaCount %v image %v: want no replicaCount, the pull policy taken and the tag kept", v["replicaCount"], v["image"])
	}
	if v["podLabels"].(map[string]any)["a"] != "b" || v["imageVector"] != "images: []" {
		t.Errorf("podLabels %v imageVector %v", v["podLabels"], v["imageVector"])
	}
}

func TestDesiredValuesRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  *seedmanagementv1alpha1.GardenletSpec
		field string
	}{
		{"digest", imageSpec(&seedmanagementv1alpha1.Image{Ref: ptr("r/agent@sha256:abc")}), "spec.deployment.image.ref"},
		{"no tag", imageSpec(&seedmanagementv1alpha1.Image{Ref: ptr("host:5000/agent")}), "spec.deployment.image.ref"},
		{"pull policy", imageSpec(&seedmanagementv1alpha1.Image{PullPolicy: ptr("Sometimes")}), "spec.deployment.image.pullPolicy"},
		{"volumes", &seedmanagementv1alpha1.GardenletSpec{Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{
			AdditionalVolumes: []*metav1.RawExtension{{Raw: []byte(`{}`)}}}}, "spec.deployment.additionalVolumes"},
		{"env", &seedmanagementv1alpha1.GardenletSpec{Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{
			Env: []*seedmanagementv1alpha1.EnvVar{{}}}}, "spec.deployment.env"},
		{"config not an object", &seedmanagementv1alpha1.GardenletSpec{Config: &metav1.RawExtension{Raw: []byte(`[1]`)}}, "spec.config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DesiredValues(tc.spec, deployedValues())
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}

func pod(name string, ready bool, waiting string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: kmetav1.ObjectMeta{Name: name}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if waiting != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trellis-agent",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting, Message: "pulling failed"}}}}
	}
	return p
}

func TestFailure(t *testing.T) {
	since := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	grace, timeout := 20*time.Second, 5*time.Minute
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		age  time.Duration
		want string
	}{
		{"all ready", []corev1.Pod{pod("old", true, ""), pod("new", true, "")}, time.Minute, ""},
		{"image missing within grace", []corev1.Pod{pod("old", true, ""), pod("new", false, "ErrImagePull")}, 5 * time.Second, ""},
		{"image missing after grace", []corev1.Pod{pod("old", true, ""), pod("new", false, "ImagePullBackOff")}, time.Minute,
			"pod new: container trellis-agent waiting: ImagePullBackOff: pulling failed"},
		{"crash loop", []corev1.Pod{pod("new", false, "CrashLoopBackOff")}, time.Minute, "CrashLoopBackOff"},
		{"starting is not fatal", []corev1.Pod{pod("new", false, "ContainerCreating")}, time.Minute, ""},
		{"not ready past the timeout", []corev1.Pod{pod("new", false, "")}, 6 * time.Minute, "pod new not ready"},
		{"self is left out", []corev1.Pod{pod("self", false, "CrashLoopBackOff")}, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Failure(tc.pods, "self", since, since.Add(tc.age), grace, timeout)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Failure = %q, want %q", got, tc.want)
			}
		})
	}
}
