package controller_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/extsdk/internal/exttest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1pb "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

const finalizer = "extensions.gardener.cloud/infrastructure"

// TestCreateAndReconcile covers the life of an object up to its next reconcile: the create, what the actuator is
// given, the status it reports, and that only the agent's annotation triggers more.
func TestCreateAndReconcile(t *testing.T) {
	env, act := setup(t, false)
	create(t, env, newInfra(env, "a", testType, nil))
	other := newInfra(env, "other", "other-type", nil)
	create(t, env, other)
	seedClass := extensionsv1alpha1.ExtensionClassSeed
	classed := newInfra(env, "seed-class", testType, nil)
	classed.Spec.Class = &seedClass
	create(t, env, classed)

	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		t.Errorf("finalizers %v, want %s", obj.Finalizers, finalizer)
	}
	lo := obj.Status.LastOperation
	if lo.Progress != 100 || lo.Description != "Successfully reconciled infrastructure" {
		t.Errorf("lastOperation %+v", lo)
	}
	// The status fields the actuator set are persisted with the result.
	if obj.Status.NodesCIDR == nil || *obj.Status.NodesCIDR != "10.1.0.0/16" ||
		obj.Status.ProviderStatus == nil || string(obj.Status.ProviderStatus.Raw) != `{"network":"net-a"}` {
		t.Errorf("actuator's status not persisted: nodesCIDR %v providerStatus %v", obj.Status.NodesCIDR, obj.Status.ProviderStatus)
	}
	// The actuator got the decoded Cluster.
	c := act.last(t, "Reconcile", "a")
	if c.cluster == nil || c.cluster.Shoot.GetMetadata().GetName() != "shoot-of-"+env.Namespace ||
		c.cluster.Seed.GetMetadata().GetName() != "local" || c.cluster.CloudProfile.GetMetadata().GetName() != "local" {
		t.Errorf("cluster %+v", c.cluster)
	}

	// Requested by the agent, with a timestamp ahead of our clock (the agent's clock may run ahead): the annotation
	// is gone before the actuator runs, and the result is not older than the timestamp.
	ts := time.Now().Add(3 * time.Second)
	requestReconcile(t, env, "a", ts)
	obj = waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
	if got := obj.Status.LastOperation.LastUpdateTime.Time; got.Before(ts.Truncate(time.Second)) {
		t.Errorf("lastUpdateTime %v before the timestamp %v", got, ts)
	}
	c = act.last(t, "Reconcile", "a")
	if _, ok := c.serverAnnotations[extensionsv1alpha1.AnnotationOperation]; ok {
		t.Errorf("operation annotation still on the server when the actuator ran: %v", c.serverAnnotations)
	}
	if _, ok := c.annotations[extensionsv1alpha1.AnnotationOperation]; ok {
		t.Errorf("operation annotation still on the object the actuator got: %v", c.annotations)
	}
	if n := act.count("Reconcile", "a"); n != 2 {
		t.Errorf("%d reconciles, want 2", n)
	}

	// A spec change without the annotation does not trigger (the agent decides when to reconcile), while the next
	// request does, and observes the new generation.
	obj.Spec.Region = "elsewhere"
	if err := env.Client.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, env, "a", time.Now())
	exttest.Eventually(t, "third reconcile observes the new generation", func() error {
		obj = get(t, env, "a")
		if act.count("Reconcile", "a") != 3 {
			return fmt.Errorf("%d reconciles", act.count("Reconcile", "a"))
		}
		return ready(obj)
	})
	if obj.Generation != 2 || obj.Status.ObservedGeneration != 2 {
		t.Errorf("generation %d observed %d", obj.Generation, obj.Status.ObservedGeneration)
	}

	// Objects of another type or class were never touched.
	for _, name := range []string{"other", "seed-class"} {
		if o := get(t, env, name); o.Status.LastOperation != nil || len(o.Finalizers) > 0 || act.count("Reconcile", name) > 0 {
			t.Errorf("%s was reconciled: %+v", name, o.Status.LastOperation)
		}
	}
	if n := act.count("Reconcile", "a"); n != 3 {
		t.Errorf("%d reconciles, want 3: the controller reconciled without being asked", n)
	}
}

