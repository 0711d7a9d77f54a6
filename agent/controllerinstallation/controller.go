package controllerinstallation

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/hubobject"
	gcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Defaults of a Config.
const (
	DefaultWorkers      = 5
	DefaultSyncPeriod   = 30 * time.Second
	DefaultHealthPoll   = 5 * time.Second
	DefaultDeletionPoll = 2 * time.Second
	DefaultRetryMin     = time.Second //nolint:revive // time-naming: Min is minimum (beside RetryMax), not minutes
	DefaultRetryMax     = 2 * time.Minute
	DefaultHubTimeout   = controller.DefaultHubTimeout
)

// Config configures the installation controller. Its Base's Cache holds the Seed, its ControllerInstallations and
// their registrations, deployments and registry secrets; Seed is used for namespaces. Base.SyncPeriod is how often a
// healthy installation is looked at again (default 30 s, gardenlet's care period).
type Config struct {
	controller.Base
	// Releases installs the charts in the seed.
	Releases *helmrelease.Manager
	// Version is the agent's version, injected as gardener.version.
	Version string
	// GardenIdentity is the garden's cluster identity, injected as gardener.garden.clusterIdentity; empty reads it
	// from the hub (ConfigMap kube-system/cluster-identity).
	GardenIdentity string
	// FeatureGates are injected as gardener.gardenlet.featureGates.
	FeatureGates map[string]bool
	// HealthPoll is how often an installation whose controller is not healthy or still rolling out is looked at
	// (default 5 s).
	HealthPoll time.Duration
	// DeletionPoll is how often a deletion waiting for the namespace to go is looked at (default 2 s).
	DeletionPoll time.Duration
}

// Controller deploys the ControllerInstallations of one seed. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	cfg        Config
	log        *slog.Logger
	objects    *hubobject.Client[*corev1beta1.ControllerInstallation]
	configMaps kcorev1.ConfigMapServiceClient

	mu sync.Mutex
	// gone holds the last state of installations that left the cache without the agent's finalizer (deleted before
	// the agent saw them, or moved away): their release and namespace are still cleaned up.
	gone map[string]*corev1beta1.ControllerInstallation
	// gardenIdentity is the garden's cluster identity once read.
	gardenIdentity string
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Releases == nil {
		return nil, errors.New("controllerInstallation controller: Releases is required")
	}
	if err := cfg.Complete("controllerInstallation", controller.Defaults{Workers: DefaultWorkers, RetryMin: DefaultRetryMin,
		RetryMax: DefaultRetryMax, SyncPeriod: DefaultSyncPeriod}); err != nil {
		return nil, err
	}
	if cfg.HealthPoll <= 0 {
		cfg.HealthPoll = DefaultHealthPoll
	}
	if cfg.DeletionPoll <= 0 {
		cfg.DeletionPoll = DefaultDeletionPoll
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	c := &Controller{
		cfg:            cfg,
		log:            cfg.Log,
		configMaps:     kcorev1.NewConfigMapServiceClient(cfg.Hub),
		gone:           map[string]*corev1beta1.ControllerInstallation{},
		gardenIdentity: cfg.GardenIdentity,
	}
	c.objects = hubobject.NewClient[*corev1beta1.ControllerInstallation](corev1beta1.NewControllerInstallationServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now)
	mine := func(ci *corev1beta1.ControllerInstallation) bool {
		return ci.GetSpec().GetSeedRef().GetName() == cfg.SeedName
	}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "controllerInstallation", Sync: c.sync, Watches: []controller.Watch{
		{Resource: resources.ControllerInstallations, Keys: controller.Own(mine), Deleted: c.installationGone},
		c.installationsOf(resources.ControllerRegistrations, func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return ci.GetSpec().GetRegistrationRef().GetName() == obj.(*corev1beta1.ControllerRegistration).GetMetadata().GetName()
		}),
		c.installationsOf(resources.ControllerDeployments, func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return ci.GetSpec().GetDeploymentRef().GetName() == obj.(*gcorev1.ControllerDeployment).GetMetadata().GetName()
		}),
		c.installationsOf(resources.Seeds, func(_ *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return obj.(*corev1beta1.Seed).GetMetadata().GetName() == cfg.SeedName
		}),
		c.installationsOf(resources.Secrets, func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			s := obj.(*kcorev1.Secret)
			cd, ok := cache.Get[*gcorev1.ControllerDeployment](cfg.Cache, resources.ControllerDeployments, "", ci.GetSpec().GetDeploymentRef().GetName())
			oci := cd.GetHelm().GetOciRepository()
			return ok && s.GetMetadata().GetNamespace() == registrySecretNamespace &&
				(s.GetMetadata().GetName() == oci.GetPullSecretRef().GetName() || s.GetMetadata().GetName() == oci.GetCaBundleSecretRef().GetName())
		}),
	}})
	return c, nil
}

// installationGone remembers an installation of the seed that left the cache while it may still have a release in
// the seed, and returns its key to clean up after it.
func (c *Controller) installationGone(obj proto.Message) []string {
	ci, ok := obj.(*corev1beta1.ControllerInstallation)
	if !ok || ci.GetSpec().GetSeedRef().GetName() != c.cfg.SeedName {
		return nil
	}
	key := hubobject.Key(ci)
	c.objects.Forget(key)
	c.mu.Lock()
	c.gone[key] = ci
	c.mu.Unlock()
	return []string{key}
}

// installationsOf watches resource for the seed's installations that match a changed, added or deleted object.
func (c *Controller) installationsOf(resource string, match func(*corev1beta1.ControllerInstallation, proto.Message) bool) controller.Watch {
	keys := func(obj proto.Message) []string {
		var keys []string
		for _, ci := range cache.List[*corev1beta1.ControllerInstallation](c.cfg.Cache, resources.ControllerInstallations) {
			if ci.GetSpec().GetSeedRef().GetName() == c.cfg.SeedName && match(ci, obj) {
				keys = append(keys, hubobject.Key(ci))
			}
		}
		return keys
	}
	return controller.Watch{Resource: resource, Keys: keys, Deleted: keys}
}
