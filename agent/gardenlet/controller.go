package gardenlet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/hubobject"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Defaults of a Config.
const (
	DefaultPoll           = 5 * time.Second
	DefaultFailureGrace   = 20 * time.Second
	DefaultRolloutTimeout = 5 * time.Minute
	DefaultRetryMin       = time.Second //nolint:revive // time-naming: Min is minimum (beside RetryMax), not minutes
	DefaultRetryMax       = time.Minute
)

// Namespace is where a seed's Gardenlet lives on the hub (named after the seed).
const Namespace = "garden"

// Release names the agent's own Helm release in the seed.
type Release struct {
	Name, Namespace string
}

// Config configures the Gardenlet controller.
type Config struct {
	controller.Base
	// Releases reads, upgrades and judges the agent's release.
	Releases *helmrelease.Manager
	// Release is the agent's own release (the chart's env TRELLIS_AGENT_RELEASE_NAME and
	// TRELLIS_AGENT_RELEASE_NAMESPACE). Required.
	Release Release
	// Chart is the archive of the trellis-agent chart the agent carries (deploy/charts, embedded): upgrades and
	// rollbacks apply it.
	Chart []byte
	// PodName is the running agent's pod (the chart's env POD_NAME), left out when new pods are judged.
	PodName string
	// Poll is how often a rollout is looked at (default 5 s).
	Poll time.Duration
	// FailureGrace is how long after an upgrade a new pod's fatal waiting reason (ErrImagePull, CrashLoopBackOff,
	// ...) is tolerated before the upgrade is rolled back (default 20 s).
	FailureGrace time.Duration
	// RolloutTimeout is how long a new pod may stay not ready before the upgrade is rolled back (default 5 min).
	RolloutTimeout time.Duration
}

// Controller upgrades the agent's own release after its Gardenlet. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	cfg     Config
	objects *hubobject.Client[*seedmanagementv1alpha1.Gardenlet]
	api     seedmanagementv1alpha1.GardenletServiceClient

	mu sync.Mutex
	// upgraded is the revision this agent last upgraded to and when, for judging its rollout.
	upgraded struct {
		revision int
		at       time.Time
	}
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	var missing []string
	if cfg.Releases == nil {
		missing = append(missing, "Releases")
	}
	if cfg.Release.Name == "" || cfg.Release.Namespace == "" {
		missing = append(missing, "Release")
	}
	if len(cfg.Chart) == 0 {
		missing = append(missing, "Chart")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("gardenlet controller: required fields are not set: %s", strings.Join(missing, ", "))
	}
	if err := cfg.Complete("gardenlet", controller.Defaults{Workers: 1, RetryMin: DefaultRetryMin, RetryMax: DefaultRetryMax,
		SyncPeriod: time.Minute}); err != nil {
		return nil, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.FailureGrace <= 0 {
		cfg.FailureGrace = DefaultFailureGrace
	}
	if cfg.RolloutTimeout <= 0 {
		cfg.RolloutTimeout = DefaultRolloutTimeout
	}
	api := seedmanagementv1alpha1.NewGardenletServiceClient(cfg.Hub)
	c := &Controller{cfg: cfg, api: api,
		objects: hubobject.NewClient[*seedmanagementv1alpha1.Gardenlet](api, cfg.HubTimeout, cfg.Now)}
	mine := func(g *seedmanagementv1alpha1.Gardenlet) bool {
		return g.GetMetadata().GetNamespace() == Namespace && g.GetMetadata().GetName() == cfg.SeedName
	}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "gardenlet", Sync: c.sync, Watches: []controller.Watch{
		{Resource: resources.Gardenlets, Keys: controller.Own(mine), Forget: c.objects.Forget},
	}})
	return c, nil
}

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*seedmanagementv1alpha1.Gardenlet](c.cfg.Cache, resources.Gardenlets, ns, name)
	g, ok := c.objects.Pick(key, cached, ok)
	if !ok {
		return 0, nil
	}
	now := c.cfg.Now()
	rel, err := c.cfg.Releases.Get(ctx, c.cfg.Release.Name, c.cfg.Release.Namespace)
	if err != nil {
		return 0, err
	}
	if rel == nil {
		return 0, c.finish(ctx, g, "False", ReasonReconcileError, fmt.Sprintf("release %s/%s has no deployed revision: "+
			"the agent upgrades itself only when it runs from its chart", c.cfg.Release.Namespace, c.cfg.Release.Name), true)
	}
	d, err := Decide(g, rel.Config, now)
	if err != nil {
		return 0, c.finish(ctx, g, "False", ReasonReconcileError, err.Error(), true)
	}
	switch d.Action {
	case Hold:
		return 0, nil
	case Upgrade:
		return c.upgrade(ctx, g, rel, d)
	}
	if d.RemoveOperation {
		if g, err = c.removeOperation(ctx, g); err != nil {
			return 0, err
		}
	}
	return c.judge(ctx, g, rel, now)
}