// TestErrorAndRecovery covers error reporting with codes and the retries that follow.
func TestErrorAndRecovery(t *testing.T) {
	quota := regexp.MustCompile(`(?i)quota`)
	env, act := setup(t, false, func(a *controller.AddArgs[*infra]) {
		a.KnownCodes = []extsdk.CodePattern{{Code: extensionsv1alpha1.ErrorInfraQuotaExceeded, Pattern: quota}}
	})
	act.setFail(extsdk.WithCodes(fmt.Errorf("create network: %w", errTestQuota), extensionsv1alpha1.ErrorInfraDependencies))
	create(t, env, newInfra(env, "a", testType, nil))

	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	lo, le := obj.Status.LastOperation, obj.Status.LastError
	if lo.Progress != 50 || le == nil || le.LastUpdateTime == nil ||
		le.Description != "Error reconciling infrastructure: create network: Quota of networks exceeded" ||
		lo.Description != le.Description {
		t.Errorf("lastOperation %+v lastError %+v", lo, le)
	}
	if le != nil && !slices.Equal(le.Codes, []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraDependencies, extensionsv1alpha1.ErrorInfraQuotaExceeded}) {
		t.Errorf("codes %v", le.Codes)
	}
	if obj.Status.ObservedGeneration != obj.Generation {
		t.Errorf("observedGeneration %d, generation %d", obj.Status.ObservedGeneration, obj.Generation)
	}
	// Retried with backoff, without any request from the agent.
	exttest.Eventually(t, "retries", func() error {
		if n := act.count("Reconcile", "a"); n < 3 {
			return fmt.Errorf("%d calls", n)
		}
		return nil
	})

	act.setFail(nil)
	obj = waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
}

var errTestQuota = fmt.Errorf("Quota of networks exceeded")

