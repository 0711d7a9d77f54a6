package healthcheck_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/healthcheck"
	"github.com/trellis-dev/trellis/extsdk/internal/exttest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

type infra = extensionsv1alpha1.Infrastructure

const (
	testType      = "test"
	system        = extensionsv1alpha1.ShootSystemComponentsHealthy
	controlPlane  = extensionsv1alpha1.ShootControlPlaneHealthy
	syncPeriod    = 100 * time.Millisecond
	progressLimit = 800 * time.Millisecond
)

// switchable is a check whose outcome the test sets.
type switchable struct {
	mu     sync.Mutex
	result healthcheck.Result
	err    error
	seen   []string // names of the objects checked
	// holdName is an object whose check signals entered and waits for release.
	holdName string
	entered  chan struct{}
	release  chan struct{}
}

// hold makes the check of the object name wait, once it has begun, until release is closed.
func (s *switchable) hold(name string) {
	s.holdName, s.entered, s.release = name, make(chan struct{}, 1), make(chan struct{})
}

func (s *switchable) set(r healthcheck.Result, err error) {
	s.mu.Lock()
	s.result, s.err = r, err
	s.mu.Unlock()
}

func (s *switchable) Check(_ context.Context, req healthcheck.Request) (healthcheck.Result, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req.Object.GetName())
	held := s.holdName != "" && req.Object.GetName() == s.holdName
	s.mu.Unlock()
	if held {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.err
}

func (s *switchable) checked(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.seen, name)
}

func setup(t *testing.T, sw *switchable) *exttest.Env {
	t.Helper()
	env := exttest.New(t)
	env.WriteCluster(t, exttest.Shoot(env.Namespace))
	if err := healthcheck.Add(env.Manager, healthcheck.Args[*infra]{
		Type:      testType,
		NewObject: func() *infra { return &infra{} },
		Checks: []healthcheck.ConditionCheck{
			{ConditionType: system, Check: healthcheck.SecretExists("s1")},
			{ConditionType: system, Check: healthcheck.ConfigMapExists("cm1")},
			{ConditionType: controlPlane, Check: sw},
		},
		SyncPeriod:           syncPeriod,
		ProgressingThreshold: progressLimit,
	}); err != nil {
		t.Fatal(err)
	}
	env.Start(t)
	return env
}

// createInfra creates an Infrastructure and, when last is set, writes it as its last operation.
func createInfra(t *testing.T, env *exttest.Env, name string, annotations map[string]string, last *extensionsv1alpha1.LastOperation,
	conditions ...extensionsv1alpha1.Condition) {
	t.Helper()
	ctx := context.Background()
	obj := &infra{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace, Annotations: annotations},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: testType},
			Region:      "local",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: env.Namespace},
		},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if last == nil && len(conditions) == 0 {
		return
	}
	obj.Status.LastOperation = last
	obj.Status.Conditions = conditions
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func succeeded(typ extensionsv1alpha1.LastOperationType) *extensionsv1alpha1.LastOperation {
	return &extensionsv1alpha1.LastOperation{Type: typ, State: extensionsv1alpha1.LastOperationStateSucceeded,
		Progress: 100, Description: "done", LastUpdateTime: metav1.Now()}
}

// waitCondition waits until the object's condition of type typ passes match and returns it.
func waitCondition(t *testing.T, env *exttest.Env, name, typ string, match func(c *extensionsv1alpha1.Condition) error) extensionsv1alpha1.Condition {
	t.Helper()
	var got extensionsv1alpha1.Condition
	exttest.Eventually(t, fmt.Sprintf("%s: condition %s", name, typ), func() error {
		obj := &infra{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: name}, obj); err != nil {
			return err
		}
		c := extensionsv1alpha1.GetCondition(obj.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no condition in %+v", obj.Status.Conditions)
		}
		got = *c
		return match(c)
	})
	return got
}

func is(status extensionsv1alpha1.ConditionStatus, reason, message string) func(*extensionsv1alpha1.Condition) error {
	return func(c *extensionsv1alpha1.Condition) error {
		if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, message) {
			return fmt.Errorf("condition %+v, want %s %s %q", c, status, reason, message)
		}
		return nil
	}
}

