package gardenlet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/gardenlet"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
	gcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts (test/agenttest): a hub that streams the seed's Gardenlet and
// authorizes the agent's writes to it, the package's shared seed kube-apiserver with kube-controller-manager's
// deployment controller (which makes the agent chart's ReplicaSets and pods), and real Helm releases of the
// trellis-agent chart. The seed has no kubelet: what a kubelet reports of the new pod (ready, or waiting for an image
// it cannot pull) the tests write into the pod's status themselves, a stand-in named as such.
func TestMain(m *testing.M) { agenttest.Main(m) }

const releaseName = "trellis-agent"

type env struct {
	t    *testing.T
	ns   string // the release's namespace
	h    *agenttest.Hub
	s    *agenttest.Seed
	rels *helmrelease.Manager
	gl   seedmanagementv1alpha1.GardenletServiceClient
	kube kubernetes.Interface
}

// start installs revision 1 of the agent's release in namespace ns (each test its own: the seed is shared) and runs
// the controller.
func start(t *testing.T, ns string) *env {
	t.Helper()
	releaseNS := ns
	h := agenttest.StartHub(t)
	s := h.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	s.CreateNamespace(t, releaseNS)
	rels, err := helmrelease.New(helmrelease.Config{REST: s.Cluster.Config})
	if err != nil {
		t.Fatal(err)
	}
	chart, err := charts.Archive(charts.TrellisAgent)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(s.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Revision 1, as `helm install` of the chart makes it.
	if _, _, err := rels.Apply(context.Background(), chart, releaseName, releaseNS, map[string]any{
		"image":     map[string]any{"repository": "local.trellis.dev/trellis-agent", "tag": "v1", "pullPolicy": "Never"},
		"hub":       map[string]any{"address": "hub.example.com:8444", "caBundle": string(h.CA)},
		"bootstrap": map[string]any{"token": "abcdef.0123456789abcdef"},
		"config":    map[string]any{"seedConfig": map[string]any{"metadata": map[string]any{"name": "local"}}},
	}); err != nil {
		t.Fatal(err)
	}
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return gardenlet.New(gardenlet.Config{Base: s.Base(100*time.Millisecond, 2*time.Second), Releases: rels, Chart: chart,
			Release: gardenlet.Release{Name: releaseName, Namespace: releaseNS}, PodName: "the-running-agent",
			Poll: 200 * time.Millisecond, FailureGrace: time.Millisecond, RolloutTimeout: time.Hour})
	})
	return &env{t: t, ns: ns, h: h, s: s, rels: rels, gl: seedmanagementv1alpha1.NewGardenletServiceClient(h.Admin), kube: kube}
}

// createGardenlet creates garden/local asking for the agent image with tag, as Gardener's API takes it.
func (e *env) createGardenlet(tag string) {
	e.t.Helper()
	ref := "local.trellis.dev/trellis-agent:" + tag
	if _, err := e.gl.Create(context.Background(), &seedmanagementv1alpha1.Gardenlet{
		ApiVersion: "seedmanagement.gardener.cloud/v1alpha1", Kind: "Gardenlet",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "local"},
		Spec: &seedmanagementv1alpha1.GardenletSpec{
			Deployment: &seedmanagementv1alpha1.GardenletSelfDeployment{
				Image: &seedmanagementv1alpha1.Image{Ref: &ref, PullPolicy: ptr("IfNotPresent")},
				Helm:  &seedmanagementv1alpha1.GardenletHelm{OciRepository: &gcorev1.OCIRepository{Ref: ptr("registry.example.com/charts/trellis-agent:v0")}},
			},
			Config: &metav1.RawExtension{Raw: []byte(`{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration"}`)},
		},
	}); err != nil {
		e.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// waitGardenlet waits until the Gardenlet's GardenletReconciled condition is status (and its message holds want).
func (e *env) waitGardenlet(status, want string) *seedmanagementv1alpha1.Gardenlet {
	e.t.Helper()
	var g *seedmanagementv1alpha1.Gardenlet
	agenttest.Eventually(e.t, "GardenletReconciled "+status+" ("+want+")", func() bool {
		var err error
		if g, err = e.gl.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "local"}); err != nil {
			return false
		}
		for _, c := range g.GetStatus().GetConditions() {
			if c.GetType() == gardenlet.ConditionReconciled && c.GetStatus() == status && strings.Contains(c.GetMessage(), want) {
				return true
			}
		}
		return false
	})
	return g
}

