package seedcare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Condition types the controller owns, as Gardener spells them. GardenletReady belongs to the hub.
const (
	SeedSystemComponentsHealthy = "SeedSystemComponentsHealthy"
)

// ClusterIdentity names the seed cluster's ConfigMap kube-system/cluster-identity and its key, as in Gardener.
const ClusterIdentity = "cluster-identity"

// Defaults of Config.
const (
	DefaultSyncPeriod              = 30 * time.Second
	DefaultThreshold               = time.Minute
	DefaultStaleHeartbeatThreshold = 2 * time.Minute
	// ExtensionNamespacePrefix prefixes the namespaces ControllerInstallations deploy extensions into.
	ExtensionNamespacePrefix = "extension-"
)

// Config configures the seed care controller.
type Config struct {
	// SeedName is the agent's seed.
	SeedName string
	// Cache is the agent's copy of its seed's objects on the hub: the Seed and its ControllerInstallations.
	Cache *cache.Cache
	// Hub is the agent's mTLS connection to the hub, for the Seed's status.
	Hub grpc.ClientConnInterface
	// Seed is a client of the seed cluster whose scheme has client-go's kinds.
	Seed client.Client
	// SeedReader, when set, is used for the reads instead of Seed: CRDs, namespaces and Leases are best read from
	// the API server directly (cluster.GetAPIReader) rather than through informers over every Lease of the seed.
	SeedReader client.Reader
	// Log receives the controller's logs; nil discards.
	Log *slog.Logger
	// SyncPeriod is how often the conditions are computed; default 30 s (gardenlet's seed care sync period).
	SyncPeriod time.Duration
	// Thresholds says per condition type how long a failing check keeps the condition Progressing before it turns
	// False (Gardener's conditionThresholds); a type not listed gets DefaultThreshold, and a zero duration turns it
	// False at once.
	Thresholds map[string]time.Duration
	// StaleHeartbeatThreshold is how old an extension's heartbeat Lease may be before the extension counts as
	// unhealthy; default 2 min (four missed renewals at extensions' default 30 s interval).
	StaleHeartbeatThreshold time.Duration
	// CRDs are the names of the CustomResourceDefinitions that must be established in the seed; default: the
	// extension CRDs the agent installs (package deploy/crds).
	CRDs []string
	// HubTimeout bounds each call to the hub; default 30 s.
	HubTimeout time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Identity is the agent's identity, written to the Seed's status.gardener as the gardenlet writes its own (id,
	// name, version); nil leaves the field alone.
	Identity *corev1beta1.Gardener
	// Versions reports the seed cluster's version (client-go's discovery client does: GET /version); its
	// gitVersion is written to status.kubernetesVersion. Nil leaves the field alone.
	Versions ServerVersioner
}

// ServerVersioner reports a cluster's version, as client-go's discovery client does.
type ServerVersioner interface {
	ServerVersion() (*version.Info, error)
}

func (c *Config) defaults() error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SeedReader == nil {
		c.SeedReader = c.Seed
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.StaleHeartbeatThreshold <= 0 {
		c.StaleHeartbeatThreshold = DefaultStaleHeartbeatThreshold
	}
	if c.CRDs == nil {
		all, err := crds.CRDs()
		if err != nil {
			return err
		}
		for _, crd := range all {
			c.CRDs = append(c.CRDs, crd.Name)
		}
	}
	if c.HubTimeout <= 0 {
		c.HubTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Controller maintains the conditions of one Seed. Create it with New and run it with Run.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	seeds corev1beta1.SeedServiceClient
	nudge chan struct{}
}

// New returns a controller for cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.SeedName == "" || cfg.Cache == nil || cfg.Hub == nil || cfg.Seed == nil {
		return nil, errors.New("seed care controller: SeedName, Cache, Hub and Seed are required")
	}
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("seed care controller: %w", err)
	}
	return &Controller{cfg: cfg, log: cfg.Log.With("controller", "seedcare"),
		seeds: corev1beta1.NewSeedServiceClient(cfg.Hub), nudge: make(chan struct{}, 1)}, nil
}

