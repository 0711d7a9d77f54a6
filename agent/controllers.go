package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/trellis-dev/trellis/agent/backoff"
	"github.com/trellis-dev/trellis/agent/backupbucket"
	"github.com/trellis-dev/trellis/agent/backupentry"
	"github.com/trellis-dev/trellis/agent/bastion"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/controllerinstallation"
	"github.com/trellis-dev/trellis/agent/gardenlet"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/agent/seedcare"
	"github.com/trellis-dev/trellis/agent/shoot"
	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
	"github.com/trellis-dev/trellis/deploy/charts"
	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// offerHubConn gives the controllers their connection to the hub once the first session proved the credentials:
// one long-lived mTLS connection that presents the current client certificate at each handshake, so rotations need
// no new connection. A failed dial is tried again with the next session.
func (a *Agent) offerHubConn(creds *identity.Credentials) {
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	if a.hubConn != nil {
		return
	}
	conn, err := a.dial(creds, true)
	if err != nil {
		a.log.Error("controllers' hub connection", "err", err)
		return
	}
	a.hubConn = conn
	close(a.hubReady)
}

// HubConn waits until the agent has a hub connection for its controllers and returns it: an mTLS connection with the
// seed's identity, for writes under the seed authorizer.
func (a *Agent) HubConn(ctx context.Context) (grpc.ClientConnInterface, error) {
	select {
	case <-a.hubReady:
		return a.hubConn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// closeHubConn closes the controllers' hub connection, if there is one; the agent calls it when it stops.
func (a *Agent) closeHubConn() {
	select {
	case <-a.hubReady:
		_ = a.hubConn.Close()
	default:
	}
}

// hubLink is the controllers' hub connection before there is one: each call waits for HubConn (or its context).
// The controllers are built before the agent connects, and run only once the connection is there.
type hubLink struct{ a *Agent }

func (l hubLink) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	conn, err := l.a.HubConn(ctx)
	if err != nil {
		return err
	}
	return conn.Invoke(ctx, method, args, reply, opts...)
}

func (l hubLink) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	conn, err := l.a.HubConn(ctx)
	if err != nil {
		return nil, err
	}
	return conn.NewStream(ctx, desc, method, opts...)
}

// Scheme is the scheme of the agent's seed client: client-go's kinds and the extension kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := extensionsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// runner is a controller of the seed side.
type runner interface {
	Run(ctx context.Context) error
}

// seedSide is the agent's seed side: clients and an informer cache of the seed cluster, and the controllers.
type seedSide struct {
	mapper      meta.RESTMapper // the clients' and informers' (discovery, refreshed on a miss)
	informers   cache.Cache     // the seed's informers, for the client's cached reads
	client      client.Client   // reads the extension kinds from informers, the rest from the API server
	direct      client.Client   // reads everything from the API server
	controllers []runner
}

