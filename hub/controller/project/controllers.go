package project

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// Names Gardener gives to what the controllers read and write.
const (
	// FinalizerGardener keeps a Project until its namespace is released.
	FinalizerGardener = "gardener"
	// LabelRole and RoleProject mark a project namespace; LabelProjectName names its project.
	LabelRole        = "gardener.cloud/role"
	RoleProject      = "project"
	LabelProjectName = "project.gardener.cloud/name"
	// AnnotationNamespaceProject on a namespace holds the uid of the project it belongs to.
	AnnotationNamespaceProject = "namespace.gardener.cloud/project"
	// AnnotationKeepAfterProjectDeletion=true keeps a namespace when its project is deleted; an adopted namespace
	// gets it.
	AnnotationKeepAfterProjectDeletion = "namespace.gardener.cloud/keep-after-project-deletion"
	// AnnotationCreatedByProjectController marks a namespace the project controller created.
	AnnotationCreatedByProjectController = "namespace.gardener.cloud/created-by-project-controller"
	// AnnotationSkipStaleCheck=true on a project namespace keeps its project from ever being stale.
	AnnotationSkipStaleCheck = "project.gardener.cloud/skip-stale-check"
	// AnnotationConfirmDeletion=true must be on a Project before it may be deleted.
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
	// LabelSecretBindingReference and LabelCredentialsBindingReference mark objects a binding references.
	LabelSecretBindingReference      = "reference.gardener.cloud/secretbinding"
	LabelCredentialsBindingReference = "reference.gardener.cloud/credentialsbinding"
)

// FinalizerNamespaceContent is Trellis' own: the project controller keeps it on a project namespace it deletes until
// it has deleted the namespace's content (the hub has no namespace controller to do so; see the package doc).
const FinalizerNamespaceContent = "project.trellis.dev/namespace-content"

// Project phases.
const (
	PhasePending     = "Pending"
	PhaseReady       = "Ready"
	PhaseFailed      = "Failed"
	PhaseTerminating = "Terminating"
)

// Event reasons of the project controller.
const (
	ReasonNamespaceReconcileFailed     = "NamespaceReconcileFailed"
	ReasonNamespaceReconcileSuccessful = "NamespaceReconcileSuccessful"
	ReasonNamespaceNotEmpty            = "NamespaceNotEmpty"
	ReasonNamespaceDeletionFailed      = "NamespaceDeletionFailed"
	ReasonNamespaceMarkedForDeletion   = "NamespaceMarkedForDeletion"
)

// Config configures the controllers; the zero values are Gardener's defaults.
type Config struct {
	Source controller.Collections
	// Workers is how many projects each of the three controllers reconciles at once (concurrentSyncs, default 5).
	Workers int
	// MinimumLifetimeDays is how old a project, or how long ago its last activity, must be before it may be stale
	// (default 30).
	MinimumLifetimeDays int
	// StaleGracePeriodDays is how long a project is stale before it gets an auto-delete time (default 14).
	StaleGracePeriodDays int
	// StaleExpirationTimeDays is how long after it became stale a project is deleted (default 90).
	StaleExpirationTimeDays int
	// StaleSyncPeriod is how often each project's staleness is checked (default 12h).
	StaleSyncPeriod time.Duration
	// Clock is the controllers' clock (default real).
	Clock clock.WithTicker
	Log   *slog.Logger
}