// upgrade applies the desired values with the chart the agent carries.
func (c *Controller) upgrade(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet, rel *release.Release, d Decision) (time.Duration, error) {
	msg := fmt.Sprintf("upgrading release %s/%s from revision %d", rel.Namespace, rel.Name, rel.Version)
	g, err := c.setStatus(ctx, g, "Progressing", ReasonReconciling, msg, false)
	if err != nil {
		return 0, err
	}
	c.cfg.Log.Info("upgrading the agent's release", "release", rel.Namespace+"/"+rel.Name, "from", rel.Version)
	next, _, err := c.cfg.Releases.Apply(ctx, c.cfg.Chart, rel.Name, rel.Namespace, d.Values)
	if err != nil {
		// The release is failed or unchanged; the previous revision's objects stay, so only the status says why.
		return 0, c.finish(ctx, g, "False", ReasonReconcileError, fmt.Sprintf("upgrade of release %s/%s failed: %v",
			rel.Namespace, rel.Name, err), d.RemoveOperation)
	}
	c.mu.Lock()
	c.upgraded.revision, c.upgraded.at = next.Version, c.cfg.Now()
	c.mu.Unlock()
	if d.RemoveOperation {
		if _, err := c.removeOperation(ctx, g); err != nil {
			return 0, err
		}
	}
	return c.cfg.Poll, nil
}

// judge reports the deployed release's rollout: reconciled once healthy, rolled back once a new pod failed.
func (c *Controller) judge(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet, rel *release.Release, now time.Time) (time.Duration, error) {
	h, err := c.cfg.Releases.Health(ctx, rel)
	if err != nil {
		return 0, err
	}
	if h.Healthy && !h.Progressing {
		return 0, c.finish(ctx, g, "True", ReasonReconciled, fmt.Sprintf("release %s/%s is deployed at revision %d and rolled out",
			rel.Namespace, rel.Name, rel.Version), false)
	}
	since := c.rolloutStart(rel)
	var pods corev1.PodList
	if err := c.cfg.Seed.List(ctx, &pods, client.InNamespace(rel.Namespace),
		client.MatchingLabels{"app.kubernetes.io/instance": rel.Name}); err != nil {
		return 0, fmt.Errorf("listing the agent's pods: %w", err)
	}
	why := Failure(pods.Items, c.cfg.PodName, since, now, c.cfg.FailureGrace, c.cfg.RolloutTimeout)
	if why == "" || rel.Version < 2 {
		msg := fmt.Sprintf("release %s/%s revision %d is rolling out: %s", rel.Namespace, rel.Name, rel.Version,
			strings.Join(append(h.Problems, h.Rollouts...), "; "))
		if why != "" {
			msg += "; " + why + " (no earlier revision to roll back to)"
		}
		if _, err := c.setStatus(ctx, g, "Progressing", ReasonReconciling, msg, false); err != nil {
			return 0, err
		}
		return c.cfg.Poll, nil
	}
	return 0, c.rollback(ctx, g, rel, why)
}

