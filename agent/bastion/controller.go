package bastion

import (
	"log/slog"
	"time"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

// Config configures the Bastion controller. Its Base's Cache holds the Bastions and their Shoots; Hub serves the
// Bastions and their status. Defaults: 5 workers, retries after 1 s to 2 min, a ready bastion checked every 5 min (a
// lost extension object is recreated).
type Config struct {
	controller.Base
	// PollInterval is how often a bastion is looked at while its extension object is not ready or not gone yet;
	// default 1 s.
	PollInterval time.Duration
}

// Controller reconciles the Bastions of one seed. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	cfg      Config
	log      *slog.Logger
	bastions operationsv1alpha1.BastionServiceClient
	ext      *extension.Client
	// objects writes the bastions and remembers what it wrote.
	objects *hubobject.Client[*operationsv1alpha1.Bastion]
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Complete("bastion", controller.Defaults{Workers: 5, RetryMin: time.Second, RetryMax: 2 * time.Minute,
		SyncPeriod: 5 * time.Minute}); err != nil {
		return nil, err
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Log,
		bastions: operationsv1alpha1.NewBastionServiceClient(cfg.Hub),
		ext:      &extension.Client{C: cfg.Seed, Now: cfg.Now},
	}
	c.objects = hubobject.NewClient(c.bastions, cfg.HubTimeout, cfg.Now)
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "bastion", Sync: c.sync, Watches: []controller.Watch{
		{Resource: cache.Bastions, Keys: controller.Own[*operationsv1alpha1.Bastion](nil), Forget: c.objects.Forget},
		// A bastion waits for its shoot (and its technical ID).
		{Resource: cache.Shoots, Keys: controller.Each(cfg.Cache, cache.Bastions, func(b *operationsv1alpha1.Bastion, s *corev1beta1.Shoot) bool {
			return b.GetMetadata().GetNamespace() == s.GetMetadata().GetNamespace() && b.GetSpec().GetShootRef().GetName() == s.GetMetadata().GetName()
		})},
	}})
	return c, nil
}
