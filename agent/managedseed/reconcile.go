package managedseed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/shoot"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Names, as Gardener spells them, and where the agent goes in the shoot.
const (
	// FinalizerGardener guards a ManagedSeed until its Seed and the agent in its shoot are gone.
	FinalizerGardener = "gardener"
	// ConditionShootReconciled says whether the ManagedSeed's shoot has been reconciled.
	ConditionShootReconciled = "ShootReconciled"
	// ConditionSeedRegistered says whether the agent in the shoot registered the Seed and it is GardenletReady.
	ConditionSeedRegistered = "SeedRegistered"
	// ConditionGardenletReady is the Seed's condition the controller waits for.
	ConditionGardenletReady = "GardenletReady"

	// Release is the Helm release (and Deployment) of the agent in the shoot, in namespace Namespace.
	Release = "trellis-agent"
	// Namespace is the shoot's namespace of the agent, Gardener's garden namespace.
	Namespace = "garden"
	// KubeconfigSecret is the Secret in Namespace of the shoot where the new agent keeps its credentials (the
	// chart's default): once it exists, the agent needs no bootstrap token.
	KubeconfigSecret = "gardenlet-kubeconfig"
)

// Reasons of the conditions.
const (
	reasonReconciling    = "Reconciling"
	reasonReconciled     = "Reconciled"
	reasonReconcileError = "ReconcileError"
	reasonSeedRegistered = "SeedRegistered"
	reasonDeleting       = "Deleting"
	reasonDeleteError    = "DeleteError"
)

// sync decides what the ManagedSeed key needs and does it; it returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*seedmanagementv1alpha1.ManagedSeed](c.cfg.Cache, resources.ManagedSeeds, ns, name)
	ms, ok := c.objects.Pick(key, cached, ok)
	if !ok || name == c.cfg.SeedName {
		return 0, nil // gone, or the ManagedSeed of this agent's own seed: its host's to reconcile
	}
	s, _ := cache.Get[*corev1beta1.Shoot](c.cfg.Cache, resources.Shoots, ns, ms.GetSpec().GetShoot().GetName())
	if s != nil && s.GetSpec().GetSeedName() != c.cfg.SeedName && s.GetStatus().GetSeedName() != c.cfg.SeedName {
		return 0, nil
	}
	if ms.GetMetadata().GetDeletionTimestamp() != nil {
		return c.delete(ctx, ms, s)
	}
	if s == nil {
		c.setConditions(ctx, ms, cond{ConditionShootReconciled, "False", reasonReconciling,
			fmt.Sprintf("Waiting for shoot %q to be reconciled: the shoot is not known to the agent", ns+"/"+ms.GetSpec().GetShoot().GetName())})
		return 0, nil
	}
	return c.reconcile(ctx, ms, s)
}

// cond is a condition to set.
type cond struct{ typ, status, reason, message string }

// reconcile deploys the agent into a reconciled shoot and waits for its Seed.
func (c *Controller) reconcile(ctx context.Context, ms *seedmanagementv1alpha1.ManagedSeed, s *corev1beta1.Shoot) (time.Duration, error) {
	ms, err := c.objects.Update(ctx, ms, addFinalizer)
	if err != nil {
		return 0, err
	}
	shootKey := s.GetMetadata().GetNamespace() + "/" + s.GetMetadata().GetName()
	if !shootReconciled(s) {
		c.setConditions(ctx, ms, cond{ConditionShootReconciled, "False", reasonReconciling, fmt.Sprintf("Waiting for shoot %q to be reconciled", shootKey)})
		return 0, nil // the shoot's changes bring the ManagedSeed back
	}
	reconciled := cond{ConditionShootReconciled, "True", reasonReconciled, fmt.Sprintf("Shoot %q has been reconciled", shootKey)}
	name := ms.GetMetadata().GetName()
	if err := c.deploy(ctx, ms, s); err != nil {
		c.setConditions(ctx, ms, reconciled, cond{ConditionSeedRegistered, "False", reasonReconcileError, err.Error()})
		return 0, err
	}
	seed, err := c.getSeed(ctx, name)
	if err != nil {
		return 0, err
	}
	if gardenletReady(seed) {
		c.setConditions(ctx, ms, reconciled, cond{ConditionSeedRegistered, "True", reasonSeedRegistered, fmt.Sprintf("Seed %s has been registered", name)})
		return c.cfg.SyncPeriod, nil
	}
	what := "registered"
	if seed != nil {
		what = "ready (" + ConditionGardenletReady + ")"
	}
	c.setConditions(ctx, ms, reconciled, cond{ConditionSeedRegistered, "False", reasonReconciling,
		fmt.Sprintf("Agent deployed into shoot %q; waiting for seed %s to be %s", shootKey, name, what)})
	return c.cfg.PollInterval, nil
}

