package managedseed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/deploy/charts"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the ManagedSeed controller. Its Base's Cache holds the ManagedSeeds and their Shoots; Hub
// serves the ManagedSeeds, Seeds and bootstrap token Secrets. Defaults: 2 workers, retries after 1 s to 1 min, a
// registered ManagedSeed looked at every 10 min (a changed template or a lost release is put right).
type Config struct {
	controller.Base
	// ShootREST returns the REST configuration of the kube-apiserver of the shoot whose control plane is in the
	// seed's namespace ns; nil uses shoot.AdminREST with Dial.
	ShootREST func(ctx context.Context, ns string) (*rest.Config, error)
	// Dial connects to a Service's cluster IP in the seed, for the default ShootREST; nil dials directly.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// HubAddress is the hub's host:port as the new agents dial it: this agent's own (required).
	HubAddress string
	// HubCA returns the PEM bundle that verifies the hub, for the new agents: this agent's own (required).
	HubCA func() []byte
	// ImageVector is this agent's image vector of the shoot control plane (the content of its
	// controllers.shoot.controlPlane.imageVector), which the new agents get with mergeWithParent (Gardener's parent
	// gardenlet's imageVectorOverwrite); nil leaves the chart's default (the agent's embedded vector).
	ImageVector []byte
	// Chart is the agent chart's archive; nil takes the embedded deploy/charts/trellis-agent.
	Chart []byte
	// PollInterval is how often a ManagedSeed is looked at while its Seed is not ready or not gone yet; default 2 s.
	PollInterval time.Duration
	// TokenValidity is the validity of the bootstrap tokens made for new agents; default 1 h. A token is replaced
	// when less than a quarter of it is left.
	TokenValidity time.Duration
}

// Controller reconciles the ManagedSeeds whose shoots run on the agent's seed. Create it with New and run it with
// Run.
type Controller struct {
	*controller.Controller
	cfg     Config
	log     *slog.Logger
	objects *hubobject.Client[*seedmanagementv1alpha1.ManagedSeed]
	seeds   corev1beta1.SeedServiceClient
	secrets kcorev1.SecretServiceClient

	mu     sync.Mutex
	tokens map[string]token // by ManagedSeed key: the bootstrap token in its release
}

// token is a bootstrap token made for a ManagedSeed's agent.
type token struct {
	id, secret string
	expires    time.Time
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Complete("managedSeed", controller.Defaults{Workers: 2, RetryMin: time.Second, RetryMax: time.Minute,
		SyncPeriod: 10 * time.Minute}); err != nil {
		return nil, err
	}
	if cfg.HubAddress == "" || cfg.HubCA == nil {
		return nil, errors.New("managedSeed controller: HubAddress and HubCA are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.TokenValidity <= 0 {
		cfg.TokenValidity = time.Hour
	}
	if cfg.Chart == nil {
		archive, err := charts.Archive(charts.TrellisAgent)
		if err != nil {
			return nil, fmt.Errorf("managedSeed controller: %w", err)
		}
		cfg.Chart = archive
	}
	c := &Controller{cfg: cfg, log: cfg.Log,
		objects: hubobject.NewClient(seedmanagementv1alpha1.NewManagedSeedServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now),
		seeds:   corev1beta1.NewSeedServiceClient(cfg.Hub),
		secrets: kcorev1.NewSecretServiceClient(cfg.Hub),
		tokens:  map[string]token{},
	}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "managedSeed", Sync: c.sync, Watches: []controller.Watch{
		{Resource: resources.ManagedSeeds, Keys: controller.Own[*seedmanagementv1alpha1.ManagedSeed](nil), Forget: c.objects.Forget},
		// A ManagedSeed waits for its shoot to be reconciled.
		{Resource: resources.Shoots, Keys: controller.Each(cfg.Cache, resources.ManagedSeeds, func(ms *seedmanagementv1alpha1.ManagedSeed, s *corev1beta1.Shoot) bool {
			return ms.GetMetadata().GetNamespace() == s.GetMetadata().GetNamespace() && ms.GetSpec().GetShoot().GetName() == s.GetMetadata().GetName()
		})},
	}})
	return c, nil
}