// Run computes the conditions every SyncPeriod, and at once when the Seed or a ControllerInstallation of the seed
// changes, until ctx ends. It waits for the cache's first sync, so that it sees every ControllerInstallation.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.cfg.Cache.WaitForSync(ctx); err != nil {
		return nil // ctx ended
	}
	poke := func() {
		select {
		case c.nudge <- struct{}{}:
		default:
		}
	}
	remove := c.cfg.Cache.AddEventHandler(resources.ControllerInstallations, cache.HandlerFuncs{
		AddFunc:    func(proto.Message) { poke() },
		UpdateFunc: func(_, _ proto.Message) { poke() },
		DeleteFunc: func(proto.Message) { poke() },
	})
	defer remove()
	// The Seed itself: its status.observedGeneration follows a new generation at once.
	removeSeed := c.cfg.Cache.AddEventHandler(resources.Seeds, cache.HandlerFuncs{
		AddFunc:    func(proto.Message) { poke() },
		UpdateFunc: func(_, _ proto.Message) { poke() },
	})
	defer removeSeed()
	c.log.Info("seed care controller started", "syncPeriod", c.cfg.SyncPeriod)
	t := time.NewTicker(c.cfg.SyncPeriod)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("seed care failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.nudge:
		}
	}
}

// result is the outcome of one check: healthy, or why not.
type result struct {
	ok              bool
	reason, message string
}

// Sync computes the controller's conditions and the agent's facts once and writes them to the Seed's status on the
// hub when they changed.
func (c *Controller) Sync(ctx context.Context) error {
	seed, ok := cache.Get[*corev1beta1.Seed](c.cfg.Cache, resources.Seeds, "", c.cfg.SeedName)
	if !ok {
		return nil // not registered yet
	}
	now := c.cfg.Now()
	checks := map[string]result{
		SeedSystemComponentsHealthy: c.systemComponents(ctx, now),
	}
	want := map[string]*metav1.Condition{}
	for typ, r := range checks {
		old := findCondition(seed.GetStatus().GetConditions(), typ)
		if n := next(old, typ, r, c.threshold(typ), now); n != nil {
			want[typ] = n
		}
	}
	f := c.facts(ctx, seed)
	if len(want) == 0 && !f.apply(proto.CloneOf(seed).GetStatus()) {
		return nil
	}
	return c.writeStatus(ctx, want, f)
}

// facts is what the agent reports in the Seed's status besides conditions, as the gardenlet's seed reconciler does:
// who acts on the seed, the seed cluster's Kubernetes version and identity, and the generation it has seen.
type facts struct {
	gardener          *corev1beta1.Gardener // nil: not configured
	kubernetesVersion string                // "": unknown
	clusterIdentity   string                // "": already set, or unknown
	generation        int64
	now               time.Time // when the facts were gathered: the lastOperation's time
}

// facts gathers the facts about seed (the cached Seed). A fact that cannot be read now is left out and logged; the
// next sync tries again.
func (c *Controller) facts(ctx context.Context, seed *corev1beta1.Seed) facts {
	f := facts{gardener: c.cfg.Identity, generation: seed.GetMetadata().GetGeneration(), now: c.cfg.Now()}
	if c.cfg.Versions != nil {
		if v, err := c.cfg.Versions.ServerVersion(); err != nil {
			c.log.Warn("cannot read the seed cluster's version", "err", err)
		} else {
			f.kubernetesVersion = v.GitVersion
		}
	}
	if seed.GetStatus().GetClusterIdentity() == "" {
		id, err := c.clusterIdentity(ctx)
		if err != nil {
			c.log.Warn("cannot read the seed cluster's identity", "err", err)
		}
		f.clusterIdentity = id
	}
	return f
}

// clusterIdentity is the seed cluster's identity as Gardener determines it: the ConfigMap kube-system/cluster-identity
// (key cluster-identity) when there is one, else the UID of the namespace kube-system.
func (c *Controller) clusterIdentity(ctx context.Context) (string, error) {
	cm := &corev1.ConfigMap{}
	err := c.cfg.SeedReader.Get(ctx, client.ObjectKey{Namespace: kmetav1.NamespaceSystem, Name: ClusterIdentity}, cm)
	if err == nil {
		return cm.Data[ClusterIdentity], nil
	}
	if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("read ConfigMap %s/%s: %w", kmetav1.NamespaceSystem, ClusterIdentity, err)
	}
	ns := &corev1.Namespace{}
	if err := c.cfg.SeedReader.Get(ctx, client.ObjectKey{Name: kmetav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("read namespace %s: %w", kmetav1.NamespaceSystem, err)
	}
	return string(ns.UID), nil
}

