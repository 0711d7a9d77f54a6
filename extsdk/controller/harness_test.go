package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/extsdk/internal/exttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

type infra = extensionsv1alpha1.Infrastructure

const testType = "test"

// call is one call of an actuator method, with what the actuator saw.
type call struct {
	method      string
	name        string
	cluster     *extsdk.Cluster
	state       string // obj.Status.State as passed in
	annotations map[string]string
	// serverAnnotations are the object's annotations on the server when the call began.
	serverAnnotations map[string]string
}

// actuator implements only Reconcile and Delete. It records every call, can be told to fail, and sets status
// fields the reconciler must persist.
type actuator struct {
	reader client.Reader // reads the server, to see what the reconciler wrote before the call

	mu    sync.Mutex
	calls []call
	// fail, when set, is the error of Reconcile; cleared by the test to let it recover.
	fail error
}

func (a *actuator) record(ctx context.Context, method string, obj *infra, cluster *extsdk.Cluster) {
	c := call{method: method, name: obj.Name, cluster: cluster, annotations: obj.GetAnnotations()}
	if obj.Status.State != nil {
		c.state = string(obj.Status.State.Raw)
	}
	server := &infra{}
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(obj), server); err == nil {
		c.serverAnnotations = server.GetAnnotations()
	}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

func (a *actuator) Reconcile(ctx context.Context, _ logr.Logger, obj *infra, cluster *extsdk.Cluster) error {
	a.record(ctx, "Reconcile", obj, cluster)
	a.mu.Lock()
	err := a.fail
	a.mu.Unlock()
	cidr := "10.1.0.0/16"
	obj.Status.NodesCIDR = &cidr
	obj.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"network":"net-` + obj.Name + `"}`)}
	return err
}

func (a *actuator) Delete(ctx context.Context, _ logr.Logger, obj *infra, cluster *extsdk.Cluster) error {
	a.record(ctx, "Delete", obj, cluster)
	return nil
}

func (a *actuator) setFail(err error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}

// count returns the number of calls of method on the object name.
func (a *actuator) count(method, name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if c.method == method && c.name == name {
			n++
		}
	}
	return n
}

// last returns the last call of method on name.
func (a *actuator) last(t *testing.T, method, name string) call {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].method == method && a.calls[i].name == name {
			return a.calls[i]
		}
	}
	t.Fatalf("no %s of %s", method, name)
	return call{}
}

// fullActuator has every optional hook.
type fullActuator struct{ *actuator }

func (a fullActuator) ForceDelete(ctx context.Context, _ logr.Logger, obj *infra, cluster *extsdk.Cluster) error {
	a.record(ctx, "ForceDelete", obj, cluster)
	return nil
}

func (a fullActuator) Migrate(ctx context.Context, _ logr.Logger, obj *infra, cluster *extsdk.Cluster) error {
	a.record(ctx, "Migrate", obj, cluster)
	obj.Status.State = &runtime.RawExtension{Raw: []byte(`{"saved":"` + obj.Name + `"}`)}
	return nil
}

func (a fullActuator) Restore(ctx context.Context, _ logr.Logger, obj *infra, cluster *extsdk.Cluster) error {
	a.record(ctx, "Restore", obj, cluster)
	return nil
}

var (
	_ controller.ForceDeleter[*infra] = fullActuator{}
	_ controller.Migrator[*infra]     = fullActuator{}
	_ controller.Restorer[*infra]     = fullActuator{}
)

// setup returns an env with a Cluster for its namespace and a started manager running the generic controller for
// Infrastructures of testType with an actuator (full: with every optional hook); mutate may change the AddArgs.
func setup(t *testing.T, full bool, mutate ...func(*controller.AddArgs[*infra])) (*exttest.Env, *actuator) {
	t.Helper()
	env := exttest.New(t)
	env.WriteCluster(t, exttest.Shoot(env.Namespace))
	a := &actuator{reader: env.Client}
	var act controller.Actuator[*infra] = a
	if full {
		act = fullActuator{a}
	}
	args := controller.AddArgs[*infra]{
		Actuator:  act,
		Type:      testType,
		NewObject: func() *infra { return &infra{} },
	}
	for _, m := range mutate {
		m(&args)
	}
	if err := controller.Add(env.Manager, args); err != nil {
		t.Fatal(err)
	}
	env.Start(t)
	return env, a
}

// newInfra returns an Infrastructure of typ in env's namespace with the given annotations.
func newInfra(env *exttest.Env, name, typ string, annotations map[string]string) *infra {
	return &infra{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace, Annotations: annotations},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: typ},
			Region:      "local",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: env.Namespace},
		},
	}
}

func create(t *testing.T, env *exttest.Env, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, env *exttest.Env, name string) *infra {
	t.Helper()
	obj := &infra{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// annotate merges annotations into the object (an empty value removes the key).
func annotate(t *testing.T, env *exttest.Env, name string, kv map[string]string) {
	t.Helper()
	obj := &infra{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace}}
	patch := `{"metadata":{"annotations":{`
	first := true
	for k, v := range kv {
		if !first {
			patch += ","
		}
		first = false
		if v == "" {
			patch += fmt.Sprintf("%q:null", k)
		} else {
			patch += fmt.Sprintf("%q:%q", k, v)
		}
	}
	patch += "}}}"
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// requestReconcile writes the agent's request: operation reconcile and a timestamp.
func requestReconcile(t *testing.T, env *exttest.Env, name string, ts time.Time) {
	t.Helper()
	annotate(t, env, name, map[string]string{
		extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationReconcile,
		extensionsv1alpha1.AnnotationTimestamp: ts.UTC().Format(time.RFC3339Nano),
	})
}

// waitLastOperation waits until the object's last operation has type and state and returns the object.
func waitLastOperation(t *testing.T, env *exttest.Env, name string, typ extensionsv1alpha1.LastOperationType,
	state extensionsv1alpha1.LastOperationState) *infra {
	t.Helper()
	var obj *infra
	exttest.Eventually(t, fmt.Sprintf("%s: lastOperation %s %s", name, typ, state), func() error {
		obj = get(t, env, name)
		lo := obj.Status.LastOperation
		if lo == nil || lo.Type != typ || lo.State != state {
			return fmt.Errorf("lastOperation %+v", lo)
		}
		return nil
	})
	return obj
}

// ready checks what the agent checks before it counts an extension object ready.
func ready(obj *infra) error {
	st := obj.Status
	switch {
	case st.LastError != nil:
		return fmt.Errorf("lastError %+v", st.LastError)
	case st.ObservedGeneration != obj.Generation:
		return fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, obj.Generation)
	case obj.Annotations[extensionsv1alpha1.AnnotationOperation] != "":
		return fmt.Errorf("operation annotation %q", obj.Annotations[extensionsv1alpha1.AnnotationOperation])
	case st.LastOperation == nil || st.LastOperation.State != extensionsv1alpha1.LastOperationStateSucceeded:
		return fmt.Errorf("lastOperation %+v", st.LastOperation)
	}
	if v, ok := obj.Annotations[extensionsv1alpha1.AnnotationTimestamp]; ok {
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return err
		}
		if st.LastOperation.LastUpdateTime.Time.Before(ts.Truncate(time.Second)) {
			return fmt.Errorf("lastUpdateTime %v before timestamp %v", st.LastOperation.LastUpdateTime, ts)
		}
	}
	return nil
}