// release waits for the deployed revision version and returns it.
func (e *env) release(version int) *release.Release {
	e.t.Helper()
	var rel *release.Release
	agenttest.Eventually(e.t, "release revision", func() bool {
		var err error
		rel, err = e.rels.Get(context.Background(), releaseName, e.ns)
		return err == nil && rel != nil && rel.Version == version
	})
	return rel
}

// observed fails the test unless the Gardenlet's status observed its generation.
func observed(t *testing.T, g *seedmanagementv1alpha1.Gardenlet) {
	t.Helper()
	if g.GetStatus().GetObservedGeneration() != g.GetMetadata().GetGeneration() {
		t.Errorf("observedGeneration %d, want %d", g.GetStatus().GetObservedGeneration(), g.GetMetadata().GetGeneration())
	}
}

func imageTag(rel *release.Release) any {
	return rel.Config["image"].(map[string]any)["tag"]
}

// reportPod writes, as the kubelet of the pod's node would, the status of the agent's pod with image: ready, or its
// container waiting for reason.
func (e *env) reportPod(image string, ready bool, reason string) {
	e.t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	agenttest.Eventually(e.t, "a pod of "+image, func() bool {
		var pods corev1.PodList
		if err := e.s.Client.List(ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/instance": releaseName}); err != nil {
			return false
		}
		for i := range pods.Items {
			if pods.Items[i].Spec.Containers[0].Image == image && pods.Items[i].DeletionTimestamp == nil {
				pod = &pods.Items[i]
				return true
			}
		}
		return false
	})
	st := corev1.ConditionFalse
	cs := corev1.ContainerStatus{Name: "trellis-agent", Image: image}
	if ready {
		st = corev1.ConditionTrue
		cs.Ready = true
		cs.State.Running = &corev1.ContainerStateRunning{}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: "image " + image + " not found"}
	}
	pod.Status.Phase = corev1.PodPending
	if ready {
		pod.Status.Phase = corev1.PodRunning
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}, {Type: corev1.ContainersReady, Status: st}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(ctx, pod, kmetav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A new image whose pod cannot pull it: the controller upgrades the release, sees the new pod wait for
// ErrImagePull, applies revision 1's values again and says why in the Gardenlet's status; that generation is not
// tried again, until gardener.cloud/operation=reconcile asks (and is removed).
func TestBrokenImageRollsBack(t *testing.T) {
	e := start(t, "agent-rollback")
	e.createGardenlet("broken")
	rel := e.release(2)
	if imageTag(rel) != "broken" {
		t.Fatalf("revision 2 has image tag %v, want broken", imageTag(rel))
	}
	e.reportPod("local.trellis.dev/trellis-agent:broken", false, "ErrImagePull")
	g := e.waitGardenlet("False", "ErrImagePull")
	msg := g.GetStatus().GetConditions()[0].GetMessage()
	if !strings.Contains(msg, "rolled back to the values of revision 1") {
		t.Errorf("condition message %q: want the rollback named", msg)
	}
	observed(t, g)
	rel = e.release(3)
	if imageTag(rel) != "v1" {
		t.Fatalf("revision 3 has image tag %v, want v1 (rolled back)", imageTag(rel))
	}
	// gardener.cloud/operation=reconcile tries the generation again.
	if _, err := e.gl.Patch(context.Background(), &metav1.PatchRequest{Namespace: "garden", Name: "local", PatchType: "application/merge-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`{"metadata":{"annotations":{"gardener.cloud/operation":"reconcile"}}}`)}}); err != nil {
		t.Fatal(err)
	}
	rel = e.release(4)
	if imageTag(rel) != "broken" {
		t.Fatalf("revision 4 has image tag %v, want broken (reconcile retries)", imageTag(rel))
	}
	agenttest.Eventually(t, "the operation annotation removed", func() bool {
		g, err := e.gl.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: "local"})
		return err == nil && g.GetMetadata().GetAnnotations()[gardenlet.AnnotationOperation] == ""
	})
}

// A new image whose pod becomes ready: the release is upgraded and, once the Deployment rolled out, the Gardenlet
// is reconciled at its generation.
func TestImageChangeUpgrades(t *testing.T) {
	e := start(t, "agent-upgrade")
	e.createGardenlet("v2")
	rel := e.release(2)
	if imageTag(rel) != "v2" {
		t.Fatalf("revision 2 has image tag %v, want v2", imageTag(rel))
	}
	e.waitGardenlet("Progressing", "")
	e.reportPod("local.trellis.dev/trellis-agent:v2", true, "")
	g := e.waitGardenlet("True", "revision 2")
	observed(t, g)
}
