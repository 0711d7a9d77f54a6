package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Defaults of AddArgs.
const (
	// DefaultMaxConcurrentReconciles is the number of objects reconciled at once, as Gardener's extensions default it.
	DefaultMaxConcurrentReconciles = 5
	// DefaultTimeout bounds one call of the actuator, as Gardener's generic reconcilers do.
	DefaultTimeout = 20 * time.Minute
	// FinalizerPrefix is the prefix of the default finalizer, completed with the lowercase kind.
	FinalizerPrefix = "extensions.gardener.cloud/"
)

// AddArgs configure the controller of one kind and type.
type AddArgs[T extensionsv1alpha1.Object] struct {
	// Actuator does the work. Required. It may implement ForceDeleter, Migrator and Restorer.
	Actuator Actuator[T]
	// Type is the spec.type served, e.g. "local". Required.
	Type string
	// NewObject returns an empty object of the kind, e.g. func() *v1alpha1.Infrastructure { return
	// &v1alpha1.Infrastructure{} }; its kind must be registered in the manager's scheme. Required.
	NewObject func() T
	// ConfigValidator, when set, checks objects before Reconcile and Restore.
	ConfigValidator ConfigValidator[T]
	// ExtensionClasses are the spec.class values served; none means shoot (which includes an unset class).
	ExtensionClasses []extensionsv1alpha1.ExtensionClass
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// IgnoreOperationAnnotation makes the controller reconcile on every spec change (generation) and on every change
	// of the namespace's Cluster instead of only when the agent asks with gardener.cloud/operation.
	IgnoreOperationAnnotation bool
	// Finalizer defaults to "extensions.gardener.cloud/<kind in lowercase>".
	Finalizer string
	// Clock gives lastUpdateTime; defaults to the real clock.
	Clock clock.PassiveClock
	// KnownCodes give codes to errors by their message, in addition to the codes the errors carry.
	KnownCodes []extsdk.CodePattern
	// Predicates are further conditions an event must meet, after the type, class and default predicates.
	Predicates []predicate.Predicate
	// Name is the controller's name, unique in the process; defaults to "<kind in lowercase>-<type>".
	Name string
	// Timeout bounds each call of the validator and actuator; defaults to DefaultTimeout.
	Timeout time.Duration
}

// Add registers with mgr a controller that reconciles the objects of T's kind with spec.type args.Type through
// args.Actuator, following Gardener's generic reconciler: it runs only when the agent asks, removes the reconcile
// annotation at the start and the migrate and restore annotations at the end, guards deletion with a finalizer,
// reports lastOperation, lastError (with codes) and observedGeneration, and skips migrated objects and failed shoots.
func Add[T extensionsv1alpha1.Object](mgr manager.Manager, args AddArgs[T]) error {
	if args.Actuator == nil || args.Type == "" || args.NewObject == nil {
		return errors.New("extsdk controller: Actuator, Type and NewObject are required")
	}
	obj := args.NewObject()
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("extsdk controller: %w", err)
	}
	kind := strings.ToLower(gvk.Kind)
	if args.Finalizer == "" {
		args.Finalizer = FinalizerPrefix + kind
	}
	if args.MaxConcurrentReconciles <= 0 {
		args.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if args.Clock == nil {
		args.Clock = clock.RealClock{}
	}
	if args.Timeout <= 0 {
		args.Timeout = DefaultTimeout
	}
	if args.Name == "" {
		args.Name = kind + "-" + args.Type
	}

	r := &reconciler[T]{client: mgr.GetClient(), reader: mgr.GetAPIReader(), args: args, noun: kind}
	preds := []predicate.Predicate{HasType(args.Type), HasClass(args.ExtensionClasses...)}
	if args.IgnoreOperationAnnotation {
		preds = append(preds, predicate.GenerationChangedPredicate{})
	} else {
		preds = append(preds, DefaultPredicate())
	}
	preds = append(preds, args.Predicates...)

	b := builder.ControllerManagedBy(mgr).
		Named(args.Name).
		For(obj, builder.WithPredicates(preds...)).
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: args.MaxConcurrentReconciles})
	if args.IgnoreOperationAnnotation {
		// Reconciling on Cluster changes follows shoot changes that do not touch the extension object (hibernation,
		// a new Kubernetes version). Only objects that pass the type and class predicates are enqueued.
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if _, err := newList(mgr.GetScheme(), listGVK); err != nil {
			return fmt.Errorf("extsdk controller: %w", err)
		}
		list := func() (client.ObjectList, error) { return newList(mgr.GetScheme(), listGVK) }
		b = b.Watches(&extensionsv1alpha1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(clusterToObjects(mgr.GetClient(), list, preds[:2])))
	}
	return b.Complete(r)
}

// newList returns a new empty list of the list kind gvk names.
func newList(scheme *runtime.Scheme, gvk schema.GroupVersionKind) (client.ObjectList, error) {
	o, err := scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	list, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%v is not a list", gvk)
	}
	return list, nil
}

// clusterToObjects maps a Cluster to the objects in the namespace it is named after that pass preds.
func clusterToObjects(c client.Reader, newList func() (client.ObjectList, error), preds []predicate.Predicate) handler.MapFunc {
	return func(ctx context.Context, cluster client.Object) []reconcile.Request {
		list, err := newList()
		if err != nil {
			return nil
		}
		if err := c.List(ctx, list, client.InNamespace(cluster.GetName())); err != nil {
			logf.FromContext(ctx).Error(err, "List objects for Cluster", "cluster", cluster.GetName())
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		var out []reconcile.Request
	next:
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok {
				continue
			}
			for _, p := range preds {
				if !p.Generic(event.GenericEvent{Object: o}) {
					continue next
				}
			}
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
		return out
	}
}
