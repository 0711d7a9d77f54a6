package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/internal/exttest"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

// healthInterval is the health checks' period in tests.
const healthInterval = 200 * time.Millisecond

// env is one test's provider-local: a manager running it against the shared seed, in the test's namespace (which
// stands for a shoot namespace and has a Cluster), with its own backup directory and DNS namespace.
type env struct {
	*exttest.Env
	t            *testing.T
	cfg          local.Config
	shoot        *corev1beta1.Shoot
	dnsNamespace string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := exttest.New(t)
	cfg := local.Config{
		BackupDir:           t.TempDir(),
		Namespace:           e.Namespace,
		DNSNamespace:        e.Namespace + "-coredns",
		HealthCheckInterval: healthInterval,
		HeartbeatInterval:   time.Second,
	}
	if err := local.Add(e.Manager, cfg); err != nil {
		t.Fatal(err)
	}
	e.Start(t)
	env := &env{Env: e, t: t, cfg: cfg, shoot: exttest.Shoot(e.Namespace), dnsNamespace: cfg.DNSNamespace}
	env.WriteCluster(t, env.shoot)
	return env
}

// writeShoot changes the shoot and writes the Cluster again.
func (e *env) writeShoot(mutate func(s *corev1beta1.Shoot)) {
	e.t.Helper()
	mutate(e.shoot)
	e.WriteCluster(e.t, e.shoot)
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), exttest.Timeout)
	e.t.Cleanup(cancel)
	return ctx
}

// meta names an object in the test's namespace.
func (e *env) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: e.Namespace}
}