// TestRequeueAfter covers the fixed retry delay of extsdk.RequeueAfter.
func TestRequeueAfter(t *testing.T) {
	env, act := setup(t, false)
	act.setFail(extsdk.RequeueAfter(300*time.Millisecond, fmt.Errorf("waiting for the network")))
	create(t, env, newInfra(env, "a", testType, nil))
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	if d := obj.Status.LastError.Description; d != "Error reconciling infrastructure: waiting for the network" {
		t.Errorf("description %q: want the cause only", d)
	}
	start := time.Now()
	exttest.Eventually(t, "second call", func() error {
		if act.count("Reconcile", "a") < 2 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second call after %v", d)
	}
	// At most one call per delay: the controller's own backoff (5 ms, doubling) would have made many more.
	time.Sleep(time.Second)
	if n := act.count("Reconcile", "a"); n > 6 {
		t.Errorf("%d calls in about 1.3 s with a 300 ms delay", n)
	}
}

// TestConfigValidator covers the validator's error codes.
func TestConfigValidator(t *testing.T) {
	env, act := setup(t, false, func(a *controller.AddArgs[*infra]) { a.ConfigValidator = validator{} })
	create(t, env, newInfra(env, "invalid", testType, nil))
	create(t, env, newInfra(env, "internal", testType, nil))
	create(t, env, newInfra(env, "valid", testType, nil))

	obj := waitLastOperation(t, env, "invalid", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	if codes := obj.Status.LastError.Codes; !slices.Equal(codes, []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}) {
		t.Errorf("codes %v, want ERR_CONFIGURATION_PROBLEM", codes)
	}
	if !strings.Contains(obj.Status.LastError.Description, "spec.providerConfig") {
		t.Errorf("description %q", obj.Status.LastError.Description)
	}
	obj = waitLastOperation(t, env, "internal", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	if codes := obj.Status.LastError.Codes; len(codes) != 0 {
		t.Errorf("codes %v, want none for an internal error", codes)
	}
	waitLastOperation(t, env, "valid", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	if act.count("Reconcile", "invalid")+act.count("Reconcile", "internal") > 0 {
		t.Error("the actuator ran on an invalid object")
	}
}

type validator struct{}

func (validator) Validate(_ context.Context, obj *infra, _ *extsdk.Cluster) field.ErrorList {
	p := field.NewPath("spec", "providerConfig")
	switch obj.Name {
	case "invalid":
		return field.ErrorList{field.Invalid(p, "x", "not a network"), field.Required(p.Child("zone"), "")}
	case "internal":
		return field.ErrorList{field.Invalid(p, "x", "bad"), field.InternalError(p, fmt.Errorf("no connection"))}
	}
	return nil
}

// TestDelete covers deletion with the finalizer, and the default of ForceDelete.
func TestDelete(t *testing.T) {
	env, act := setup(t, false)
	create(t, env, newInfra(env, "a", testType, nil))
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	// Force deletion without a ForceDeleter falls back to Delete.
	shoot := exttest.Shoot(env.Namespace)
	shoot.Metadata.Annotations = map[string]string{extensionsv1alpha1.AnnotationForceDeletion: "true"}
	env.WriteCluster(t, shoot)
	if err := env.Client.Delete(context.Background(), get(t, env, "a")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, "a")
	if n := act.count("Delete", "a"); n != 1 {
		t.Errorf("%d deletes, want 1", n)
	}
	if c := act.last(t, "Delete", "a"); c.cluster == nil || !c.cluster.ShootForceDeletion() {
		t.Error("the actuator did not get the Cluster")
	}

}

// TestForceDelete covers ForceDelete when the shoot is force-deleted.
func TestForceDelete(t *testing.T) {
	env, act := setup(t, true)
	create(t, env, newInfra(env, "a", testType, nil))
	create(t, env, newInfra(env, "b", testType, nil))
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	waitLastOperation(t, env, "b", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	// Without the shoot's annotation: Delete.
	if err := env.Client.Delete(context.Background(), get(t, env, "a")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, "a")

	shoot := exttest.Shoot(env.Namespace)
	shoot.Metadata.Annotations = map[string]string{extensionsv1alpha1.AnnotationForceDeletion: "true"}
	env.WriteCluster(t, shoot)
	if err := env.Client.Delete(context.Background(), get(t, env, "b")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, "b")
	if act.count("Delete", "a") != 1 || act.count("ForceDelete", "a") != 0 ||
		act.count("ForceDelete", "b") != 1 || act.count("Delete", "b") != 0 {
		t.Errorf("calls %+v", act.calls)
	}
}

func waitGone(t *testing.T, env *exttest.Env, name string) {
	t.Helper()
	exttest.Eventually(t, name+" deleted", func() error {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: name}, &infra{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// TestMigrateAndRestore covers migration on the source seed (state saved, finalizer and annotation removed at the
// end, later requests ignored) and restoration on the destination.
func TestMigrateAndRestore(t *testing.T) {
	env, act := setup(t, true)
	create(t, env, newInfra(env, "a", testType, nil))
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	annotate(t, env, "a", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationMigrate})
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	exttest.Eventually(t, "annotation and finalizer removed", func() error {
		obj = get(t, env, "a")
		if len(obj.Annotations) > 0 || len(obj.Finalizers) > 0 {
			return fmt.Errorf("annotations %v finalizers %v", obj.Annotations, obj.Finalizers)
		}
		return nil
	})
	if c := act.last(t, "Migrate", "a"); c.serverAnnotations[extensionsv1alpha1.AnnotationOperation] != extensionsv1alpha1.OperationMigrate {
		t.Errorf("migrate annotation removed before the migration: %v", c.serverAnnotations)
	}
	if obj.Status.State == nil || string(obj.Status.State.Raw) != `{"saved":"a"}` {
		t.Errorf("state %v, want what Migrate saved", obj.Status.State)
	}

	// A migrated object ignores reconcile requests.
	requestReconcile(t, env, "a", time.Now())
	env.Log.WaitFor(t, "Skipping a migrated object", `"name"="a"`)
	obj = get(t, env, "a")
	if act.count("Reconcile", "a") != 1 || obj.Status.LastOperation.Type != extensionsv1alpha1.LastOperationTypeMigrate {
		t.Errorf("a migrated object was reconciled: %+v", obj.Status.LastOperation)
	}

	// Restore: the agent first asks to wait while it writes the state...
	annotate(t, env, "a", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationWaitForState})
	// ...which a (re)started controller honours too: a new object waiting for its state is left alone.
	create(t, env, newInfra(env, "waiting", testType, map[string]string{
		extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationWaitForState}))
	env.Log.WaitFor(t, "Waiting for the state to be restored", `"name"="waiting"`)
	if w := get(t, env, "waiting"); w.Status.LastOperation != nil || len(w.Finalizers) > 0 {
		t.Errorf("a waiting object was worked on: %+v %v", w.Status.LastOperation, w.Finalizers)
	}

	annotate(t, env, "a", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationRestore})
	obj = waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		t.Errorf("finalizers %v after restore", obj.Finalizers)
	}
	c := act.last(t, "Restore", "a")
	if c.state != `{"saved":"a"}` {
		t.Errorf("Restore saw state %q", c.state)
	}
	if c.serverAnnotations[extensionsv1alpha1.AnnotationOperation] != extensionsv1alpha1.OperationRestore {
		t.Errorf("restore annotation removed before the restore: %v", c.serverAnnotations)
	}
	if act.count("Reconcile", "a") != 1 {
		t.Error("Restore of an actuator with a Restorer called Reconcile")
	}
}

// TestRestoreDefault covers the defaults of an actuator without Migrator and Restorer.
func TestRestoreDefault(t *testing.T) {
	env, act := setup(t, false)
	create(t, env, newInfra(env, "a", testType, nil))
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	annotate(t, env, "a", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationMigrate})
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	annotate(t, env, "a", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationRestore})
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
	if n := act.count("Reconcile", "a"); n != 2 {
		t.Errorf("%d reconciles, want 2: create and the default restore", n)
	}
}

// TestFailedShootSkipped covers that nothing happens to objects of a failed shoot, until it is retried.
func TestFailedShootSkipped(t *testing.T) {
	env, act := setup(t, false)
	shoot := exttest.Shoot(env.Namespace)
	shoot.Status = &corev1beta1.ShootStatus{LastOperation: &metav1pb.LastOperation{State: "Failed", Type: "Reconcile"}}
	env.WriteCluster(t, shoot)
	create(t, env, newInfra(env, "a", testType, nil))
	env.Log.WaitFor(t, "Skipping the object of a failed shoot", `"name"="a"`)
	if obj := get(t, env, "a"); obj.Status.LastOperation != nil || len(obj.Finalizers) > 0 || act.count("Reconcile", "a") > 0 {
		t.Fatalf("object of a failed shoot reconciled: %+v", obj.Status.LastOperation)
	}

	// The user retries the shoot; the agent asks again.
	shoot.Status.LastOperation.State = "Processing"
	env.WriteCluster(t, shoot)
	requestReconcile(t, env, "a", time.Now())
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
}

// TestNoCluster covers objects in a namespace without Cluster (the seed's garden namespace).
func TestNoCluster(t *testing.T) {
	env := exttest.New(t)
	act := &actuator{reader: env.Client}
	if err := controller.Add(env.Manager, controller.AddArgs[*infra]{
		Actuator: act, Type: testType, NewObject: func() *infra { return &infra{} }, Finalizer: "example.com/custom",
	}); err != nil {
		t.Fatal(err)
	}
	env.Start(t)
	create(t, env, newInfra(env, "a", testType, nil))
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	if c := act.last(t, "Reconcile", "a"); c.cluster != nil {
		t.Errorf("cluster %+v, want nil", c.cluster)
	}
	if !slices.Equal(obj.Finalizers, []string{"example.com/custom"}) {
		t.Errorf("finalizers %v", obj.Finalizers)
	}
}

// TestIgnoreOperationAnnotation covers the mode in which the controller follows spec and Cluster changes itself.
func TestIgnoreOperationAnnotation(t *testing.T) {
	env, act := setup(t, false, func(a *controller.AddArgs[*infra]) { a.IgnoreOperationAnnotation = true })
	create(t, env, newInfra(env, "a", testType, nil))
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	obj.Spec.Region = "elsewhere"
	if err := env.Client.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	exttest.Eventually(t, "reconcile on spec change", func() error {
		if o := get(t, env, "a"); o.Status.ObservedGeneration != 2 {
			return fmt.Errorf("observedGeneration %d", o.Status.ObservedGeneration)
		}
		return nil
	})
	n := act.count("Reconcile", "a")
	shoot := exttest.Shoot(env.Namespace)
	shoot.Metadata.Labels = map[string]string{"changed": "true"}
	env.WriteCluster(t, shoot)
	exttest.Eventually(t, "reconcile on Cluster change", func() error {
		if act.count("Reconcile", "a") == n {
			return fmt.Errorf("no reconcile")
		}
		return nil
	})
}

// TestAddValidates covers the required arguments.
func TestAddValidates(t *testing.T) {
	env := exttest.New(t)
	if err := controller.Add(env.Manager, controller.AddArgs[*infra]{Type: testType, NewObject: func() *infra { return &infra{} }}); err == nil {
		t.Error("Add without an actuator succeeded")
	}
	if err := controller.Add(env.Manager, controller.AddArgs[*infra]{Actuator: &actuator{}, NewObject: func() *infra { return &infra{} }}); err == nil {
		t.Error("Add without a type succeeded")
	}
}

// TestRetryAfterEarlyFailure covers a request whose run fails after it removed the reconcile annotation but before it
// reported anything (here: the Cluster cannot be decoded): the retries still carry it out.
func TestRetryAfterEarlyFailure(t *testing.T) {
	env, act := setup(t, false)
	create(t, env, newInfra(env, "a", testType, nil))
	waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	cl := &extensionsv1alpha1.Cluster{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: env.Namespace}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.Shoot.Raw = []byte(`{"spec":{"region":7}}`)
	if err := env.Client.Update(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, env, "a", time.Now())
	env.Log.WaitFor(t, "Reconciler error", "cluster spec.shoot")
	if obj := get(t, env, "a"); obj.Annotations[extensionsv1alpha1.AnnotationOperation] != "" ||
		obj.Status.LastOperation.Type != extensionsv1alpha1.LastOperationTypeCreate {
		t.Fatalf("annotations %v lastOperation %+v: want the request taken and nothing reported yet", obj.Annotations, obj.Status.LastOperation)
	}

	env.WriteCluster(t, exttest.Shoot(env.Namespace))
	obj := waitLastOperation(t, env, "a", extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	if err := ready(obj); err != nil {
		t.Fatal(err)
	}
	if n := act.count("Reconcile", "a"); n != 2 {
		t.Errorf("%d reconciles, want 2", n)
	}
}