// newSeedClients are the seed side's informer cache, its client that reads from the cache, and a client without one,
// over one HTTP client and REST mapper (what a controller-runtime cluster builds, without its event recorders).
func newSeedClients(cfg *rest.Config, scheme *runtime.Scheme) (*seedSide, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("REST mapper: %w", err)
	}
	informers, err := cache.New(cfg, cache.Options{HTTPClient: hc, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	// Waits poll extension objects, so those are read from informers; the rest is read directly (the shoot control
	// planes' Deployments and StatefulSets too: informers would hold every workload of the seed, and need the right
	// to list and watch them all).
	cached, err := client.New(cfg, client.Options{HTTPClient: hc, Scheme: scheme, Mapper: mapper,
		Cache: &client.CacheOptions{Reader: informers, DisableFor: []client.Object{
			&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Namespace{}, &corev1.Service{}, &corev1.Node{}, &corev1.Pod{},
			&corev1.PersistentVolumeClaim{}, &appsv1.Deployment{}, &appsv1.StatefulSet{},
		}}})
	if err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{HTTPClient: hc, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	return &seedSide{mapper: mapper, informers: informers, client: cached, direct: direct}, nil
}

// newSeedSide builds the seed clients and every seed-side controller, without starting anything. An error means a
// controller cannot be built, and the agent does not start.
func (a *Agent) newSeedSide() (*seedSide, error) {
	side, err := newSeedClients(a.seedREST, Scheme())
	if err != nil {
		return nil, fmt.Errorf("seed client: %w", err)
	}
	hub := hubLink{a}
	base := controller.Base{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: side.client, Log: a.log}
	c := a.cfg.Controllers.Shoot
	shootBase := base
	shootBase.Workers, shootBase.SyncPeriod = int(*c.ConcurrentSyncs), c.SyncPeriod.Duration
	shootBase.RetryMin, shootBase.RetryMax = c.RetryMinDelay.Duration, c.RetryMaxDelay.Duration
	images, err := imagevector.Load(c.ControlPlane.ImageVector)
	if err != nil {
		return nil, fmt.Errorf("controllers.shoot.controlPlane.imageVector: %w", err)
	}
	var snapshotInterval time.Duration
	if c.ControlPlane.ETCDSnapshotInterval != nil {
		snapshotInterval = c.ControlPlane.ETCDSnapshotInterval.Duration
	}
	shoots, err := shoot.New(shoot.Config{Base: shootBase, Identity: a.gardener,
		ETCDSnapshotInterval:    snapshotInterval,
		ExtensionErrorThreshold: c.ExtensionErrorThreshold.Duration,
		TaskTimeout:             c.TaskTimeout.Duration,
		CareInterval:            a.cfg.Controllers.ShootCare.SyncPeriod.Duration,
		ControlPlaneMode:        c.ControlPlane.Mode,
		Images:                  images,
		DialService:             a.dialService,
		TunnelDomain:            a.TunnelDomain,
	})
	if err != nil {
		return nil, err
	}
	poll := 250 * time.Millisecond // the shoot flows wait on backup entries: keep their round trips short
	buckets, err := backupbucket.New(backupbucket.Config{Base: base, PollInterval: poll})
	if err != nil {
		return nil, err
	}
	entries, err := backupentry.New(backupentry.Config{Base: base, PollInterval: poll})
	if err != nil {
		return nil, err
	}
	bastions, err := bastion.New(bastion.Config{Base: base})
	if err != nil {
		return nil, err
	}
	versions, err := discovery.NewDiscoveryClientForConfig(a.seedREST)
	if err != nil {
		return nil, fmt.Errorf("seed discovery client: %w", err)
	}
	care, err := seedcare.New(seedcare.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: side.client,
		SeedReader: side.direct, Log: a.log, SyncPeriod: a.cfg.Controllers.SeedCare.SyncPeriod.Duration,
		Identity: a.gardener, Versions: versions})
	if err != nil {
		return nil, err
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: a.seedREST, Log: a.log.With("component", "helm")})
	if err != nil {
		return nil, err
	}
	installations, err := controllerinstallation.New(controllerinstallation.Config{Base: base, Releases: releases, Version: a.version})
	if err != nil {
		return nil, err
	}
	required, err := controllerinstallation.NewRequired(controllerinstallation.RequiredConfig{SeedName: a.seedName, Cache: a.cache,
		Hub: hub, Informers: side.informers, Log: a.log})
	if err != nil {
		return nil, err
	}
	managedSeeds, err := a.newManagedSeeds(base)
	if err != nil {
		return nil, err
	}
	controllers := []runner{shoots, buckets, entries, bastions, care, installations, required, managedSeeds}
	selfUpgrade, err := a.newGardenletController(base, releases)
	if err != nil {
		return nil, err
	}
	if selfUpgrade != nil {
		controllers = append(controllers, selfUpgrade)
	}
	side.controllers = controllers
	return side, nil
}

// The environment through which the trellis-agent chart tells the agent its own release (and pod), for the self-upgrade.
const (
	envReleaseName      = "TRELLIS_AGENT_RELEASE_NAME"
	envReleaseNamespace = "TRELLIS_AGENT_RELEASE_NAMESPACE"
	envPodName          = "POD_NAME"
)

