package shoot

import (
	"context"
	"errors"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/keyqueue"
	"github.com/trellis-dev/trellis/hub/seedgraph"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// Config configures the shoot controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub; the controller reads Shoots and what they refer to
	// from it.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for status, ShootStates and BackupEntries.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has the extension types; reads of extension objects should
	// come from an informer cache, as waits poll them.
	Seed client.Client
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// Workers is how many shoots are worked on at once; default 5.
	Workers int
	// SyncPeriod is how often an up-to-date shoot is reconciled anyway; default 1h, as gardenlet.
	SyncPeriod time.Duration
	// RetryMin and RetryMax bound the exponential backoff between automatic retries of a shoot whose last
	// operation ended in Error; defaults 5 s and 5 min.
	RetryMin, RetryMax time.Duration
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
	// HubTimeout bounds each call to the hub; default 30 s.
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Workers <= 0 {
		c.Workers = 5
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = time.Hour
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 5 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	if c.WaitInterval <= 0 {
		c.WaitInterval = 100 * time.Millisecond
	}
	if c.ExtensionErrorThreshold <= 0 {
		c.ExtensionErrorThreshold = 30 * time.Second
	}
	if c.TaskTimeout <= 0 {
		c.TaskTimeout = 10 * time.Minute
	}
	if c.CareInterval <= 0 {
		c.CareInterval = time.Minute
	}
	if c.HubTimeout <= 0 {
		c.HubTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Controller runs the shoot flows of one seed. Create it with New and run it with Run.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	shoots  *hubobject.Client[*corev1beta1.Shoot] // writes, and the hub's answers until the cache has them
	states  corev1beta1.ShootStateServiceClient
	entries corev1beta1.BackupEntryServiceClient
	// secrets and configMaps publish the shoots' CA bundles and SSH keypairs in their project namespaces.
	secrets    kcorev1.SecretServiceClient
	configMaps kcorev1.ConfigMapServiceClient
	ext        *extension.Client
	queue      *keyqueue.Queue

	mu       sync.Mutex
	failures map[string]int       // consecutive failed operations, per key
	retryAt  map[string]time.Time // earliest automatic retry after an Error, per key
	running  map[string]Flow      // flows running now, per key
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil {
		return nil, errors.New("shoot controller: SeedName, Cache, Hub and Seed are required")
	}
	cfg.defaults()
	c := &Controller{
		cfg:        cfg,
		log:        cfg.Log.With("controller", "shoot"),
		shoots:     hubobject.NewClient[*corev1beta1.Shoot](corev1beta1.NewShootServiceClient(cfg.Hub), cfg.HubTimeout, cfg.Now),
		states:     corev1beta1.NewShootStateServiceClient(cfg.Hub),
		entries:    corev1beta1.NewBackupEntryServiceClient(cfg.Hub),
		secrets:    kcorev1.NewSecretServiceClient(cfg.Hub),
		configMaps: kcorev1.NewConfigMapServiceClient(cfg.Hub),
		ext: &extension.Client{C: cfg.Seed, Now: cfg.Now, Interval: cfg.WaitInterval,
			ErrorThreshold: cfg.ExtensionErrorThreshold},
		failures: map[string]int{},
		retryAt:  map[string]time.Time{},
		running:  map[string]Flow{},
	}
	c.queue = keyqueue.New(keyqueue.Config{Name: "shoot", Sync: c.sync, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Log: c.log})
	return c, nil
}

// Run works on shoots until ctx ends. It waits for the cache's first sync, so that decisions see the whole seed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	remove := c.cfg.Cache.AddEventHandler(seedgraph.Shoots, cache.HandlerFuncs{
		AddFunc:    func(obj proto.Message) { c.enqueue(obj) },
		UpdateFunc: func(_, obj proto.Message) { c.enqueue(obj) },
		DeleteFunc: func(obj proto.Message) { c.forget(obj) },
	})
	defer remove()
	for _, s := range cache.List[*corev1beta1.Shoot](c.cfg.Cache, seedgraph.Shoots) {
		c.enqueue(s)
	}
	c.log.Info("shoot controller started", "workers", c.cfg.Workers)
	var wg sync.WaitGroup
	wg.Go(func() { c.careLoop(ctx) })
	c.queue.Run(ctx, c.cfg.Workers)
	wg.Wait()
	return nil
}

func keyOf(s *corev1beta1.Shoot) string { return hubobject.Key(s) }

func (c *Controller) enqueue(obj proto.Message) {
	if s, ok := obj.(*corev1beta1.Shoot); ok {
		c.queue.Add(keyOf(s))
	}
}

// forget drops what the controller keeps of a shoot the hub no longer assigns (deleted, or moved to another seed
// after its migration).
func (c *Controller) forget(obj proto.Message) {
	s, ok := obj.(*corev1beta1.Shoot)
	if !ok {
		return
	}
	key := keyOf(s)
	c.shoots.Forget(key)
	c.mu.Lock()
	delete(c.failures, key)
	delete(c.retryAt, key)
	c.mu.Unlock()
	c.queue.Forget(key)
}

// current is the newest state of the shoot the agent knows: the cache's, or the hub's answer to our last write when
// the cache has not caught up with it yet; nil when the hub no longer assigns it.
func (c *Controller) current(key string) *corev1beta1.Shoot {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*corev1beta1.Shoot](c.cfg.Cache, seedgraph.Shoots, ns, name)
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
	err := c.run(ctx, s, d, log)
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
	c.mu.Unlock()
	log.Info("flow succeeded", "flow", d.Flow.String(), "type", d.Type, "took", time.Since(begin).Round(time.Millisecond))
	if d.Flow == FlowReconcile {
		return c.cfg.SyncPeriod, nil
	}
	return 0, nil
}

// tracer makes the span of each shoot operation; the flow's tasks are its children.
var tracer = otel.Tracer("github.com/trellis-dev/trellis/agent/shoot")

// run runs the flow d for shoot s and reports its progress and outcome on the shoot.
// The flow continues the trace of the request that wrote the shoot's cached version, when the hub sent one.
func (c *Controller) run(ctx context.Context, s *corev1beta1.Shoot, d Decision, log *slog.Logger) (err error) {
	md := s.GetMetadata()
	ctx = tracing.WithTraceparent(ctx, c.cfg.Cache.Traceparent(seedgraph.Shoots, md.GetNamespace(), md.GetName()))
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