func (c *Config) defaults() {
	for _, d := range []struct {
		v   *int
		def int
	}{{&c.Workers, 5}, {&c.MinimumLifetimeDays, 30}, {&c.StaleGracePeriodDays, 14}, {&c.StaleExpirationTimeDays, 90}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.StaleSyncPeriod <= 0 {
		c.StaleSyncPeriod = 12 * time.Hour
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// collections are the store collections the controllers read and write.
type collections struct {
	projects, namespaces, events, shoots, backupEntries, secrets, internalSecrets, quotas, secretBindings,
	credentialsBindings, workloadIdentities *store.Collection
	// namespaced are the collections of every namespaced kind, whose objects a deleted project namespace loses.
	namespaced []*store.Collection
}

func openCollections(src controller.Collections) (*collections, error) {
	c := &collections{}
	core := func(r string) schema.GroupResource {
		return schema.GroupResource{Group: "core.gardener.cloud", Resource: r}
	}
	security := func(r string) schema.GroupResource {
		return schema.GroupResource{Group: "security.gardener.cloud", Resource: r}
	}
	if err := controller.OpenCollections(src, "project", map[schema.GroupResource]**store.Collection{
		core("projects"): &c.projects, {Resource: "namespaces"}: &c.namespaces, {Resource: "events"}: &c.events,
		core("shoots"): &c.shoots, core("backupentries"): &c.backupEntries, {Resource: "secrets"}: &c.secrets,
		core("internalsecrets"): &c.internalSecrets, core("quotas"): &c.quotas, core("secretbindings"): &c.secretBindings,
		security("credentialsbindings"): &c.credentialsBindings, security("workloadidentities"): &c.workloadIdentities,
	}); err != nil {
		return nil, err
	}
	seen := map[schema.GroupResource]bool{}
	for _, k := range api.Kinds {
		if gr := k.GroupResource(); k.Namespaced && !seen[gr] {
			seen[gr] = true
			if col, ok := src.Collection(gr); ok {
				c.namespaced = append(c.namespaced, col)
			}
		}
	}
	return c, nil
}

// New returns the Project controllers for cfg: project, project-stale and project-activity.
func New(cfg Config) (controller.Group, error) {
	if cfg.Source == nil {
		return nil, errors.New("project: no source")
	}
	cfg.defaults()
	c, err := openCollections(cfg.Source)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With("controller", "project")
	rec := &controller.Recorder{Events: c.events, Component: "project-controller", Clock: cfg.Clock, Log: log}
	toProject := func(o store.Object) []controller.Key {
		return controller.NameKeys(c.projectOfNamespace(context.Background(), o.GetMetadata().GetNamespace()))
	}

	main, err := controller.New(controller.Config{
		Name: "project", Workers: cfg.Workers, Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &projectReconciler{c: c, rec: rec, log: log},
		Sources: []controller.Source{
			{Collection: c.projects, Digest: projectDigest},
			{Collection: c.namespaces, Map: projectsOfNamespace, Digest: namespaceDigest},
			// A deletion waits for the namespace's shoots: their creation and deletion matter, nothing else.
			{Collection: c.shoots, Map: toProject, Digest: func(store.Object) string { return "" }},
		},
	})
	if err != nil {
		return nil, err
	}

	stale, err := controller.New(controller.Config{
		Name: "project-stale", Workers: cfg.Workers, Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &staleReconciler{c: c, clock: cfg.Clock, log: cfg.Log.With("controller", "project-stale"), cfg: staleConfig{
			minimumLifetime: days(cfg.MinimumLifetimeDays), gracePeriod: days(cfg.StaleGracePeriodDays),
			expiration: days(cfg.StaleExpirationTimeDays), syncPeriod: cfg.StaleSyncPeriod,
		}},
		Sources: []controller.Source{
			// As in Gardener, status changes (lastActivityTimestamp among them) trigger no check: the sync period
			// picks them up.
			{Collection: c.projects, Digest: func(o store.Object) string {
				p := o.(*corev1beta1.Project)
				return fmt.Sprintf("%d|%s", p.GetMetadata().GetGeneration(), p.GetSpec().GetNamespace()) + deletionDigest(o)
			}},
			{Collection: c.namespaces, Map: projectsOfNamespace, Digest: func(o store.Object) string {
				return o.GetMetadata().GetAnnotations()[AnnotationSkipStaleCheck] + deletionDigest(o)
			}},
		},
	})
	if err != nil {
		return nil, err
	}

	pending := &pendingActivity{projects: map[string]bool{}}
	activitySource := func(col *store.Collection, labelled bool) controller.Source {
		f := &activityFilter{coll: col, labelled: labelled, clock: cfg.Clock, pending: pending, known: map[string]objectState{},
			projectOf: func(ns string) string { return c.projectOfNamespace(context.Background(), ns) }}
		return controller.Source{Collection: col, Map: f.Map}
	}
	activity, err := controller.New(controller.Config{
		Name: "project-activity", Workers: cfg.Workers, Clock: cfg.Clock, Log: cfg.Log,
		Reconciler: &activityReconciler{projects: c.projects, pending: pending, clock: cfg.Clock},
		Sources: []controller.Source{
			activitySource(c.shoots, false), activitySource(c.backupEntries, false),
			activitySource(c.quotas, true), activitySource(c.secrets, true),
		},
	})
	if err != nil {
		return nil, err
	}
	return controller.Group{main, stale, activity}, nil
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// projectOfNamespace names the project a namespace belongs to by its project.gardener.cloud/name label, as
// Gardener's ProjectForNamespace does; "" when the namespace does not exist or carries no such label.
func (c *collections) projectOfNamespace(ctx context.Context, namespace string) string {
	if namespace == "" {
		return ""
	}
	ns, err := c.namespaces.Get(ctx, "", namespace)
	if err != nil {
		return ""
	}
	return ns.GetMetadata().GetLabels()[LabelProjectName]
}

// projectsOfNamespace maps a namespace to the projects it names: by label, and by owner reference.
func projectsOfNamespace(o store.Object) []controller.Key {
	md := o.GetMetadata()
	names := []string{md.GetLabels()[LabelProjectName]}
	for _, ref := range md.GetOwnerReferences() {
		if ref.GetKind() == "Project" && ref.GetApiVersion() == projectAPIVersion {
			names = append(names, ref.GetName())
		}
	}
	return controller.NameKeys(names...)
}

// projectDigest: what the main controller acts on, as Gardener's GenerationChangedPredicate: the spec (generation),
// the deletion and the finalizer (its removal by hand is repaired).
func projectDigest(o store.Object) string {
	md := o.GetMetadata()
	return strconv.FormatInt(md.GetGeneration(), 10) + "|" + strconv.FormatBool(slices.Contains(md.GetFinalizers(), FinalizerGardener)) + deletionDigest(o)
}

// namespaceDigest: what of a namespace decides its project's reconciliation: existence and deletion, the project
// labels (a refused namespace labelled later is adopted at once) and the project annotation.
func namespaceDigest(o store.Object) string {
	md := o.GetMetadata()
	return md.GetLabels()[LabelRole] + "|" + md.GetLabels()[LabelProjectName] + "|" + md.GetAnnotations()[AnnotationNamespaceProject] +
		"|" + strings.Join(md.GetFinalizers(), ",") + deletionDigest(o)
}

func deletionDigest(o store.Object) string {
	if o.GetMetadata().GetDeletionTimestamp() != nil {
		return "|deleting"
	}
	return ""
}

// listIn lists the objects of c in namespace (shared: do not modify).
func listIn(ctx context.Context, c *store.Collection, namespace string) ([]store.Object, error) {
	res, err := c.List(ctx, namespace, store.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", c.Resource().Resource, namespace, err)
	}
	return res.Items, nil
}

// ignoreNotFound drops NotFound errors.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// namespaceOf is an object of the namespaces collection, typed.
func namespaceOf(o store.Object) *kcorev1.Namespace { return o.(*kcorev1.Namespace) }
