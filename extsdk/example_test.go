package extsdk_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/deploy/crds"
	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/extsdk/healthcheck"
	"github.com/trellis-dev/trellis/extsdk/heartbeat"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// hello is the actuator of the made-up Extension type "hello": it greets the shoot with a ConfigMap in the shoot's
// namespace and reports whom it greeted in providerStatus.
type hello struct {
	client client.Client
}

func (h *hello) Reconcile(ctx context.Context, log logr.Logger, ext *extensionsv1alpha1.Extension, cluster *extsdk.Cluster) error {
	name := cluster.Shoot.GetMetadata().GetName()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ext.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, h.client, cm, func() error {
		cm.Data = map[string]string{"greeting": "hello, " + name}
		return nil
	}); err != nil {
		return fmt.Errorf("greet: %w", err) // reported as lastError; retried
	}
	fmt.Println(cm.Data["greeting"])
	// Written by the reconciler together with lastOperation Succeeded.
	ext.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"greeted":"` + name + `"}`)}
	return nil
}

func (h *hello) Delete(ctx context.Context, log logr.Logger, ext *extensionsv1alpha1.Extension, _ *extsdk.Cluster) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ext.Namespace}}
	return client.IgnoreNotFound(h.client.Delete(ctx, cm))
}

// Example wires an extension with the generic reconciler, the heartbeat and a health check, and runs it against a
// seed: the agent's part (the Cluster and the Extension object) is played by the example itself.
func Example() {
	cfg, stop := startSeed() // a kube-apiserver with the extension CRDs installed
	defer stop()

	// The extension's main.
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = extensionsv1alpha1.AddToScheme(scheme)
	mgr, err := manager.New(cfg, manager.Options{Scheme: scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		panic(err)
	}
	if err := controller.Add(mgr, controller.AddArgs[*extensionsv1alpha1.Extension]{
		Actuator:  &hello{client: mgr.GetClient()},
		Type:      "hello",
		NewObject: func() *extensionsv1alpha1.Extension { return &extensionsv1alpha1.Extension{} },
	}); err != nil {
		panic(err)
	}
	if err := heartbeat.Add(mgr, heartbeat.Config{Namespace: "extension-hello", ExtensionName: "provider-hello"}); err != nil {
		panic(err)
	}
	if err := healthcheck.Add(mgr, healthcheck.Args[*extensionsv1alpha1.Extension]{
		Type:      "hello",
		NewObject: func() *extensionsv1alpha1.Extension { return &extensionsv1alpha1.Extension{} },
		Checks: []healthcheck.ConditionCheck{
			{ConditionType: extensionsv1alpha1.ShootSystemComponentsHealthy, Check: healthcheck.ConfigMapExists("hello")},
		},
	}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()

	// The agent's part: a Cluster for the shoot's namespace, then the Extension.
	c, _ := client.New(cfg, client.Options{Scheme: scheme})
	ns := "shoot--dev--demo"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "extension-hello"}},
		&extensionsv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: extensionsv1alpha1.ClusterSpec{
				Shoot: runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot",` +
					`"metadata":{"name":"demo","namespace":"garden-dev"}}`)},
				CloudProfile: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"local"}}`)},
			},
		},
		&extensionsv1alpha1.Extension{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
			Spec:       extensionsv1alpha1.ExtensionSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "hello"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			panic(err)
		}
	}

	ext := &extensionsv1alpha1.Extension{}
	waitFor(func() bool {
		_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, ext)
		lo := ext.Status.LastOperation
		return lo != nil && lo.State == extensionsv1alpha1.LastOperationStateSucceeded
	})
	fmt.Printf("%s %s, providerStatus %s\n", ext.Status.LastOperation.Type, ext.Status.LastOperation.State,
		ext.Status.ProviderStatus.Raw)

	lease := &coordinationv1.Lease{}
	waitFor(func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "extension-hello", Name: extensionsv1alpha1.HeartbeatLeaseName}, lease) == nil
	})
	fmt.Println("heartbeat of", *lease.Spec.HolderIdentity)

	var cond *extensionsv1alpha1.Condition
	waitFor(func() bool {
		_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, ext)
		cond = extensionsv1alpha1.GetCondition(ext.Status.Conditions, extensionsv1alpha1.ShootSystemComponentsHealthy)
		return cond != nil
	})
	fmt.Println(cond.Type, cond.Status, cond.Message)

	// Output:
	// hello, demo
	// Create Succeeded, providerStatus {"greeted":"demo"}
	// heartbeat of provider-hello
	// SystemComponentsHealthy True (1/1) Health checks successful
}

// startSeed starts a seed (test/seedtest) with the extension CRDs and returns its config and a stop function.
func startSeed() (*rest.Config, func()) {
	logf.SetLogger(logr.Discard()) // controller-runtime's informers log through the global logger
	dir, err := os.MkdirTemp("", "extsdk-example-")
	if err != nil {
		panic(err)
	}
	seed, err := seedtest.StartInDir(dir)
	if err != nil {
		panic(err)
	}
	stop := func() {
		_ = seed.Close()
		_ = os.RemoveAll(dir)
	}
	ac, err := client.New(seed.Config, client.Options{})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = crds.Install(ctx, ac)
		cancel()
	}
	if err != nil {
		stop()
		panic(err)
	}
	return seed.Config, stop
}

// waitFor polls cond for up to 30 s.
func waitFor(cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic("timed out")
		}
	}
}
