package controllerinstallation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/keyqueue"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Defaults of a Config.
const (
	DefaultWorkers        = 5
	DefaultSyncPeriod     = 30 * time.Second
	DefaultHealthPoll     = 5 * time.Second
	DefaultDeletionPoll   = 2 * time.Second
	DefaultRetryMin       = time.Second //nolint:revive // time-naming: Min is the minimum, not minutes
	DefaultRetryMax       = 2 * time.Minute
	DefaultHubTimeout     = 30 * time.Second
	defaultGardenIdentity = ""
)

// Config configures the installation controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: the Seed, its ControllerInstallations and their
	// registrations, deployments and registry secrets.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster (namespaces).
	Seed client.Client
	// Releases installs the charts in the seed.
	Releases *helmrelease.Manager
	// Version is the agent's version, injected as gardener.version.
	Version string
	// GardenIdentity is the garden's cluster identity, injected as gardener.garden.clusterIdentity; empty reads it
	// from the hub (ConfigMap kube-system/cluster-identity).
	GardenIdentity string
	// FeatureGates are injected as gardener.gardenlet.featureGates.
	FeatureGates map[string]bool
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many installations are worked on at once (default 5).
	Workers int
	// SyncPeriod is how often a healthy installation is looked at again (default 30 s, gardenlet's care period).
	SyncPeriod time.Duration
	// HealthPoll is how often an installation whose controller is not healthy or still rolling out is looked at
	// (default 5 s).
	HealthPoll time.Duration
	// DeletionPoll is how often a deletion waiting for the namespace to go is looked at (default 2 s).
	DeletionPoll time.Duration
	// RetryMin and RetryMax bound the backoff after a failed sync (defaults 1 s and 2 min).
	RetryMin, RetryMax time.Duration
	// HubTimeout bounds each call to the hub (default 30 s).
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.HealthPoll <= 0 {
		c.HealthPoll = DefaultHealthPoll
	}
	if c.DeletionPoll <= 0 {
		c.DeletionPoll = DefaultDeletionPoll
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.HubTimeout <= 0 {
		c.HubTimeout = DefaultHubTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Version == "" {
		c.Version = "dev"
	}
}

// Controller deploys the ControllerInstallations of one seed. Create it with New and run it with Run.
type Controller struct {
	cfg        Config
	log        *slog.Logger
	objects    *hubobject.Client[*corev1beta1.ControllerInstallation]
	configMaps kcorev1.ConfigMapServiceClient
	queue      *keyqueue.Queue

	mu sync.Mutex
	// gone holds the last state of installations that left the cache without the agent's finalizer (deleted before
	// the agent saw them, or moved away): their release and namespace are still cleaned up.
	gone map[string]*corev1beta1.ControllerInstallation
	// gardenIdentity is the garden's cluster identity once read.
	gardenIdentity string
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil || cfg.Releases == nil {
		return nil, errors.New("controllerinstallation: SeedName, Cache, Hub, Seed and Releases are required")
	}
	cfg.defaults()
	c := &Controller{
		cfg:            cfg,
		log:            cfg.Log.With("controller", "controllerinstallation"),
		configMaps:     kcorev1.NewConfigMapServiceClient(cfg.Hub),
		gone:           map[string]*corev1beta1.ControllerInstallation{},
		gardenIdentity: cfg.GardenIdentity,
	}
	c.objects = hubobject.NewClient[*corev1beta1.ControllerInstallation](corev1beta1.NewControllerInstallationServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now)
	c.queue = keyqueue.New(keyqueue.Config{Name: "controllerInstallation", Sync: c.sync, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: c.log})
	return c, nil
}

// Run works on the seed's installations until ctx ends. It waits for the cache's first sync, so that it sees every
// installation and what they reference.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	removes := []func(){
		c.cfg.Cache.AddEventHandler(resources.ControllerInstallations, cache.HandlerFuncs{
			AddFunc:    c.enqueueInstallation,
			UpdateFunc: func(_, obj proto.Message) { c.enqueueInstallation(obj) },
			DeleteFunc: c.installationGone,
		}),
		c.cfg.Cache.AddEventHandler(resources.ControllerRegistrations, c.enqueueWhere(func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return ci.GetSpec().GetRegistrationRef().GetName() == obj.(*corev1beta1.ControllerRegistration).GetMetadata().GetName()
		})),
		c.cfg.Cache.AddEventHandler(resources.ControllerDeployments, c.enqueueWhere(func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return ci.GetSpec().GetDeploymentRef().GetName() == obj.(*corev1.ControllerDeployment).GetMetadata().GetName()
		})),
		c.cfg.Cache.AddEventHandler(resources.Seeds, c.enqueueWhere(func(_ *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			return obj.(*corev1beta1.Seed).GetMetadata().GetName() == c.cfg.SeedName
		})),
		c.cfg.Cache.AddEventHandler(resources.Secrets, c.enqueueWhere(func(ci *corev1beta1.ControllerInstallation, obj proto.Message) bool {
			s := obj.(*kcorev1.Secret)
			cd, ok := cache.Get[*corev1.ControllerDeployment](c.cfg.Cache, resources.ControllerDeployments, "", ci.GetSpec().GetDeploymentRef().GetName())
			oci := cd.GetHelm().GetOciRepository()
			return ok && s.GetMetadata().GetNamespace() == registrySecretNamespace &&
				(s.GetMetadata().GetName() == oci.GetPullSecretRef().GetName() || s.GetMetadata().GetName() == oci.GetCaBundleSecretRef().GetName())
		})),
	}
	defer func() {
		for _, r := range removes {
			r()
		}
	}()
	c.log.Info("controllerinstallation controller started", "workers", c.cfg.Workers)
	c.queue.Run(ctx, c.cfg.Workers)
	return nil
}

func (c *Controller) enqueueInstallation(obj proto.Message) {
	if ci, ok := obj.(*corev1beta1.ControllerInstallation); ok && ci.GetSpec().GetSeedRef().GetName() == c.cfg.SeedName {
		c.queue.Add(hubobject.Key(ci))
	}
}

// installationGone remembers an installation that left the cache while it may still have a release in the seed.
func (c *Controller) installationGone(obj proto.Message) {
	ci, ok := obj.(*corev1beta1.ControllerInstallation)
	if !ok || ci.GetSpec().GetSeedRef().GetName() != c.cfg.SeedName {
		return
	}
	key := hubobject.Key(ci)
	c.objects.Forget(key)
	c.mu.Lock()
	c.gone[key] = ci
	c.mu.Unlock()
	c.queue.Add(key)
}

// enqueueWhere returns a handler enqueueing the seed's installations that match a changed object.
func (c *Controller) enqueueWhere(match func(*corev1beta1.ControllerInstallation, proto.Message) bool) cache.Handler {
	enqueue := func(obj proto.Message) {
		for _, ci := range cache.List[*corev1beta1.ControllerInstallation](c.cfg.Cache, resources.ControllerInstallations) {
			if ci.GetSpec().GetSeedRef().GetName() == c.cfg.SeedName && match(ci, obj) {
				c.queue.Add(hubobject.Key(ci))
			}
		}
	}
	return cache.HandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj proto.Message) { enqueue(obj) }, DeleteFunc: enqueue}
}
