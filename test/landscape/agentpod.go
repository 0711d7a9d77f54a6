package landscape

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/test/localnode"
)

// With Config.Node (unless Config.AgentProcess), each seed's agent runs as the pod of the trellis-agent chart
// (deploy/charts/trellis-agent), as an operator installs it, from an image of BinDir's trellis-agent that every
// node imports: release AgentRelease in namespace garden of the seed, installed with Helm by the landscape. The hub
// stays a process of the landscape on loopback; the agent's pod reaches it at the host's end of its node's link
// (the slot's HostIP), where the landscape forwards the hub's agent port, and verifies it by that address, which
// the hub's serving certificate names (every slot's HostIP is passed as --host).

// AgentRelease is the Helm release, and the Deployment, of a seed's agent pod, in namespace AgentNamespace.
const (
	AgentRelease   = "trellis-agent"
	AgentNamespace = "garden"
)

// agentPods reports whether the seeds' agents run as pods.
func (l *Landscape) agentPods() bool { return l.cfg.Node && !l.cfg.AgentProcess }

// slotHosts are --host flags of the hub for the HostIP of every node slot.
func slotHosts() []string {
	var args []string
	for i := range localnode.Slots {
		args = append(args, "--host", localnode.SlotAt(i).HostIP.String())
	}
	return args
}

// agentPodValues are the chart's values for the agent of s: the landscape's image, never pulled; the hub at
// hubAddr with the hub's CA; the bootstrap token when one was made; and the agent's configuration as the host
// process would have it (agentConfiguration, Config.AgentMutate), minus what the chart sets itself.
func (l *Landscape) agentPodValues(s *Seed, repository, tag, hubAddr string) (map[string]any, error) {
	c := l.agentConfiguration(s)
	if l.cfg.AgentMutate != nil {
		l.cfg.AgentMutate(s.Name, c)
	}
	js, err := jsonv2.Marshal(c)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(js, &cfg); err != nil {
		return nil, err
	}
	for _, k := range []string{"apiVersion", "kind", "seedClientConnection", "server"} {
		delete(cfg, k)
	}
	// The image vector is a file of the landscape: the pod gets its content, mounted where the chart points the
	// configuration (values.imageVector).
	var imageVector string
	if path := c.Controllers.Shoot.ControlPlane.ImageVector; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("the shoot control plane's image vector: %w", err)
		}
		imageVector = string(b)
		if cp, ok := dig(cfg, "controllers", "shoot", "controlPlane"); ok {
			delete(cp, "imageVector")
		}
	}
	hub, _ := cfg["hubClientConnection"].(map[string]any)
	delete(cfg, "hubClientConnection")
	if v, ok := hub["kubeconfigValidity"]; ok {
		cfg["hubClientConnection"] = map[string]any{"kubeconfigValidity": v}
	}
	ca, err := os.ReadFile(l.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the hub's CA: %w", err)
	}
	values := map[string]any{
		"image":  map[string]any{"repository": repository, "tag": tag, "pullPolicy": "Never"},
		"hub":    map[string]any{"address": hubAddr, "caBundle": string(ca)},
		"config": cfg,
		// A machine shared with other landscapes: small requests.
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}},
	}
	if imageVector != "" {
		values["imageVector"] = imageVector
	}
	// The chart's default is the agent's: garden/gardenlet-kubeconfig.
	if ref := c.HubClientConnection.KubeconfigSecret; ref.Name != "" {
		values["kubeconfigSecret"] = map[string]any{"namespace": ref.Namespace, "name": ref.Name}
	}
	if tok, err := os.ReadFile(s.tokenFile); err == nil {
		values["bootstrap"] = map[string]any{"token": strings.TrimSpace(string(tok))}
	}
	return values, nil
}