// create writes obj as the agent does: with gardener.cloud/operation=reconcile and gardener.cloud/timestamp.
func (e *env) create(obj extensionsv1alpha1.Object) {
	e.t.Helper()
	obj.GetExtensionSpec().Type = local.Type
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[extensionsv1alpha1.AnnotationOperation] = extensionsv1alpha1.OperationReconcile
	a[extensionsv1alpha1.AnnotationTimestamp] = time.Now().UTC().Format(time.RFC3339Nano)
	obj.SetAnnotations(a)
	if err := e.Client.Create(e.ctx(), obj); err != nil {
		e.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// deploy creates obj and waits until it is ready; it returns how long that took.
func (e *env) deploy(obj extensionsv1alpha1.Object) time.Duration {
	e.t.Helper()
	start := time.Now()
	e.create(obj)
	e.waitReady(obj)
	return time.Since(start)
}

// annotate asks for operation op (with a new timestamp) and sets the further annotations (an empty value removes
// one).
func (e *env) annotate(obj extensionsv1alpha1.Object, op string, more map[string]string) {
	e.t.Helper()
	ann := map[string]any{extensionsv1alpha1.AnnotationTimestamp: time.Now().UTC().Format(time.RFC3339Nano)}
	if op != "" {
		ann[extensionsv1alpha1.AnnotationOperation] = op
	}
	for k, v := range more {
		if v == "" {
			ann[k] = nil
		} else {
			ann[k] = v
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err := e.Client.Patch(e.ctx(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("annotate %s: %v", obj.GetName(), err)
	}
}

// reconcile asks for a reconcile and waits until obj is ready after a run that started after the request.
//
// Polling for readiness alone is not enough here: the reconciler removes the annotation before it reports
// Processing, and in between the object shows the last run's success, whose lastUpdateTime is within the same second
// as the new timestamp (times have whole seconds). A watch from the request's resourceVersion sees every version,
// so the wait starts with the run's Processing.
func (e *env) reconcile(obj extensionsv1alpha1.Object) {
	e.t.Helper()
	e.annotate(obj, extensionsv1alpha1.OperationReconcile, nil)
	e.watchFor(obj, func(o extensionsv1alpha1.Object) bool {
		lo := o.GetExtensionStatus().LastOperation
		return lo != nil && lo.State == extensionsv1alpha1.LastOperationStateProcessing
	})
	e.waitReady(obj)
}

// watchFor watches obj from its resourceVersion until a version satisfies cond.
func (e *env) watchFor(obj extensionsv1alpha1.Object, cond func(extensionsv1alpha1.Object) bool) {
	e.t.Helper()
	wc, err := client.NewWithWatch(e.Seed.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		e.t.Fatal(err)
	}
	gvk, err := apiutil.GVKForObject(obj, e.Client.Scheme())
	if err != nil {
		e.t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	w, err := wc.Watch(e.ctx(), list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{"metadata.name": obj.GetName()}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		e.t.Fatal(err)
	}
	defer w.Stop()
	timeout := time.After(exttest.Timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				e.t.Fatalf("watch of %s ended", obj.GetName())
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				continue
			}
			o := obj.DeepCopyObject().(extensionsv1alpha1.Object)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
				e.t.Fatal(err)
			}
			if cond(o) {
				return
			}
		case <-timeout:
			e.t.Fatalf("watch of %s: condition not met in %v", obj.GetName(), exttest.Timeout)
		}
	}
}

// until polls cond every 5 ms (latencies are measured with it) until it returns nil.
func (e *env) until(what string, cond func() error) {
	e.t.Helper()
	deadline := time.Now().Add(exttest.Timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReady waits until obj is ready by the agent's rule (Gardener's CheckExtensionObject) and reads it.
func (e *env) waitReady(obj extensionsv1alpha1.Object) {
	e.t.Helper()
	e.until(fmt.Sprintf("%T %s ready", obj, obj.GetName()), func() error {
		if err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		return ready(obj)
	})
}

func ready(obj extensionsv1alpha1.Object) error {
	st := obj.GetExtensionStatus()
	switch {
	case st.LastError != nil:
		return fmt.Errorf("lastError: %s (codes %v)", st.LastError.Description, st.LastError.Codes)
	case st.ObservedGeneration != obj.GetGeneration():
		return fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, obj.GetGeneration())
	case obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation] != "":
		return fmt.Errorf("operation annotation %q still there", obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation])
	case st.LastOperation == nil || st.LastOperation.State != extensionsv1alpha1.LastOperationStateSucceeded:
		return fmt.Errorf("lastOperation %+v", st.LastOperation)
	}
	if ts, err := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp]); err == nil &&
		st.LastOperation.LastUpdateTime.Time.Before(ts.Truncate(time.Second)) {
		return fmt.Errorf("lastUpdateTime %v before timestamp %v", st.LastOperation.LastUpdateTime, ts)
	}
	return nil
}

// waitOperation waits until obj's last operation is typ and Succeeded and no operation annotation is left.
func (e *env) waitOperation(obj extensionsv1alpha1.Object, typ extensionsv1alpha1.LastOperationType) {
	e.t.Helper()
	e.until(fmt.Sprintf("%T %s: %s succeeded", obj, obj.GetName(), typ), func() error {
		if err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if err := ready(obj); err != nil {
			return err
		}
		if lo := obj.GetExtensionStatus().LastOperation; lo.Type != typ {
			return fmt.Errorf("last operation %s", lo.Type)
		}
		return nil
	})
}

// waitError waits until obj's last operation of type typ is Error with exactly codes.
func (e *env) waitError(obj extensionsv1alpha1.Object, typ extensionsv1alpha1.LastOperationType, codes ...extensionsv1alpha1.ErrorCode) {
	e.t.Helper()
	e.until(fmt.Sprintf("%T %s: %s error with codes %v", obj, obj.GetName(), typ, codes), func() error {
		if err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		st := obj.GetExtensionStatus()
		if st.LastOperation == nil || st.LastOperation.Type != typ || st.LastOperation.State != extensionsv1alpha1.LastOperationStateError {
			return fmt.Errorf("lastOperation %+v", st.LastOperation)
		}
		if st.LastError == nil || !slices.Equal(st.LastError.Codes, codes) {
			return fmt.Errorf("lastError %+v", st.LastError)
		}
		return nil
	})
}

