package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// DefaultRenewInterval is Gardener's default (--heartbeat-renew-interval-seconds).
const DefaultRenewInterval = 30 * time.Second

// Config configures a Heartbeat.
type Config struct {
	// Client writes the Lease. It is only written to (patch, create), never read, so a cached client starts no
	// informer and the extension needs no list or watch permission on Leases.
	Client client.Client
	// Namespace is the extension's namespace (the ControllerInstallation's extension-<name>). Required.
	Namespace string
	// ExtensionName is written as holderIdentity. Required.
	ExtensionName string
	// RenewInterval defaults to DefaultRenewInterval; it is also written as leaseDurationSeconds (whole seconds, at
	// least 1).
	RenewInterval time.Duration
	// Clock gives renewTime; defaults to the real clock.
	Clock clock.WithTicker
	// Log receives renewal errors; defaults to discarding.
	Log logr.Logger
}

// Validate checks the required fields and applies the defaults.
func (c *Config) Validate() error {
	if c.Client == nil || c.Namespace == "" || c.ExtensionName == "" {
		return errors.New("heartbeat: Client, Namespace and ExtensionName are required")
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = DefaultRenewInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return nil
}

// Heartbeat renews the heartbeat Lease.
type Heartbeat struct {
	cfg Config
}

// New returns a Heartbeat for cfg.
func New(cfg Config) (*Heartbeat, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Heartbeat{cfg: cfg}, nil
}

// Add registers a Heartbeat with mgr; cfg.Client defaults to the manager's client.
func Add(mgr manager.Manager, cfg Config) error {
	if cfg.Client == nil {
		cfg.Client = mgr.GetClient()
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = mgr.GetLogger().WithName("heartbeat")
	}
	h, err := New(cfg)
	if err != nil {
		return err
	}
	return mgr.Add(h)
}

// Run renews the Lease at once and then every RenewInterval until ctx is done. A failed renewal is logged and
// retried at the next tick: one missed beat is far below the staleness threshold the agent applies.
func (h *Heartbeat) Run(ctx context.Context) error {
	t := h.cfg.Clock.NewTicker(h.cfg.RenewInterval)
	defer t.Stop()
	for {
		if err := h.Renew(ctx); err != nil && ctx.Err() == nil {
			h.cfg.Log.Error(err, "Could not renew the heartbeat Lease")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Start implements manager.Runnable.
func (h *Heartbeat) Start(ctx context.Context) error { return h.Run(ctx) }

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader beats.
func (h *Heartbeat) NeedLeaderElection() bool { return true }

// Renew writes the Lease once: a merge patch of its spec, or a create when it does not exist.
func (h *Heartbeat) Renew(ctx context.Context) error {
	seconds := int32(h.cfg.RenewInterval / time.Second)
	if seconds < 1 {
		seconds = 1
	}
	now := metav1.NewMicroTime(h.cfg.Clock.Now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &h.cfg.ExtensionName,
		LeaseDurationSeconds: &seconds,
		RenewTime:            &now,
	}
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: extensionsv1alpha1.HeartbeatLeaseName, Namespace: h.cfg.Namespace,
	}}
	for range 2 {
		err = h.cfg.Client.Patch(ctx, lease, client.RawPatch(types.MergePatchType, body))
		if !apierrors.IsNotFound(err) {
			break
		}
		lease.Spec = spec
		err = h.cfg.Client.Create(ctx, lease)
		if !apierrors.IsAlreadyExists(err) { // created by someone else meanwhile: patch again
			break
		}
	}
	if err != nil {
		return fmt.Errorf("renew Lease %s/%s: %w", h.cfg.Namespace, extensionsv1alpha1.HeartbeatLeaseName, err)
	}
	return nil
}
