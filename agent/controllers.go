package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/trellis-dev/trellis/agent/backoff"
	"github.com/trellis-dev/trellis/agent/backupbucket"
	"github.com/trellis-dev/trellis/agent/backupentry"
	"github.com/trellis-dev/trellis/agent/bastion"
	"github.com/trellis-dev/trellis/agent/controllerinstallation"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/agent/identity"
	"github.com/trellis-dev/trellis/agent/seedcare"
	"github.com/trellis-dev/trellis/agent/shoot"
	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// offerHubConn gives the controllers their connection to the hub once the first session proved the credentials:
// one long-lived mTLS connection that presents the current client certificate at each handshake, so rotations need
// no new connection.
func (a *Agent) offerHubConn(creds *identity.Credentials) {
	a.hubOnce.Do(func() {
		conn, err := a.dial(creds, true)
		if err != nil {
			a.log.Error("controllers' hub connection", "err", err)
			a.hubOnce = sync.Once{} // try again with the next session
			return
		}
		a.hubConn = conn
		close(a.hubReady)
	})
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

// runControllers runs the seed side until ctx ends: it installs or upgrades the extension CRDs in the seed, starts
// an informer cache of the extension kinds, waits for the hub connection and the first sync of the assignments, and
// runs the controllers. Failures before the controllers run are retried with backoff.
func (a *Agent) runControllers(ctx context.Context) {
	if a.seedREST == nil {
		a.log.Warn("seed-side controllers are off: the agent was given a seed clientset without a REST config")
		return
	}
	b := &backoff.Backoff{Initial: time.Second, Max: 30 * time.Second, Rand: a.rand}
	for {
		err := a.installCRDs(ctx)
		if err == nil || ctx.Err() != nil {
			break
		}
		d := b.Next(time.Now())
		a.log.Error("installing the extension CRDs failed; retrying", "err", err, "retryIn", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
	seed, err := cluster.New(a.seedREST, func(o *cluster.Options) {
		o.Scheme = Scheme()
		// Waits poll extension objects, so those are read from informers; the rest is read directly.
		o.Client.Cache = &client.CacheOptions{DisableFor: []client.Object{
			&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Namespace{}, &corev1.Service{},
		}}
	})
	if err != nil {
		a.log.Error("seed client", "err", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := seed.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error("seed cache stopped", "err", err)
		}
	})
	// Start the informers of every extension kind now, so that the first shoot does not wait for them.
	for _, obj := range append([]client.Object{&extensionsv1alpha1.Cluster{}}, objectsOf(extensionsv1alpha1.ObjectKinds())...) {
		if _, err := seed.GetCache().GetInformer(ctx, obj); err != nil {
			a.log.Error("seed informer", "kind", fmt.Sprintf("%T", obj), "err", err)
			return
		}
	}
	if !seed.GetCache().WaitForCacheSync(ctx) {
		return
	}
	hub, err := a.HubConn(ctx)
	if err != nil {
		return
	}
	c := a.cfg.Controllers.Shoot
	shoots, err := shoot.New(shoot.Config{
		SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: seed.GetClient(), Log: a.log,
		Workers:                 int(*c.ConcurrentSyncs),
		SyncPeriod:              c.SyncPeriod.Duration,
		RetryMin:                c.RetryMinDelay.Duration,
		RetryMax:                c.RetryMaxDelay.Duration,
		ExtensionErrorThreshold: c.ExtensionErrorThreshold.Duration,
		TaskTimeout:             c.TaskTimeout.Duration,
		CareInterval:            a.cfg.Controllers.ShootCare.SyncPeriod.Duration,
	})
	if err != nil {
		a.log.Error("shoot controller", "err", err)
		return
	}
	runners := []interface{ Run(context.Context) error }{shoots}
	poll := 250 * time.Millisecond // the shoot flows wait on backup entries: keep their round trips short
	buckets, err := backupbucket.New(backupbucket.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: seed.GetClient(), Log: a.log, PollInterval: poll})
	if err != nil {
		a.log.Error("backup bucket controller", "err", err)
		return
	}
	entries, err := backupentry.New(backupentry.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: seed.GetClient(), Log: a.log, PollInterval: poll})
	if err != nil {
		a.log.Error("backup entry controller", "err", err)
		return
	}
	bastions, err := bastion.New(bastion.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: seed.GetClient(), Log: a.log})
	if err != nil {
		a.log.Error("bastion controller", "err", err)
		return
	}
	versions, err := discovery.NewDiscoveryClientForConfig(a.seedREST)
	if err != nil {
		a.log.Error("seed discovery client", "err", err)
		return
	}
	care, err := seedcare.New(seedcare.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub, Seed: seed.GetClient(),
		SeedReader: seed.GetAPIReader(), Log: a.log, SyncPeriod: a.cfg.Controllers.SeedCare.SyncPeriod.Duration,
		Identity: a.gardener, Versions: versions})
	if err != nil {
		a.log.Error("seed care controller", "err", err)
		return
	}
	releases, err := helmrelease.New(helmrelease.Config{REST: a.seedREST, Log: a.log.With("component", "helm")})
	if err != nil {
		a.log.Error("helm releases", "err", err)
		return
	}
	installations, err := controllerinstallation.New(controllerinstallation.Config{SeedName: a.seedName, Cache: a.cache, Hub: hub,
		Seed: seed.GetClient(), Releases: releases, Version: a.version, Log: a.log})
	if err != nil {
		a.log.Error("controllerinstallation controller", "err", err)
		return
	}
	required, err := controllerinstallation.NewRequired(controllerinstallation.RequiredConfig{SeedName: a.seedName, Cache: a.cache,
		Hub: hub, Informers: seed.GetCache(), Log: a.log})
	if err != nil {
		a.log.Error("controllerinstallation-required controller", "err", err)
		return
	}
	runners = append(runners, buckets, entries, bastions, care, installations, required)
	a.controllers.Store(true)
	for _, r := range runners {
		wg.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("controller stopped", "controller", fmt.Sprintf("%T", r), "err", err)
			}
		})
	}
	<-ctx.Done()
}

// installCRDs installs or upgrades the extension CRDs the agent ships.
func (a *Agent) installCRDs(ctx context.Context) error {
	cs, err := apiextensionsclientset.NewForConfig(a.seedREST)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	begin := time.Now()
	if err := crds.Install(ctx, cs); err != nil {
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