// shootReconciled is Gardener's test: the shoot's last operation succeeded for its current generation.
func shootReconciled(s *corev1beta1.Shoot) bool {
	lo := s.GetStatus().GetLastOperation()
	return s.GetMetadata().GetGeneration() == s.GetStatus().GetObservedGeneration() && lo != nil && lo.GetState() == "Succeeded"
}

func gardenletReady(s *corev1beta1.Seed) bool {
	for _, c := range s.GetStatus().GetConditions() {
		if c.GetType() == ConditionGardenletReady {
			return c.GetStatus() == "True"
		}
	}
	return false
}

// getSeed reads the Seed the ManagedSeed registers from the hub; nil when it does not exist.
func (c *Controller) getSeed(ctx context.Context, name string) (*corev1beta1.Seed, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	seed, err := c.seeds.Get(ctx, &metav1.GetRequest{Name: name})
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read seed %s: %w", name, err)
	}
	return seed, nil
}

// shootClients are the REST configuration and core client of the shoot's kube-apiserver.
func (c *Controller) shootClients(ctx context.Context, s *corev1beta1.Shoot) (*rest.Config, corev1client.CoreV1Interface, error) {
	ns := s.GetStatus().GetTechnicalId()
	if ns == "" {
		return nil, nil, fmt.Errorf("shoot %s/%s has no technical ID yet", s.GetMetadata().GetNamespace(), s.GetMetadata().GetName())
	}
	var rc *rest.Config
	var err error
	if c.cfg.ShootREST != nil {
		rc, err = c.cfg.ShootREST(ctx, ns)
	} else {
		rc, err = shoot.AdminREST(ctx, c.cfg.Seed, ns, c.cfg.Dial)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("shoot %s/%s's API server: %w", s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), err)
	}
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return rc, core, nil
}

// releases is a Helm manager for the shoot's kube-apiserver.
func (c *Controller) releases(rc *rest.Config) (*helmrelease.Manager, error) {
	return helmrelease.New(helmrelease.Config{REST: rc, Log: c.log.With("component", "helm")})
}

// deploy installs or upgrades the agent's release in the shoot, with a bootstrap token while the shoot holds no
// agent credentials, and deletes the token once it does.
func (c *Controller) deploy(ctx context.Context, ms *seedmanagementv1alpha1.ManagedSeed, s *corev1beta1.Shoot) error {
	rc, core, err := c.shootClients(ctx, s)
	if err != nil {
		return err
	}
	if _, err := core.Namespaces().Get(ctx, Namespace, kmetav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: Namespace}}
		if _, err := core.Namespaces().Create(ctx, ns, kmetav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s in the shoot: %w", Namespace, err)
		}
	} else if err != nil {
		return fmt.Errorf("read namespace %s in the shoot: %w", Namespace, err)
	}
	values, err := c.values(ms)
	if err != nil {
		return err
	}
	key := hubobject.Key(ms)
	registered := false
	switch mode := ms.GetSpec().GetGardenlet().GetBootstrap(); mode {
	case "", "BootstrapToken":
		_, err := core.Secrets(Namespace).Get(ctx, KubeconfigSecret, kmetav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			tok, err := c.token(ctx, key, ms.GetMetadata().GetName())
			if err != nil {
				return err
			}
			values["bootstrap"] = map[string]any{"token": tok.id + "." + tok.secret}
		case err != nil:
			return fmt.Errorf("read the agent's credentials in the shoot: %w", err)
		default:
			registered = true
		}
	case "None":
	default:
		return fmt.Errorf("spec.gardenlet.bootstrap %q is not supported: the agent bootstraps with a token (BootstrapToken) or an existing kubeconfig (None)", mode)
	}
	rels, err := c.releases(rc)
	if err != nil {
		return err
	}
	if _, changed, err := rels.Apply(ctx, c.cfg.Chart, Release, Namespace, values); err != nil {
		return fmt.Errorf("deploy the agent into the shoot: %w", err)
	} else if changed {
		c.log.Info("deployed the agent into the shoot", "managedSeed", key, "shoot", s.GetMetadata().GetName(), "bootstrap", !registered)
	}
	if registered {
		_ = c.dropToken(ctx, key) // logged; tried again at the next sync
	}
	return nil
}