// deleteAndWait deletes obj and waits until it is gone.
func (e *env) deleteAndWait(obj client.Object) {
	e.t.Helper()
	if err := e.Client.Delete(e.ctx(), obj); err != nil {
		e.t.Fatalf("delete %s: %v", obj.GetName(), err)
	}
	e.waitGone(obj)
}

func (e *env) waitGone(obj client.Object) {
	e.t.Helper()
	e.until(fmt.Sprintf("%T %s gone", obj, obj.GetName()), func() error {
		err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (finalizers %v)", obj.GetFinalizers())
	})
}

// get reads obj, failing the test on any error.
func (e *env) get(obj client.Object) {
	e.t.Helper()
	if err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj); err != nil {
		e.t.Fatalf("get %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// absent fails the test unless every one of objs is missing.
func (e *env) absent(objs ...client.Object) {
	e.t.Helper()
	for _, o := range objs {
		err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(o), o)
		if !apierrors.IsNotFound(err) {
			e.t.Errorf("%T %s/%s: want it gone, got err %v", o, o.GetNamespace(), o.GetName(), err)
		}
	}
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

// condition waits until obj's condition typ has status want.
func (e *env) condition(obj extensionsv1alpha1.Object, typ string, want extensionsv1alpha1.ConditionStatus) {
	e.t.Helper()
	e.until(fmt.Sprintf("%T %s condition %s %s", obj, obj.GetName(), typ, want), func() error {
		if err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		c := extensionsv1alpha1.GetCondition(obj.GetExtensionStatus().Conditions, typ)
		if c == nil || c.Status != want {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// infraStatus is a providerStatus as the Infrastructure reports it, for ControlPlanes and Workers.
func infraStatus(id string) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"apiVersion":%q,"kind":"InfrastructureStatus","network":{"id":%q,"nodesCIDR":"10.250.0.0/16"}}`, local.APIVersion, id)}
}

// userDataSecret writes the Secret a provision OperatingSystemConfig would make.
func (e *env) userDataSecret(name, content string) {
	e.t.Helper()
	s := secret(e.Namespace, name)
	s.Data = map[string][]byte{extensionsv1alpha1.OperatingSystemConfigSecretDataKey: []byte(content)}
	if err := e.Client.Create(e.ctx(), s); err != nil {
		e.t.Fatal(err)
	}
}

// pool is a worker pool as the agent writes it.
func pool(name string, minimum, maximum int32, userData string, zones ...string) extensionsv1alpha1.WorkerPool {
	agentSecret := "osc-" + name + "-abcde-original"
	return extensionsv1alpha1.WorkerPool{
		Name: name, Minimum: minimum, Maximum: maximum, Zones: zones,
		MaxSurge: intstr.FromInt32(1), MaxUnavailable: intstr.FromInt32(0),
		MachineType:         "local",
		MachineImage:        extensionsv1alpha1.MachineImage{Name: "local", Version: "1.0.0"},
		NodeAgentSecretName: &agentSecret,
		UserDataSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: userData},
			Key: extensionsv1alpha1.OperatingSystemConfigSecretDataKey},
		Labels: map[string]string{"worker.gardener.cloud/pool": name},
	}
}

// workerState decodes a Worker's status.state.
func workerState(t *testing.T, w *extensionsv1alpha1.Worker) local.WorkerState {
	t.Helper()
	var st local.WorkerState
	if w.Status.State == nil {
		t.Fatal("Worker has no status.state")
	}
	if err := json.Unmarshal(w.Status.State.Raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// machineNames returns the names of a Worker's machines in its state.
func machineNames(t *testing.T, w *extensionsv1alpha1.Worker) []string {
	t.Helper()
	var out []string
	for _, m := range workerState(t, w).Machines {
		out = append(out, m.Name)
	}
	return out
}

// liveMachines returns the names of the machine Services in ns.
func (e *env) liveMachines() []string {
	e.t.Helper()
	list := &corev1.ServiceList{}
	if err := e.Client.List(e.ctx(), list, client.InNamespace(e.Namespace), client.MatchingLabels{local.LabelRole: "machine"}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