// TestConditions covers the conditions written from the checks' results, their transitions, and the objects that
// are not checked.
func TestConditions(t *testing.T) {
	sw := &switchable{result: healthcheck.Healthy()}
	env := setup(t, sw)
	ctx := context.Background()
	custom := extensionsv1alpha1.Condition{Type: "Custom", Status: extensionsv1alpha1.ConditionTrue, Reason: "Mine",
		Message: "written by someone else", LastTransitionTime: metav1.Now(), LastUpdateTime: metav1.Now()}
	createInfra(t, env, "ready", nil, succeeded(extensionsv1alpha1.LastOperationTypeCreate), custom)
	createInfra(t, env, "new", nil, nil)
	createInfra(t, env, "migrating", map[string]string{extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationMigrate},
		succeeded(extensionsv1alpha1.LastOperationTypeReconcile))
	createInfra(t, env, "migrated", nil, succeeded(extensionsv1alpha1.LastOperationTypeMigrate))

	c := waitCondition(t, env, "ready", system, is(extensionsv1alpha1.ConditionFalse, healthcheck.ReasonUnsuccessful, "(2/2)"))
	if !strings.Contains(c.Message, "Secret s1 not found") || !strings.Contains(c.Message, "ConfigMap cm1 not found") {
		t.Errorf("message %q", c.Message)
	}
	waitCondition(t, env, "ready", controlPlane, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful,
		"(1/1) Health checks successful"))

	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: env.Namespace}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1", Namespace: env.Namespace}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	healthy := waitCondition(t, env, "ready", system, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful,
		"(2/2) Health checks successful"))
	if !healthy.LastTransitionTime.Time.After(c.LastTransitionTime.Time.Add(-time.Second)) {
		t.Errorf("lastTransitionTime %v did not move from %v", healthy.LastTransitionTime, c.LastTransitionTime)
	}

	// Progressing with codes, then False once the threshold passed.
	dependencies := []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorRetryableInfraDependencies}
	r := healthcheck.Progressing("machine-controller-manager rolling out")
	r.Codes = dependencies
	sw.set(r, nil)
	p := waitCondition(t, env, "ready", controlPlane, is(extensionsv1alpha1.ConditionProgressing, healthcheck.ReasonProgressing,
		"rolling out"))
	if !slices.Equal(p.Codes, dependencies) {
		t.Errorf("codes %v", p.Codes)
	}
	f := waitCondition(t, env, "ready", controlPlane, is(extensionsv1alpha1.ConditionFalse, healthcheck.ReasonUnsuccessful,
		"rolling out"))
	if d := f.LastTransitionTime.Sub(p.LastTransitionTime.Time); d < progressLimit-time.Second {
		t.Errorf("Progressing turned False after %v, threshold %v", d, progressLimit)
	}

	sw.set(healthcheck.Result{}, fmt.Errorf("shoot API unreachable"))
	u := waitCondition(t, env, "ready", controlPlane, is(extensionsv1alpha1.ConditionUnknown, healthcheck.ReasonCheckError,
		"shoot API unreachable"))
	if len(u.Codes) != 0 {
		t.Errorf("codes %v on Unknown", u.Codes)
	}
	sw.set(healthcheck.Healthy(), nil)
	waitCondition(t, env, "ready", controlPlane, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful, "(1/1)"))

	// An unchanged condition is not written again, and other conditions stay. Each check may take a sync period at
	// most (the reconciler's timeout), so on a loaded machine a check can time out and the condition turn Unknown and
	// back: a real change, with a new lastTransitionTime. Such a window is observed again; a write within a window
	// without a transition is the failure.
	obj := &infra{}
	before := healthy
	for attempt := 0; ; attempt++ {
		time.Sleep(4 * syncPeriod)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "ready"}, obj); err != nil {
			t.Fatal(err)
		}
		c := extensionsv1alpha1.GetCondition(obj.Status.Conditions, system)
		if c != nil && !c.LastTransitionTime.Equal(&before.LastTransitionTime) && attempt < 10 {
			t.Logf("the condition changed in the window (a check timed out?): %+v, was %+v; observing again", c, before)
			before = *c
			continue
		}
		if c == nil || !c.LastUpdateTime.Equal(&before.LastUpdateTime) {
			t.Errorf("unchanged condition rewritten: %+v, was %+v", c, before)
		}
		break
	}
	if c := extensionsv1alpha1.GetCondition(obj.Status.Conditions, "Custom"); c == nil || c.Message != custom.Message {
		t.Errorf("condition of another writer lost: %+v", obj.Status.Conditions)
	}

	// Objects never created successfully and migrating or migrated objects are not checked.
	for _, name := range []string{"new", "migrating", "migrated"} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		if len(obj.Status.Conditions) > 0 || sw.checked(name) {
			t.Errorf("%s checked: %+v", name, obj.Status.Conditions)
		}
	}
	// Once the object's creation succeeded, it is checked without waiting for the next period of its own.
	obj = &infra{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "new"}, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.LastOperation = succeeded(extensionsv1alpha1.LastOperationTypeCreate)
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, env, "new", system, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful, "(2/2)"))
}

