package shoot

import (
	"context"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Config configures the shoot controller. Its Base's Cache holds the Shoots and what they refer to; Hub serves
// their status, ShootStates and BackupEntries; Seed's reads of extension objects should come from an informer cache,
// as waits poll them. Base's defaults: 5 workers; RetryMin and RetryMax (5 s and 5 min) bound the exponential
// backoff between automatic retries of a shoot whose last operation ended in Error; SyncPeriod, how often an
// up-to-date shoot is reconciled anyway, is 1h as in gardenlet.
type Config struct {
	controller.Base
	// Identity is the agent as a shoot's status.gardener names the gardenlet that last operated it (its id, name and
	// version), written when an operation starts; nil leaves the field alone.
	Identity *corev1beta1.Gardener
	// WaitInterval is the poll interval of waits on extension objects (reads from the informer cache); default 100 ms.
	WaitInterval time.Duration
	// ExtensionErrorThreshold is how long an extension may report an error before the flow fails with it (Gardener's
	// severe threshold); default 30 s.
	ExtensionErrorThreshold time.Duration
	// TaskTimeout bounds each step of a flow including its waits; default 10 min.
	TaskTimeout time.Duration
	// CareInterval is how often the conditions of up-to-date shoots are refreshed from their extensions' health
	// reports; default 1 min, as gardenlet's shoot care.
	CareInterval time.Duration
	// ControlPlaneMode says whether the agent runs the shoots' control planes (agent/config: Auto, Deploy, StandIn);
	// default Auto.
	ControlPlaneMode string
	// Images is the image vector of the control plane; nil: the embedded upstream defaults.
	Images *imagevector.Vector
	// DialService connects to a Service's cluster IP in the seed (the shoots' kube-apiservers, for health probes and
	// the shoot's system resources); nil dials directly.
	DialService func(ctx context.Context, network, address string) (net.Conn, error)
	// TunnelDomain returns the domain of the hub's shoot API names; nil: tunnel.trellis.local.
	TunnelDomain func() string
	// ETCDSnapshotInterval is the time between the scheduled full snapshots of the shoots' etcds, on seeds with
	// backups; default 1h.
	ETCDSnapshotInterval time.Duration
}

// Controller runs the shoot flows of one seed. Create it with New and run it with Run.
type Controller struct {
	*controller.Controller
	cfg     Config
	log     *slog.Logger
	shoots  *hubobject.Client[*corev1beta1.Shoot] // writes, and the hub's answers until the cache has them
	states  corev1beta1.ShootStateServiceClient
	entries corev1beta1.BackupEntryServiceClient
	// secrets and configMaps publish the shoots' CA bundles and SSH keypairs in their project namespaces.
	secrets    kcorev1.SecretServiceClient
	configMaps kcorev1.ConfigMapServiceClient
	// internalSecrets publish the shoots' client CAs.
	internalSecrets corev1beta1.InternalSecretServiceClient
	ext             *extension.Client

	mu       sync.Mutex
	failures map[string]int       // consecutive failed operations, per key
	retryAt  map[string]time.Time // earliest automatic retry after an Error, per key
	running  map[string]Flow      // flows running now, per key
	// finished is the trace of the last operation that succeeded, per key: the cache keeps a shoot's traceparent
	// until a new write asks for work, and the reconciles after the operation (the sync period's, the retries of
	// care) are not part of the request that asked for it, so they start traces of their own.
	finished map[string]string
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Complete("shoot", controller.Defaults{Workers: 5, RetryMin: 5 * time.Second, RetryMax: 5 * time.Minute,
		SyncPeriod: time.Hour}); err != nil {
		return nil, err
	}
	if cfg.WaitInterval <= 0 {
		cfg.WaitInterval = 100 * time.Millisecond
	}
	if cfg.ExtensionErrorThreshold <= 0 {
		cfg.ExtensionErrorThreshold = 30 * time.Second
	}
	if cfg.TaskTimeout <= 0 {
		cfg.TaskTimeout = 10 * time.Minute
	}
	if cfg.CareInterval <= 0 {
		cfg.CareInterval = time.Minute
	}
	if cfg.ControlPlaneMode == "" {
		cfg.ControlPlaneMode = config.ControlPlaneAuto
	}
	if cfg.ETCDSnapshotInterval <= 0 {
		cfg.ETCDSnapshotInterval = defaultETCDSnapshotInterval
	}
	c := &Controller{
		cfg:             cfg,
		log:             cfg.Log,
		shoots:          hubobject.NewClient[*corev1beta1.Shoot](corev1beta1.NewShootServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now),
		states:          corev1beta1.NewShootStateServiceClient(cfg.Hub),
		entries:         corev1beta1.NewBackupEntryServiceClient(cfg.Hub),
		secrets:         kcorev1.NewSecretServiceClient(cfg.Hub),
		configMaps:      kcorev1.NewConfigMapServiceClient(cfg.Hub),
		internalSecrets: corev1beta1.NewInternalSecretServiceClient(cfg.Hub),
		ext: &extension.Client{C: cfg.Seed, Now: cfg.Now, Interval: cfg.WaitInterval,
			ErrorThreshold: cfg.ExtensionErrorThreshold},
		failures: map[string]int{},
		retryAt:  map[string]time.Time{},
		running:  map[string]Flow{},
		finished: map[string]string{},
	}
	c.Controller = controller.New(controller.Config{Base: cfg.Base, Name: "shoot", Sync: c.sync,
		Watches: []controller.Watch{{Resource: resources.Shoots, Keys: controller.Own[*corev1beta1.Shoot](nil), Forget: c.forget}},
		Loops:   []func(context.Context){c.careLoop, c.gateLoop}})
	return c, nil
}

func keyOf(s *corev1beta1.Shoot) string { return hubobject.Key(s) }

// forget drops what the controller keeps of a shoot the hub no longer assigns (deleted, or moved to another seed
// after its migration).
func (c *Controller) forget(key string) {
	c.shoots.Forget(key)
	c.mu.Lock()
	delete(c.failures, key)
	delete(c.retryAt, key)
	delete(c.finished, key)
	c.mu.Unlock()
}

// current is the newest state of the shoot the agent knows: the cache's, or the hub's answer to our last write when
// the cache has not caught up with it yet; nil when the hub no longer assigns it.
func (c *Controller) current(key string) *corev1beta1.Shoot {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*corev1beta1.Shoot](c.cfg.Cache, resources.Shoots, ns, name)
	s, ok := c.shoots.Pick(key, cached, ok)
	if !ok {
		return nil
	}
	return s
}