// apply writes the facts into st and reports whether it changed. The cluster identity is only ever set, never
// changed (Gardener's is immutable), and the observed generation only moves forward. When it moves (or the Seed has
// no lastOperation yet), the agent has taken the Seed's spec up: lastOperation reports a succeeded Reconcile with
// gardenlet's text, as gardenlet's seed reconciler does at the end of its flow (the agent's own seed-side work, its
// CRDs, is done before its controllers start).
func (f facts) apply(st *corev1beta1.SeedStatus) bool {
	if st == nil {
		return f.gardener != nil || f.kubernetesVersion != "" || f.clusterIdentity != "" || f.generation > 0
	}
	changed := false
	if f.gardener != nil && !proto.Equal(st.Gardener, f.gardener) {
		st.Gardener, changed = proto.CloneOf(f.gardener), true
	}
	if f.kubernetesVersion != "" && st.GetKubernetesVersion() != f.kubernetesVersion {
		st.KubernetesVersion, changed = proto.String(f.kubernetesVersion), true
	}
	if f.clusterIdentity != "" && st.GetClusterIdentity() == "" {
		st.ClusterIdentity, changed = proto.String(f.clusterIdentity), true
	}
	if f.generation > st.GetObservedGeneration() || st.LastOperation == nil && f.generation > 0 {
		st.ObservedGeneration, changed = proto.Int64(max(f.generation, st.GetObservedGeneration())), true
		st.LastOperation = &metav1.LastOperation{Type: "Reconcile", State: "Succeeded", Progress: proto.Int32(100),
			Description: "Seed cluster has been successfully reconciled.", LastUpdateTime: timestamppb.New(f.now.UTC().Truncate(time.Second))}
	}
	return changed
}

func (c *Controller) threshold(typ string) time.Duration {
	if d, ok := c.cfg.Thresholds[typ]; ok {
		return d
	}
	return DefaultThreshold
}

// next is the condition typ after a check with result r, or nil when old needs no change. A passing check makes it
// True; a failing one makes it Progressing, and False once it has been Progressing for longer than threshold (as
// Gardener's health checks do, so that a short hiccup does not flap the Seed's readiness).
func next(old *metav1.Condition, typ string, r result, threshold time.Duration, now time.Time) *metav1.Condition {
	st := "True"
	if !r.ok {
		switch old.GetStatus() {
		case "False":
			st = "False"
		case "Progressing":
			st = "Progressing"
			if lt := old.GetLastTransitionTime(); lt == nil || now.Sub(lt.AsTime()) > threshold {
				st = "False"
			}
		default:
			st = "Progressing"
			if threshold <= 0 {
				st = "False"
			}
		}
	}
	if old != nil && old.GetStatus() == st && old.GetReason() == r.reason && old.GetMessage() == r.message {
		return nil
	}
	ts := timestamppb.New(now.UTC().Truncate(time.Second))
	n := &metav1.Condition{Type: typ, Status: st, Reason: r.reason, Message: r.message, LastUpdateTime: ts, LastTransitionTime: ts}
	if old != nil && old.GetStatus() == st && old.GetLastTransitionTime() != nil {
		n.LastTransitionTime = old.GetLastTransitionTime()
	}
	return n
}