// values are the agent chart's values for the ManagedSeed's agent.
func (c *Controller) values(ms *seedmanagementv1alpha1.ManagedSeed) (map[string]any, error) {
	cfg, err := agentConfig(ms)
	if err != nil {
		return nil, err
	}
	v := map[string]any{
		"replicaCount": 1,
		"hub":          map[string]any{"address": c.cfg.HubAddress, "caBundle": string(c.cfg.HubCA())},
		"config":       cfg,
	}
	// Gardener's mergeWithParent takes the parent gardenlet's image vector overwrite into the new gardenlet's values.
	if ms.GetSpec().GetGardenlet().GetMergeWithParent() && len(c.cfg.ImageVector) > 0 {
		v["imageVector"] = string(c.cfg.ImageVector)
	}
	d := ms.GetSpec().GetGardenlet().GetDeployment()
	if img := d.GetImage(); img != nil {
		image := map[string]any{}
		if img.Repository != nil {
			image["repository"] = img.GetRepository()
		}
		if img.Tag != nil {
			image["tag"] = img.GetTag()
		}
		if img.PullPolicy != nil {
			image["pullPolicy"] = img.GetPullPolicy()
		}
		if len(image) > 0 {
			v["image"] = image
		}
	}
	if l := d.GetPodLabels(); len(l) > 0 {
		v["podLabels"] = l
	}
	if a := d.GetPodAnnotations(); len(a) > 0 {
		v["podAnnotations"] = a
	}
	return v, nil
}

// agentConfig is the new agent's configuration (the chart's config value) from the ManagedSeed's
// GardenletConfiguration: the Seed template named as the ManagedSeed, and the log settings.
func agentConfig(ms *seedmanagementv1alpha1.ManagedSeed) (map[string]any, error) {
	raw := ms.GetSpec().GetGardenlet().GetConfig().GetRaw()
	if len(raw) == 0 {
		return nil, errors.New("spec.gardenlet.config is required: a GardenletConfiguration with the Seed template (seedConfig)")
	}
	var gc struct {
		SeedConfig *struct {
			Metadata struct {
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"metadata"`
			Spec json.RawMessage `json:"spec"`
		} `json:"seedConfig"`
		LogLevel  string `json:"logLevel"`
		LogFormat string `json:"logFormat"`
	}
	if err := json.Unmarshal(raw, &gc); err != nil {
		return nil, fmt.Errorf("spec.gardenlet.config: %w", err)
	}
	if gc.SeedConfig == nil || len(gc.SeedConfig.Spec) == 0 {
		return nil, errors.New("spec.gardenlet.config.seedConfig.spec is required: the Seed the agent registers")
	}
	spec, err := seedSpec(gc.SeedConfig.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec.gardenlet.config.seedConfig.spec: %w", err)
	}
	md := map[string]any{"name": ms.GetMetadata().GetName()}
	if l := gc.SeedConfig.Metadata.Labels; len(l) > 0 {
		md["labels"] = l
	}
	if a := gc.SeedConfig.Metadata.Annotations; len(a) > 0 {
		md["annotations"] = a
	}
	cfg := map[string]any{"seedConfig": map[string]any{"metadata": md, "spec": spec}}
	if gc.LogLevel != "" {
		cfg["logLevel"] = strings.ToLower(gc.LogLevel)
	}
	if gc.LogFormat != "" {
		cfg["logFormat"] = gc.LogFormat
	}
	return cfg, nil
}

// addFinalizer adds the finalizer to a ManagedSeed that is not being deleted.
func addFinalizer(ms *seedmanagementv1alpha1.ManagedSeed) bool {
	if slices.Contains(ms.Metadata.Finalizers, FinalizerGardener) || ms.Metadata.DeletionTimestamp != nil {
		return false
	}
	ms.Metadata.Finalizers = append(ms.Metadata.Finalizers, FinalizerGardener)
	return true
}

// setConditions sets the conditions and status.observedGeneration on the hub when anything changes; failures are
// logged, the next sync tries again.
func (c *Controller) setConditions(ctx context.Context, ms *seedmanagementv1alpha1.ManagedSeed, set ...cond) {
	conds := ms.GetStatus().GetConditions()
	changed := ms.GetStatus().GetObservedGeneration() != ms.GetMetadata().GetGeneration()
	now := c.cfg.Now().UTC()
	for _, s := range set {
		var ch bool
		conds, ch = hubobject.SetCondition(conds, s.typ, s.status, s.reason, s.message, now)
		changed = changed || ch
	}
	if !changed {
		return
	}
	items := make([]json.RawMessage, len(conds))
	for i, x := range conds {
		items[i] = hubobject.JSON(x)
	}
	if _, err := c.objects.PatchStatus(ctx, ms, map[string]any{"conditions": items, "observedGeneration": ms.GetMetadata().GetGeneration()}); err != nil {
		c.log.Warn("could not update the ManagedSeed's status", "managedSeed", hubobject.Key(ms), "err", err)
	}
}