// dig returns the map at path in m.
func dig(m map[string]any, path ...string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

// nodeSlot is the slot of the seed's node (node.json of localseed).
func nodeSlot(s *Seed) (*localnode.Slot, error) {
	var info struct {
		Slot int `json:"slot"`
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, "node.json"))
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		return nil, fmt.Errorf("seed %s: node.json: %w", s.Name, err)
	}
	return localnode.SlotAt(info.Slot), nil
}

// startAgentPod installs (or upgrades) the agent's chart in the seed and waits until its Deployment is rolled out
// with the pod ready (its /readyz: the hub link up, the seed's state received, the controllers running) and the hub
// reports the Seed GardenletReady.
func (l *Landscape) startAgentPod(ctx context.Context, s *Seed, freshHub bool) error {
	if err := l.prepareAgent(ctx, s, freshHub); err != nil {
		return err
	}
	slot, err := nodeSlot(s)
	if err != nil {
		return err
	}
	if s.hubForwarder == nil {
		if s.hubForwarder, err = localnode.StartForwarder(l.GRPCAddr, slot.HostIP.String()); err != nil {
			return fmt.Errorf("seed %s: forward the hub's agent port to its node: %w", s.Name, err)
		}
	}
	values, err := l.agentPodValues(s, l.agentImage.repository, l.agentImage.tag, s.hubForwarder.Addr())
	if err != nil {
		return fmt.Errorf("seed %s: agent chart values: %w", s.Name, err)
	}
	archive, err := charts.Archive(charts.TrellisAgent)
	if err != nil {
		return err
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: s.Config, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if _, _, err := releases.Apply(ctx, archive, AgentRelease, AgentNamespace, values); err != nil {
		return fmt.Errorf("seed %s: install the agent's chart: %w", s.Name, err)
	}
	s.AgentPod = true
	var available bool
	var ready *condition
	err = l.waitFor(ctx, s.seed, "its agent's pod ready (Seed "+GardenletReady+")", func(ctx context.Context) (bool, error) {
		d, err := s.Client.AppsV1().Deployments(AgentNamespace).Get(ctx, AgentRelease, kmetav1.GetOptions{})
		if available = err == nil && localnode.DeploymentAvailable(d); !available {
			return false, nil
		}
		if ready, err = l.hubc.seedCondition(ctx, s.Name, GardenletReady); err != nil || ready == nil {
			return false, err
		}
		return ready.Status == "True", nil
	})
	if err != nil {
		// What the wait saw last, and the agent's own account, for the failure's reader.
		err = fmt.Errorf("%w\nthe agent's Deployment available: %v; the Seed's %s: %+v", err, available, GardenletReady, ready)
		lctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if logs, lerr := s.AgentPodLogs(lctx); lerr == nil {
			err = fmt.Errorf("%w\nthe agent's pod:\n%s", err, TailOf(logs, 8<<10))
		}
	}
	return err
}

// TailOf is the last n bytes of s, for logs in failure messages.
func TailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// agentImageRef is the agent's image in pod mode.
type agentImageRef struct{ repository, tag string }

// AgentImage is the agent's image that the seeds' nodes and their shoots' machines import (pod mode: Config.Node
// without AgentProcess), as a chart's image values (repository, tag) name it; empty without agent pods. A
// ManagedSeed that asks for it (spec.gardenlet.deployment.image, pullPolicy Never) runs this build's agent in its
// shoot's machines.
func (l *Landscape) AgentImage() (repository, tag string) {
	return l.agentImage.repository, l.agentImage.tag
}

// AgentPodLogs returns the logs of the seed's agent pod (its current container), for failing tests.
func (s *Seed) AgentPodLogs(ctx context.Context) (string, error) {
	pods, err := s.Client.CoreV1().Pods(AgentNamespace).List(ctx, kmetav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + AgentRelease})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, p := range pods.Items {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := s.Client.CoreV1().Pods(AgentNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("logs of pod %s: %w", p.Name, err)
		}
		fmt.Fprintf(&out, "== pod %s (%s) ==\n%s", p.Name, p.Status.Phase, b)
	}
	return out.String(), nil
}
