package controllerregistration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Finalizers, as Gardener names them.
const (
	// FinalizerControllerRegistration keeps a ControllerRegistration while ControllerInstallations reference it, and a
	// Seed while ControllerInstallations are deployed to it.
	FinalizerControllerRegistration = "core.gardener.cloud/controllerregistration"
	// FinalizerControllerDeployment keeps a ControllerDeployment while ControllerRegistrations reference it.
	FinalizerControllerDeployment = "core.gardener.cloud/controllerdeployment"
)

// Config configures the controllers.
type Config struct {
	Source controller.Collections
	// Workers is how many seeds are reconciled at once (default 5, Gardener's concurrentSyncs).
	Workers int
	// Resync is how often every seed is reconciled besides the changes watched (default 5 min), a safety net.
	Resync time.Duration
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

// collections are the store collections the controllers read and write.
type collections struct {
	seeds, shoots, registrations, deployments, installations, buckets, entries *store.Collection
}

func core(resource string) schema.GroupResource {
	return schema.GroupResource{Group: "core.gardener.cloud", Resource: resource}
}

func openCollections(src controller.Collections) (*collections, error) {
	c := &collections{}
	if err := controller.OpenCollections(src, "controllerregistration", map[schema.GroupResource]**store.Collection{
		core("seeds"): &c.seeds, core("shoots"): &c.shoots, core("controllerregistrations"): &c.registrations,
		core("controllerdeployments"): &c.deployments, core("controllerinstallations"): &c.installations,
		core("backupbuckets"): &c.buckets, core("backupentries"): &c.entries,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// New returns the ControllerRegistration controllers for cfg: the seed reconciler, which keeps every seed's
// ControllerInstallations in line with what it needs, and the finalizer protection of ControllerRegistrations,
// ControllerDeployments and Seeds.
func New(cfg Config) (controller.Group, error) {
	if cfg.Source == nil {
		return nil, errors.New("controllerregistration: no source")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c, err := openCollections(cfg.Source)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With("controller", "controllerregistration")
	allSeeds := func(ctx context.Context) ([]controller.Key, error) { return keysOf(ctx, c.seeds) }
	// Changes of registrations and deployments concern every seed; the mapping reads the seeds' keys from the cache.
	everySeed := func(store.Object) []controller.Key {
		keys, _ := keysOf(context.Background(), c.seeds)
		return keys
	}
	main, err := controller.New(controller.Config{
		Name:       "controllerregistration-seed",
		Reconciler: &seedReconciler{c: c, log: log, missing: map[string]string{}},
		Workers:    cfg.Workers,
		Resync:     cfg.Resync, ResyncKeys: allSeeds,
		Clock: cfg.Clock, Log: cfg.Log,
		Sources: []controller.Source{
			{Collection: c.seeds, Digest: seedDigest},
			{Collection: c.registrations, Map: everySeed, Digest: desiredDigest},
			{Collection: c.deployments, Map: everySeed, Digest: desiredDigest},
			{Collection: c.installations, Map: seedOfInstallation, Digest: installationDigest},
			{Collection: c.shoots, Map: seedsOfShoot, Digest: shootDigest},
			{Collection: c.buckets, Map: func(o store.Object) []controller.Key {
				return controller.NameKeys(o.(*corev1beta1.BackupBucket).GetSpec().GetSeedName())
			}, Digest: func(o store.Object) string { return o.(*corev1beta1.BackupBucket).GetSpec().GetProvider().GetType() }},
			{Collection: c.entries, Map: func(o store.Object) []controller.Key {
				e := o.(*corev1beta1.BackupEntry)
				return controller.NameKeys(e.GetSpec().GetSeedName(), e.GetStatus().GetSeedName())
			}, Digest: func(o store.Object) string { return o.(*corev1beta1.BackupEntry).GetSpec().GetBucketName() }},
		},
	})
	if err != nil {
		return nil, err
	}
	registrationFinalizer, err := controller.New(controller.Config{
		Name: "controllerregistration-finalizer", Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &controller.Protection{Collection: c.registrations, Finalizer: FinalizerControllerRegistration, Log: log,
			InUse: func(ctx context.Context, obj store.Object) ([]string, error) {
				return installationsWhere(ctx, c.installations, func(ci *corev1beta1.ControllerInstallation) bool {
					return ci.GetSpec().GetRegistrationRef().GetName() == obj.GetMetadata().GetName()
				})
			}},
		Sources: []controller.Source{
			{Collection: c.registrations, Digest: finalizerDigest},
			{Collection: c.installations, Map: func(o store.Object) []controller.Key {
				return []controller.Key{{Name: o.(*corev1beta1.ControllerInstallation).GetSpec().GetRegistrationRef().GetName()}}
			}, Digest: func(store.Object) string { return "" }},
		},
	})
	if err != nil {
		return nil, err
	}
	deploymentFinalizer, err := controller.New(controller.Config{
		Name: "controllerdeployment-finalizer", Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &controller.Protection{Collection: c.deployments, Finalizer: FinalizerControllerDeployment, Log: log,
			InUse: func(ctx context.Context, obj store.Object) ([]string, error) {
				regs, err := listAll[*corev1beta1.ControllerRegistration](ctx, c.registrations)
				if err != nil {
					return nil, err
				}
				var users []string
				for _, cr := range regs {
					if slices.Contains(deploymentNames(cr), obj.GetMetadata().GetName()) {
						users = append(users, "ControllerRegistration "+cr.GetMetadata().GetName())
					}
				}
				return users, nil
			}},
		Sources: []controller.Source{
			{Collection: c.deployments, Digest: finalizerDigest},
			{Collection: c.registrations, Map: func(o store.Object) []controller.Key {
				var keys []controller.Key
				for _, n := range deploymentNames(o.(*corev1beta1.ControllerRegistration)) {
					keys = append(keys, controller.Key{Name: n})
				}
				return keys
			}, Digest: func(o store.Object) string {
				return strings.Join(deploymentNames(o.(*corev1beta1.ControllerRegistration)), ",")
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	seedFinalizer, err := controller.New(controller.Config{
		Name: "controllerregistration-seed-finalizer", Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &controller.Protection{Collection: c.seeds, Finalizer: FinalizerControllerRegistration, Log: log,
			InUse: func(ctx context.Context, obj store.Object) ([]string, error) {
				cis, err := byIndex[*corev1beta1.ControllerInstallation](ctx, c.installations, obj.GetMetadata().GetName())
				if err != nil {
					return nil, err
				}
				var users []string
				for _, ci := range cis {
					users = append(users, "ControllerInstallation "+ci.GetMetadata().GetName())
				}
				return users, nil
			}},
		Sources: []controller.Source{
			{Collection: c.seeds, Digest: finalizerDigest},
			{Collection: c.installations, Map: seedOfInstallation, Digest: func(store.Object) string { return "" }},
		},
	})
	if err != nil {
		return nil, err
	}
	return controller.Group{main, registrationFinalizer, deploymentFinalizer, seedFinalizer}, nil
}

// keysOf lists the keys of every object of c.
func keysOf(ctx context.Context, c *store.Collection) ([]controller.Key, error) {
	res, err := c.List(ctx, "", store.ListOptions{})
	if err != nil {
		return nil, err
	}
	keys := make([]controller.Key, 0, len(res.Items))
	for _, o := range res.Items {
		keys = append(keys, controller.Key{Namespace: o.GetMetadata().GetNamespace(), Name: o.GetMetadata().GetName()})
	}
	return keys, nil
}

func seedOfInstallation(o store.Object) []controller.Key {
	return controller.NameKeys(o.(*corev1beta1.ControllerInstallation).GetSpec().GetSeedRef().GetName())
}

func seedsOfShoot(o store.Object) []controller.Key {
	s := o.(*corev1beta1.Shoot)
	return controller.NameKeys(s.GetSpec().GetSeedName(), s.GetStatus().GetSeedName())
}

func deploymentNames(cr *corev1beta1.ControllerRegistration) []string {
	var names []string
	for _, r := range cr.GetSpec().GetDeployment().GetDeploymentRefs() {
		names = append(names, r.GetName())
	}
	return names
}

// installationsWhere names the installations that match.
func installationsWhere(ctx context.Context, c *store.Collection, match func(*corev1beta1.ControllerInstallation) bool) ([]string, error) {
	cis, err := listAll[*corev1beta1.ControllerInstallation](ctx, c)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, ci := range cis {
		if match(ci) {
			users = append(users, "ControllerInstallation "+ci.GetMetadata().GetName())
		}
	}
	return users, nil
}

// Digests: what of an object matters to a controller (see controller.Source).

// seedDigest: the seed's spec, labels (seed selectors) and deletion.
func seedDigest(o store.Object) string {
	s := o.(*corev1beta1.Seed)
	return hash(s.GetSpec()) + labelsDigest(s.GetMetadata().GetLabels()) + deletionDigest(o)
}

// desiredDigest: everything but metadata and status, and the deletion.
func desiredDigest(o store.Object) string {
	switch x := o.(type) {
	case *corev1beta1.ControllerRegistration:
		return hash(x.GetSpec()) + deletionDigest(o)
	case *corev1.ControllerDeployment:
		return hash(&corev1.ControllerDeployment{Helm: x.GetHelm(), InjectGardenKubeconfig: x.InjectGardenKubeconfig, Resources: x.GetResources()}) + deletionDigest(o)
	}
	return ""
}

// installationDigest: the Required condition, the references and the deletion.
func installationDigest(o store.Object) string {
	ci := o.(*corev1beta1.ControllerInstallation)
	return fmt.Sprintf("%t|%s|%s", isRequired(ci), ci.GetSpec().GetRegistrationRef().GetName(), ci.GetSpec().GetDeploymentRef().GetName()) + deletionDigest(o)
}

// shootDigest: what of a shoot ForShoot reads, and the deletion (AlwaysExceptNoShoots counts shoots).
func shootDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	var disabled []string
	for _, e := range s.GetSpec().GetExtensions() {
		if e.GetDisabled() {
			disabled = append(disabled, e.GetType())
		}
	}
	return strings.Join(sets.List(ForShoot(s, nil, nil)), ",") + "|" + strings.Join(disabled, ",") + "|" + s.GetSpec().GetDns().GetDomain() + deletionDigest(o)
}

// finalizerDigest: the finalizers and the deletion.
func finalizerDigest(o store.Object) string {
	return strings.Join(o.GetMetadata().GetFinalizers(), ",") + deletionDigest(o)
}

func deletionDigest(o store.Object) string {
	if o.GetMetadata().GetDeletionTimestamp() != nil {
		return "|deleting"
	}
	return ""
}

func labelsDigest(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString("|" + k + "=" + l[k])
	}
	return b.String()
}
