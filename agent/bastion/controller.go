package bastion

import (
	"log/slog"
	"time"

	"github.com/trellis-dev/trellis/agent/controller"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
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
	controller.Mirror[*operationsv1alpha1.Bastion]
	cfg Config
	log *slog.Logger
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if err := cfg.CompleteMirror("bastion", controller.MirrorDefaults, &cfg.PollInterval); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Log,
		Mirror: controller.NewMirror(cfg.Base, operationsv1alpha1.NewBastionServiceClient(cfg.Hub))}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "bastion", Sync: c.sync, Watches: []controller.Watch{
		{Resource: resources.Bastions, Keys: controller.Own[*operationsv1alpha1.Bastion](nil), Forget: c.Objects.Forget},
		// A bastion waits for its shoot (and its technical ID).
		{Resource: resources.Shoots, Keys: controller.Each(cfg.Cache, resources.Bastions, func(b *operationsv1alpha1.Bastion, s *corev1beta1.Shoot) bool {
			return b.GetMetadata().GetNamespace() == s.GetMetadata().GetNamespace() && b.GetSpec().GetShootRef().GetName() == s.GetMetadata().GetName()
		})},
	}})
	return c, nil
}
