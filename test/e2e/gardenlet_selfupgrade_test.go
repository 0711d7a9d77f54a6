package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/timescale"
)

// gardenletStatus is the part of a Gardenlet the test reads.
type gardenletStatus struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Conditions         []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

// TestGardenletSelfUpgrade runs a landscape whose seed's agent is its chart's pod on the seed's node, and a second
// image of the same agent built here under another tag, imported into the node. The seed's Gardenlet asks for that
// image: the agent upgrades its own release in place (a new pod with the new image replaces it, its session with the
// hub is back, GardenletReconciled True at the Gardenlet's generation). Then the Gardenlet asks for an image the
// node does not have: the new pod waits for the image, and the running agent rolls the release back and says why.
func TestGardenletSelfUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	bin := landscapeBinaries(t)
	imgDir := t.TempDir()
	const newTag = "selfupgrade"
	archive, repo, err := landscape.BinaryImageAs(filepath.Join(bin, "trellis-agent"), imgDir, newTag)
	if err != nil {
		t.Fatal(err)
	}
	localnode.TakeTurn(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(8*time.Minute))
	defer cancel()
	l := startLandscape(ctx, t, landscape.Config{Node: true, NodeImages: []string{archive}})
	seed := l.Seed(landscape.DefaultSeedName)
	r := newREST(t, l)
	const path = "/apis/seedmanagement.gardener.cloud/v1alpha1/namespaces/garden/gardenlets"
	gardenlet := map[string]any{
		"apiVersion": "seedmanagement.gardener.cloud/v1alpha1", "kind": "Gardenlet",
		"metadata": map[string]any{"namespace": "garden", "name": seed.Name},
		"spec": map[string]any{
			"deployment": map[string]any{
				"image": map[string]any{"ref": repo + ":" + newTag, "pullPolicy": "Never"},
				"helm":  map[string]any{"ociRepository": map[string]any{"ref": "registry.example.com/charts/trellis-agent:v0"}},
			},
			"config": map[string]any{"apiVersion": "gardenlet.config.gardener.cloud/v1alpha1", "kind": "GardenletConfiguration"},
		},
	}
	r.must(http.StatusCreated, http.MethodPost, path, gardenlet)

	// waitCondition waits for GardenletReconciled with status whose message holds want, at the Gardenlet's generation.
	waitCondition := func(status, want string) gardenletStatus {
		t.Helper()
		var g gardenletStatus
		deadline := time.Now().Add(timescale.Scale(4 * time.Minute))
		for {
			if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, path+"/"+seed.Name, nil), &g); err != nil {
				t.Fatal(err)
			}
			for _, c := range g.Status.Conditions {
				if c.Type == "GardenletReconciled" && c.Status == status && strings.Contains(c.Message, want) &&
					g.Status.ObservedGeneration == g.Metadata.Generation {
					return g
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GardenletReconciled %s (%q) not reached: %+v", status, want, g.Status)
			}
			time.Sleep(time.Second)
		}
	}
	// readyPods returns the ready, ready pods of the agent's Deployment by image.
	readyPods := func() map[string]string {
		pods, err := seed.Client.CoreV1().Pods(landscape.AgentNamespace).List(ctx, kmetav1.ListOptions{
			LabelSelector: "app.kubernetes.io/instance=" + landscape.AgentRelease})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					out[p.Name] = p.Spec.Containers[0].Image
				}
			}
		}
		return out
	}

	g := waitCondition("True", "rolled out")
	pods := readyPods()
	if len(pods) != 1 {
		t.Fatalf("ready agent pods %v, want one", pods)
	}
	for name, image := range pods {
		if image != repo+":"+newTag {
			t.Fatalf("agent pod %s runs %s, want %s:%s", name, image, repo, newTag)
		}
	}
	t.Logf("upgraded in place to %s:%s (generation %d)", repo, newTag, g.Metadata.Generation)
	// The new agent's session is up: the Seed's status names the new pod as its gardenlet (seed care), and the hub
	// reports GardenletReady.
	var newPod string
	for name := range pods {
		newPod = name
	}
	var s struct {
		Status struct {
			Gardener struct {
				Name string `json:"name"`
			} `json:"gardener"`
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	deadline := time.Now().Add(timescale.Scale(2 * time.Minute))
	for {
		if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/"+seed.Name, nil), &s); err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, c := range s.Status.Conditions {
			ready = ready || (c.Type == landscape.GardenletReady && c.Status == "True")
		}
		if ready && s.Status.Gardener.Name == newPod {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %s: not reported by the new agent %s with GardenletReady True: %+v", seed.Name, newPod, s.Status)
		}
		time.Sleep(time.Second)
	}

	// An image the node does not have (pullPolicy Never: ErrImageNeverPull) rolls back.
	r.must(http.StatusOK, http.MethodPatch, path+"/"+seed.Name, map[string]any{"spec": map[string]any{"deployment": map[string]any{
		"image": map[string]any{"ref": repo + ":missing"}}}})
	g = waitCondition("False", "rolled back")
	msg := g.Status.Conditions[0].Message
	if !strings.Contains(msg, "ErrImageNeverPull") {
		t.Errorf("condition message %q: want the new pod's waiting reason", msg)
	}
	t.Logf("rolled back: %s", msg)
	deadline = time.Now().Add(timescale.Scale(2 * time.Minute))
	for {
		d, err := seed.Client.AppsV1().Deployments(landscape.AgentNamespace).Get(ctx, landscape.AgentRelease, kmetav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Spec.Containers[0].Image == repo+":"+newTag && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 &&
			d.Status.Replicas == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's Deployment not back at %s:%s: %+v", repo, newTag, d.Status)
		}
		time.Sleep(time.Second)
	}
}