// Running reports which flow runs for the shoot namespace/name now, for tests and diagnostics.
func (c *Controller) Running(key string) Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[key]
}

// sync decides what to do with one shoot and does it. It returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	s := c.current(key)
	if s == nil {
		return 0, nil
	}
	now := c.cfg.Now()
	d := decide(c.cfg.SeedName, s, now, c.cfg.SyncPeriod)
	log := c.log.With("shoot", key)
	if d.Flow == FlowNone {
		log.Debug("nothing to do", "reason", d.Reason)
		return d.RequeueAfter, nil
	}
	if d.Retry {
		c.mu.Lock()
		at := c.retryAt[key]
		c.mu.Unlock()
		if wait := at.Sub(now); wait > 0 {
			return wait, nil
		}
	}
	log.Info("starting flow", "flow", d.Flow.String(), "type", d.Type, "reason", d.Reason)
	c.mu.Lock()
	c.running[key] = d.Flow
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
	}()
	begin := time.Now()
	traceparent := c.traceparent(key)
	err := c.run(tracing.WithTraceparent(ctx, traceparent), s, d, log)
	if ctx.Err() != nil {
		return 0, nil // stopping; the next start resumes the operation, which is still Processing
	}
	c.mu.Lock()
	if err != nil {
		c.failures[key]++
		backoff := c.cfg.RetryMin << min(c.failures[key]-1, 16)
		if backoff > c.cfg.RetryMax || backoff <= 0 {
			backoff = c.cfg.RetryMax
		}
		c.retryAt[key] = c.cfg.Now().Add(backoff)
		c.mu.Unlock()
		log.Warn("flow failed", "flow", d.Flow.String(), "type", d.Type, "took", time.Since(begin).Round(time.Millisecond), "err", err, "retryIn", backoff)
		return backoff, nil
	}
	delete(c.failures, key)
	delete(c.retryAt, key)
	if traceparent != "" {
		c.finished[key] = traceparent
	}
	c.mu.Unlock()
	log.Info("flow succeeded", "flow", d.Flow.String(), "type", d.Type, "took", time.Since(begin).Round(time.Millisecond))
	if d.Flow == FlowReconcile {
		return c.cfg.SyncPeriod, nil
	}
	return 0, nil
}

// tracer makes the span of each shoot operation; the flow's tasks are its children.
var tracer = otel.Tracer("github.com/trellis-dev/trellis/agent/shoot")

// traceparent is the trace the next operation on the shoot key continues: that of the write that asked for the work
// of the shoot's cached version (the hub sends it with the version), until an operation continuing it succeeded;
// "" then, or when the hub sent none, and the operation starts a trace of its own.
func (c *Controller) traceparent(key string) string {
	ns, name := hubobject.SplitKey(key)
	tp := c.cfg.Cache.Traceparent(resources.Shoots, ns, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tp == c.finished[key] {
		return ""
	}
	return tp
}

// run runs the flow d for shoot s and reports its progress and outcome on the shoot, in a span that continues the
// trace in ctx.
func (c *Controller) run(ctx context.Context, s *corev1beta1.Shoot, d Decision, log *slog.Logger) (err error) {
	md := s.GetMetadata()
	ctx, span := tracer.Start(ctx, "shoot "+d.Flow.String(), trace.WithAttributes(
		attribute.String("shoot", md.GetNamespace()+"/"+md.GetName()), attribute.String("operation", d.Type)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	op, err := c.newOperation(ctx, s, d, log)
	if err != nil {
		c.reportError(ctx, s, d, err, 0)
		return err
	}
	return op.run(ctx)
}

// reportError records err as the outcome of the operation d of s, which got to progress percent: Error with
// lastErrors, or Failed when an error code says retrying will not help.
func (c *Controller) reportError(ctx context.Context, s *corev1beta1.Shoot, d Decision, err error, progress int32) {
	now := c.cfg.Now()
	state := stateError
	if extension.HasNonRetryable(extension.Codes(err)) {
		state = stateFailed
	}
	p := statusPatch{
		"lastOperation": lastOperationJSON(d.Type, state, progress, fmt.Sprintf("%s failed: %v", d.Type, err), now),
		"lastErrors":    lastErrorsJSON(err, now),
	}
	if d.Flow == FlowReconcile {
		p["observedGeneration"] = s.GetMetadata().GetGeneration()
	}
	if _, perr := c.patchStatus(ctx, s, p); perr != nil {
		c.log.Error("could not report the error on the shoot", "shoot", keyOf(s), "err", perr, "flowErr", err)
	}
}
