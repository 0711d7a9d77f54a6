package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
)

// Defaults of Args.
const (
	// DefaultSyncPeriod is how often the checks run, as in Gardener.
	DefaultSyncPeriod = 30 * time.Second
	// DefaultProgressingThreshold is how long a condition may stay Progressing before it turns False, for results
	// that set no threshold of their own.
	DefaultProgressingThreshold = 5 * time.Minute
)

// Condition reasons, Gardener's.
const (
	// ReasonSuccessful: every check of the condition type is True (or the shoot is hibernated).
	ReasonSuccessful = "HealthCheckSuccessful"
	// ReasonUnsuccessful: a check is False, or was Progressing for too long.
	ReasonUnsuccessful = "HealthCheckUnsuccessful"
	// ReasonProgressing: a check is Progressing, within its threshold.
	ReasonProgressing = "HealthCheckProgressing"
	// ReasonCheckError: a check could not tell (status Unknown).
	ReasonCheckError = "ConditionCheckError"
)

// Check checks one aspect of an extension object's health.
type Check interface {
	// Check returns the result, or an error when it could not tell (the condition becomes Unknown).
	Check(ctx context.Context, req Request) (Result, error)
}

// CheckFunc is a function that is a Check.
type CheckFunc func(ctx context.Context, req Request) (Result, error)

// Check calls f.
func (f CheckFunc) Check(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

// Request is what a check checks.
type Request struct {
	// Reader reads the seed, uncached.
	Reader client.Reader
	// Object is the extension object, as read for this round; checks must not change it.
	Object extensionsv1alpha1.Object
	// Cluster is the Cluster of the object's namespace; nil when there is none.
	Cluster *extsdk.Cluster
}

// Result is the outcome of one check.
type Result struct {
	// Status is True, False or Progressing.
	Status extensionsv1alpha1.ConditionStatus
	// Detail says what is wrong (unused for True).
	Detail string
	// Codes classify the problem.
	Codes []extensionsv1alpha1.ErrorCode
	// ProgressingThreshold overrides Args.ProgressingThreshold for a Progressing result.
	ProgressingThreshold time.Duration
}

// Healthy returns a True result.
func Healthy() Result { return Result{Status: extensionsv1alpha1.ConditionTrue} }

// Unhealthy returns a False result.
func Unhealthy(format string, args ...any) Result {
	return Result{Status: extensionsv1alpha1.ConditionFalse, Detail: fmt.Sprintf(format, args...)}
}

// Progressing returns a Progressing result.
func Progressing(format string, args ...any) Result {
	return Result{Status: extensionsv1alpha1.ConditionProgressing, Detail: fmt.Sprintf(format, args...)}
}

// ConditionCheck maps a check to the condition type it contributes to.
type ConditionCheck struct {
	// ConditionType is the condition's type, e.g. extensionsv1alpha1.ShootSystemComponentsHealthy.
	ConditionType string
	// Check is the check.
	Check Check
}

// Args configure the health checks of one kind and type.
type Args[T extensionsv1alpha1.Object] struct {
	// Type is the spec.type served. Required.
	Type string
	// NewObject returns an empty object of the kind; its kind must be in the manager's scheme. Required.
	NewObject func() T
	// Checks are the checks and their condition types. Required.
	Checks []ConditionCheck
	// ExtensionClasses are the spec.class values served; none means shoot.
	ExtensionClasses []extensionsv1alpha1.ExtensionClass
	// SyncPeriod defaults to DefaultSyncPeriod; it also bounds one round of checks.
	SyncPeriod time.Duration
	// ProgressingThreshold defaults to DefaultProgressingThreshold.
	ProgressingThreshold time.Duration
	// Name is the controller's name, unique in the process; defaults to "healthcheck-<kind>-<type>".
	Name string
	// Clock gives the conditions' times; defaults to the real clock.
	Clock clock.PassiveClock
}

// Add registers with mgr a controller that checks the health of the objects of T's kind with spec.type args.Type.
func Add[T extensionsv1alpha1.Object](mgr manager.Manager, args Args[T]) error {
	if args.Type == "" || args.NewObject == nil || len(args.Checks) == 0 {
		return errors.New("extsdk healthcheck: Type, NewObject and Checks are required")
	}
	for _, c := range args.Checks {
		if c.ConditionType == "" || c.Check == nil {
			return errors.New("extsdk healthcheck: every check needs a ConditionType and a Check")
		}
		if c.ConditionType == extensionsv1alpha1.ShootAPIServerAvailable {
			return fmt.Errorf("extsdk healthcheck: extensions must not report %s", c.ConditionType)
		}
	}
	obj := args.NewObject()
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("extsdk healthcheck: %w", err)
	}
	if args.SyncPeriod <= 0 {
		args.SyncPeriod = DefaultSyncPeriod
	}
	if args.ProgressingThreshold <= 0 {
		args.ProgressingThreshold = DefaultProgressingThreshold
	}
	if args.Clock == nil {
		args.Clock = clock.RealClock{}
	}
	if args.Name == "" {
		args.Name = "healthcheck-" + strings.ToLower(gvk.Kind) + "-" + args.Type
	}
	r := &reconciler[T]{client: mgr.GetClient(), reader: mgr.GetAPIReader(), args: args}
	return builder.ControllerManagedBy(mgr).
		Named(args.Name).
		For(obj, builder.WithPredicates(controller.HasType(args.Type), controller.HasClass(args.ExtensionClasses...),
			triggers())).
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// triggers admits the events after which the checks should run before the next period: creation (every object at
// start), spec changes, and a last operation that just succeeded (checks wait for it). Status writes of the checks
// themselves do not trigger.
func triggers() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration() {
				return true
			}
			newObj, ok1 := e.ObjectNew.(extensionsv1alpha1.Object)
			oldObj, ok2 := e.ObjectOld.(extensionsv1alpha1.Object)
			if !ok1 || !ok2 {
				return false
			}
			n, o := newObj.GetExtensionStatus().LastOperation, oldObj.GetExtensionStatus().LastOperation
			return n != nil && n.State == extensionsv1alpha1.LastOperationStateSucceeded &&
				!equality.Semantic.DeepEqual(n, o)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