// newGardenletController builds the self-upgrade controller (package gardenlet) when the agent runs from its chart,
// which names the release in the environment; an agent started otherwise (a host process) has no release to upgrade
// and gets nil.
func (a *Agent) newGardenletController(base controller.Base, releases *helmrelease.Manager) (runner, error) {
	name, namespace := os.Getenv(envReleaseName), os.Getenv(envReleaseNamespace)
	if name == "" || namespace == "" {
		a.log.Info("no self-upgrade: the agent does not run from its chart (" + envReleaseName + " and " +
			envReleaseNamespace + " are unset)")
		return nil, nil
	}
	chart, err := charts.Archive(charts.TrellisAgent)
	if err != nil {
		return nil, fmt.Errorf("the embedded trellis-agent chart: %w", err)
	}
	return gardenlet.New(gardenlet.Config{Base: base, Releases: releases, Chart: chart, PodName: os.Getenv(envPodName),
		Release: gardenlet.Release{Name: name, Namespace: namespace}})
}

// run runs the seed side until ctx ends: it installs or upgrades the extension CRDs in the seed (retried with
// backoff), starts the informer cache of the extension kinds, waits for the hub connection and the first sync of the
// assignments, and runs the controllers. It returns when they all have, with an error if the seed's cache could not
// start, and nil when ctx ended.
func (s *seedSide) run(ctx context.Context, a *Agent) error {
	b := &backoff.Backoff{Initial: time.Second, Max: 30 * time.Second, Rand: a.rand}
	kinds := append([]client.Object{&extensionsv1alpha1.Cluster{}}, objectsOf(extensionsv1alpha1.ObjectKinds())...)
	for {
		err := a.installCRDs(ctx, s.direct)
		if err == nil {
			err = waitMapped(ctx, s.mapper, kinds, servedTimeout)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		d := b.Next(time.Now())
		a.log.Error("installing the extension CRDs failed; retrying", "err", err, "retryIn", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := s.informers.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error("seed cache stopped", "err", err)
		}
	})
	// Start the informers of every extension kind now, so that the first shoot does not wait for them. As a
	// controller-runtime manager, the agent gives up when they do not sync within cacheSyncTimeout (and stops with
	// that error, to be restarted) instead of waiting without end.
	syncCtx, cancelSync := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancelSync()
	for _, obj := range kinds {
		if _, err := s.informers.GetInformer(syncCtx, obj); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("seed informer of %T: %w", obj, err)
		}
	}
	if !s.informers.WaitForCacheSync(syncCtx) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the seed's informers did not sync within %s", cacheSyncTimeout)
	}
	if _, err := a.HubConn(ctx); err != nil {
		return nil // ctx ended
	}
	a.controllers.Store(true)
	defer a.controllers.Store(false)
	for _, r := range s.controllers {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("controller stopped", "controller", fmt.Sprintf("%T", r), "err", err)
			}
		})
	}
	<-ctx.Done()
	return nil
}

// cacheSyncTimeout bounds the start of the seed's informers: controller-runtime's default CacheSyncTimeout.
const cacheSyncTimeout = 2 * time.Minute

// servedTimeout bounds the wait for the seed's discovery to list the kinds of newly established CRDs.
const servedTimeout = 10 * time.Second

// waitMapped waits until mapper maps every kind in objs, at most timeout. kube-apiserver marks a CRD Established
// before its discovery document lists the kind (tens of milliseconds later under load), and an informer started in
// between fails for as long as it runs: its mapping is taken once. Each miss makes the seed side's mapper read the
// group's discovery again. The error names the kinds still missing after timeout.
func waitMapped(ctx context.Context, mapper meta.RESTMapper, objs []client.Object, timeout time.Duration) error {
	gvks := make([]schema.GroupVersionKind, len(objs))
	scheme := Scheme()
	for i, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		gvks[i] = gvk
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var missing []string
		for _, gvk := range gvks {
			if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
				missing = append(missing, gvk.Kind)
			} else if err != nil {
				return fmt.Errorf("discovery of %s: %w", gvk.Kind, err)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the seed does not serve %v %s after their CRDs were established", missing, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// installCRDs installs or upgrades the extension CRDs the agent ships, with the seed client c.
func (a *Agent) installCRDs(ctx context.Context, c client.Client) error {
	begin := time.Now()
	if err := crds.Install(ctx, c); err != nil {
		return err
	}
	a.crdsInstalled.Store(true)
	a.log.Info("extension CRDs installed", "took", time.Since(begin).Round(time.Millisecond))
	return nil
}

func objectsOf(objs []extensionsv1alpha1.Object) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}