// TestHibernated covers the conditions of a hibernated shoot.
func TestHibernated(t *testing.T) {
	sw := &switchable{result: healthcheck.Unhealthy("would fail")}
	env := setup(t, sw)
	shoot := exttest.Shoot(env.Namespace)
	on := true
	shoot.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: &on}
	env.WriteCluster(t, shoot)
	createInfra(t, env, "a", nil, succeeded(extensionsv1alpha1.LastOperationTypeReconcile))
	waitCondition(t, env, "a", system, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful, "Shoot is hibernated"))
	waitCondition(t, env, "a", controlPlane, is(extensionsv1alpha1.ConditionTrue, healthcheck.ReasonSuccessful, "Shoot is hibernated"))
	if sw.checked("a") {
		t.Error("checks ran for a hibernated shoot")
	}
}

// TestDeploymentReady covers the Deployment check against the seed: missing, then progressing.
func TestDeploymentReady(t *testing.T) {
	env := exttest.New(t)
	check := healthcheck.DeploymentReady("machine-controller-manager")
	req := healthcheck.Request{Reader: env.Client, Object: &infra{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace}}}
	r, err := check.Check(context.Background(), req)
	if err != nil || r.Status != extensionsv1alpha1.ConditionFalse || !strings.Contains(r.Detail, "not found") {
		t.Fatalf("missing Deployment: %+v, %v", r, err)
	}
	d := testDeployment(env.Namespace)
	if err := env.Client.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	// No deployment controller runs in the seed: the Deployment's generation is never observed.
	r, err = check.Check(context.Background(), req)
	if err != nil || r.Status != extensionsv1alpha1.ConditionProgressing {
		t.Fatalf("new Deployment: %+v, %v", r, err)
	}
}

// TestAddRejects covers the arguments Add refuses.
func TestAddRejects(t *testing.T) {
	env := exttest.New(t)
	check := healthcheck.CheckFunc(func(context.Context, healthcheck.Request) (healthcheck.Result, error) {
		return healthcheck.Healthy(), nil
	})
	if err := healthcheck.Add(env.Manager, healthcheck.Args[*infra]{
		Type: testType, NewObject: func() *infra { return &infra{} },
		Checks: []healthcheck.ConditionCheck{{ConditionType: extensionsv1alpha1.ShootAPIServerAvailable, Check: check}},
	}); err == nil {
		t.Error("a check for APIServerAvailable was accepted")
	}
	if err := healthcheck.Add(env.Manager, healthcheck.Args[*infra]{Type: testType, NewObject: func() *infra { return &infra{} }}); err == nil {
		t.Error("Add without checks succeeded")
	}
}

func testDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "mcm"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "machine-controller-manager", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mcm", Image: "mcm"}}},
			},
		},
	}
}

// TestObjectDeletedWhileChecked: an object deleted while its checks ran has no conditions to write, which is not a
// reconcile error (the write's NotFound is ignored, not retried).
func TestObjectDeletedWhileChecked(t *testing.T) {
	sw := &switchable{result: healthcheck.Healthy()}
	sw.hold("gone")
	env := setup(t, sw)
	const name = "healthcheck-infrastructure-" + testType
	errorsBefore, _ := reconcileCounts(t, name)
	createInfra(t, env, "gone", nil, succeeded(extensionsv1alpha1.LastOperationTypeCreate))
	select {
	case <-sw.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the object was not checked")
	}
	if err := env.Client.Delete(context.Background(), &infra{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: env.Namespace}}); err != nil {
		t.Fatal(err)
	}
	_, reconciles := reconcileCounts(t, name)
	close(sw.release)
	exttest.Eventually(t, "the reconcile of the deleted object ends", func() error {
		if _, n := reconcileCounts(t, name); n <= reconciles {
			return fmt.Errorf("%v reconciles, as before the release", n)
		}
		return nil
	})
	if errs, _ := reconcileCounts(t, name); errs != errorsBefore {
		t.Fatalf("%v reconcile errors after the object was deleted during its check, %v before", errs, errorsBefore)
	}
}

// reconcileCounts returns controller-runtime's counts of the controller's reconcile errors and of its reconciles.
func reconcileCounts(t *testing.T, controller string) (errs, total float64) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "controller" && l.GetValue() == controller }) {
				continue
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_errors_total":
				errs += m.GetCounter().GetValue()
			case "controller_runtime_reconcile_total":
				total += m.GetCounter().GetValue()
			}
		}
	}
	return errs, total
}