// rolloutStart is when the deployed revision's rollout began: when this agent upgraded to it, else when it was
// deployed.
func (c *Controller) rolloutStart(rel *release.Release) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.upgraded.revision == rel.Version {
		return c.upgraded.at
	}
	if rel.Info != nil {
		return rel.Info.LastDeployed.Time
	}
	return c.cfg.Now()
}

// rollback applies the values of the revision before rel again and says why in the status.
func (c *Controller) rollback(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet, rel *release.Release, why string) error {
	history, err := c.cfg.Releases.History(ctx, rel.Name, rel.Namespace)
	if err != nil {
		return err
	}
	var prev *release.Release
	for _, r := range history {
		if r.Version < rel.Version && r.Info != nil && r.Info.Status == release.StatusSuperseded {
			prev = r
		}
	}
	if prev == nil {
		return c.finish(ctx, g, "False", ReasonReconcileError, fmt.Sprintf("upgrade to revision %d failed: %s; "+
			"no earlier deployed revision to roll back to", rel.Version, why), false)
	}
	c.cfg.Log.Error("the agent's upgrade failed; rolling back", "release", rel.Namespace+"/"+rel.Name, "revision", rel.Version,
		"to", prev.Version, "why", why)
	back, _, err := c.cfg.Releases.Apply(ctx, c.cfg.Chart, rel.Name, rel.Namespace, prev.Config)
	if err != nil {
		return fmt.Errorf("rolling release %s/%s back to the values of revision %d: %w", rel.Namespace, rel.Name, prev.Version, err)
	}
	return c.finish(ctx, g, "False", ReasonReconcileError, fmt.Sprintf("upgrade to revision %d failed: %s; rolled back "+
		"to the values of revision %d (now revision %d)", rel.Version, why, prev.Version, back.Version), false)
}

// finish writes the outcome for the Gardenlet's generation, and removes the operation annotation if asked.
func (c *Controller) finish(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet, status, reason, msg string, removeOp bool) error {
	g, err := c.setStatus(ctx, g, status, reason, msg, true)
	if err != nil {
		return err
	}
	if removeOp {
		_, err = c.removeOperation(ctx, g)
	}
	return err
}

// setStatus sets GardenletReconciled, and observedGeneration to the Gardenlet's generation when observed.
func (c *Controller) setStatus(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet, status, reason, msg string, observed bool) (*seedmanagementv1alpha1.Gardenlet, error) {
	conds, changed := hubobject.SetCondition(g.GetStatus().GetConditions(), ConditionReconciled, status, reason, msg, c.cfg.Now())
	gen := g.GetMetadata().GetGeneration()
	fields := map[string]any{}
	if changed {
		list := make([]json.RawMessage, len(conds))
		for i, cond := range conds {
			list[i] = hubobject.JSON(cond)
		}
		fields["conditions"] = list
	}
	if observed && (g.GetStatus().ObservedGeneration == nil || g.GetStatus().GetObservedGeneration() != gen) {
		fields["observedGeneration"] = gen
	}
	if len(fields) == 0 {
		return g, nil
	}
	return c.objects.PatchStatus(ctx, g, fields)
}

// removeOperation removes the operation annotation from the Gardenlet (a merge patch, which the seed authorizer
// grants the agent on its own Gardenlet).
func (c *Controller) removeOperation(ctx context.Context, g *seedmanagementv1alpha1.Gardenlet) (*seedmanagementv1alpha1.Gardenlet, error) {
	if _, ok := g.GetMetadata().GetAnnotations()[AnnotationOperation]; !ok {
		return g, nil
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationOperation: nil}}})
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	out, err := c.api.Patch(ctx, &metav1.PatchRequest{Namespace: g.GetMetadata().GetNamespace(), Name: g.GetMetadata().GetName(),
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json"})
	if err != nil {
		return g, fmt.Errorf("removing the operation annotation of Gardenlet %s: %w", hubobject.Key(g), err)
	}
	c.objects.Remember(out)
	return out, nil
}