// systemComponents checks that the extension CRDs are established and that every extension deployed into the seed
// (namespaces extension-*) renews its heartbeat Lease.
func (c *Controller) systemComponents(ctx context.Context, now time.Time) result {
	var crdProblems, heartbeatProblems []string
	for _, name := range c.cfg.CRDs {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := c.cfg.SeedReader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				crdProblems = append(crdProblems, fmt.Sprintf("CRD %s is missing", name))
			} else {
				crdProblems = append(crdProblems, fmt.Sprintf("CRD %s cannot be read: %v", name, err))
			}
			continue
		}
		if !established(crd) {
			crdProblems = append(crdProblems, fmt.Sprintf("CRD %s is not established", name))
		}
	}
	if len(crdProblems) > 0 {
		return result{reason: "CRDsNotEstablished", message: strings.Join(crdProblems, "; ")}
	}

	namespaces := &corev1.NamespaceList{}
	if err := c.cfg.SeedReader.List(ctx, namespaces); err != nil {
		return result{reason: "HeartbeatsUnknown", message: fmt.Sprintf("cannot list namespaces: %v", err)}
	}
	for _, ns := range namespaces.Items {
		if !strings.HasPrefix(ns.Name, ExtensionNamespacePrefix) || ns.DeletionTimestamp != nil {
			continue
		}
		lease := &coordinationv1.Lease{}
		err := c.cfg.SeedReader.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: extensionsv1alpha1.HeartbeatLeaseName}, lease)
		switch {
		case apierrors.IsNotFound(err):
			heartbeatProblems = append(heartbeatProblems, fmt.Sprintf("the extension in namespace %s has not posted a heartbeat", ns.Name))
		case err != nil:
			heartbeatProblems = append(heartbeatProblems, fmt.Sprintf("the heartbeat of the extension in namespace %s cannot be read: %v", ns.Name, err))
		case lease.Spec.RenewTime == nil || now.Sub(lease.Spec.RenewTime.Time) > c.cfg.StaleHeartbeatThreshold:
			last := "never"
			if lease.Spec.RenewTime != nil {
				last = lease.Spec.RenewTime.UTC().Format(time.RFC3339)
			}
			heartbeatProblems = append(heartbeatProblems, fmt.Sprintf("the extension in namespace %s last renewed its heartbeat at %s", ns.Name, last))
		}
	}
	if len(heartbeatProblems) > 0 {
		return result{reason: "ExtensionHeartbeatsStale", message: strings.Join(heartbeatProblems, "; ")}
	}
	return result{ok: true, reason: "SystemComponentsRunning", message: "All system components are healthy."}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// writeStatus sets the conditions in want and the facts f on the Seed's status, keeping every other condition
// (GardenletReady is the hub's) and field (the hub writes clientCertificateExpirationTimestamp), with an update of the
// status that retries on conflicts.
func (c *Controller) writeStatus(ctx context.Context, want map[string]*metav1.Condition, f facts) error {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
		seed, err := c.seeds.Get(cctx, &metav1.GetRequest{Name: c.cfg.SeedName})
		cancel()
		if err != nil {
			return fmt.Errorf("read seed %s: %w", c.cfg.SeedName, err)
		}
		if seed.Status == nil {
			seed.Status = &corev1beta1.SeedStatus{}
		}
		conds := slices.Clone(seed.Status.Conditions)
		for _, typ := range slices.Sorted(maps.Keys(want)) {
			if i := slices.IndexFunc(conds, func(x *metav1.Condition) bool { return x.GetType() == typ }); i >= 0 {
				conds[i] = want[typ]
			} else {
				conds = append(conds, want[typ])
			}
		}
		seed.Status.Conditions = conds
		if !f.apply(seed.Status) && len(want) == 0 {
			return nil // the hub has them already
		}
		cctx, cancel = context.WithTimeout(ctx, c.cfg.HubTimeout)
		_, err = c.seeds.UpdateStatus(cctx, seed)
		cancel()
		if err == nil {
			for typ, cond := range want {
				c.log.Info("seed condition changed", "type", typ, "status", cond.GetStatus(), "reason", cond.GetReason(), "message", cond.GetMessage())
			}
			c.log.Debug("seed status written", "kubernetesVersion", seed.Status.GetKubernetesVersion(),
				"clusterIdentity", seed.Status.GetClusterIdentity(), "observedGeneration", seed.Status.GetObservedGeneration())
			return nil
		}
		if status.Code(err) != codes.Aborted || attempt >= 5 {
			return fmt.Errorf("update the status of seed %s: %w", c.cfg.SeedName, err)
		}
	}
}

func findCondition(conds []*metav1.Condition, typ string) *metav1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}
