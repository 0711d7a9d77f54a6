// Package extsdk is Trellis' extension library, Gardener's extensions library in Trellis' terms: what an extension
// controller needs to act on the extensions.gardener.cloud resources the agent writes into its seed. This package
// owns the vocabulary its parts share: the decoded Cluster (Cluster, GetCluster) and the errors an actuator returns
// (WithCodes, Codes, CodePattern, RequeueAfter). The parts:
//
//   - apis/extensions/v1alpha1: the Go types of every extension kind (Gardener's JSON);
//   - controller: the generic reconciler (controller.Add) driving an Actuator, with Gardener's contract around it:
//     operation annotations, finalizer, lastOperation/lastError/observedGeneration, migrate, restore, force delete;
//   - heartbeat: the gardener-extension-heartbeat Lease;
//   - healthcheck: health conditions (SystemComponentsHealthy, ...) in the objects' status;
//   - garden: typed access to the hub (ShootState, Shoot, Seed, ...).
//
// # A worked example
//
// An extension of the made-up Extension type "hello" greets every shoot with a ConfigMap in the shoot's namespace.
// Its actuator:
//
//	type hello struct{ client client.Client }
//
//	func (h *hello) Reconcile(ctx context.Context, log logr.Logger, ext *extensionsv1alpha1.Extension, cluster *extsdk.Cluster) error {
//		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ext.Namespace}}
//		if _, err := controllerutil.CreateOrUpdate(ctx, h.client, cm, func() error {
//			cm.Data = map[string]string{"greeting": "hello, " + cluster.Shoot.GetMetadata().GetName()}
//			return nil
//		}); err != nil {
//			return fmt.Errorf("greet: %w", err) // lastOperation Error, lastError; retried with backoff
//		}
//		// Written by the reconciler together with lastOperation Succeeded:
//		ext.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"greeted":"demo"}`)}
//		return nil
//	}
//
//	func (h *hello) Delete(ctx context.Context, log logr.Logger, ext *extensionsv1alpha1.Extension, _ *extsdk.Cluster) error {
//		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ext.Namespace}}
//		return client.IgnoreNotFound(h.client.Delete(ctx, cm))
//	}
//
// Migrate, Restore and ForceDelete are optional (controller.Migrator, controller.Restorer, controller.ForceDeleter):
// hello keeps nothing outside the seed, so migrating does nothing, restoring reconciles and force deletion deletes.
// An error that the user must fix carries a code: extsdk.WithCodes(err, extensionsv1alpha1.ErrorConfigurationProblem).
//
// Its main wires the actuator, the heartbeat and a health check into a controller-runtime manager:
//
//	scheme := runtime.NewScheme()
//	_ = clientgoscheme.AddToScheme(scheme)
//	_ = extensionsv1alpha1.AddToScheme(scheme)
//	mgr, err := manager.New(cfg, manager.Options{Scheme: scheme})
//	...
//	err = controller.Add(mgr, controller.AddArgs[*extensionsv1alpha1.Extension]{
//		Actuator:  &hello{client: mgr.GetClient()},
//		Type:      "hello",
//		NewObject: func() *extensionsv1alpha1.Extension { return &extensionsv1alpha1.Extension{} },
//	})
//	...
//	err = heartbeat.Add(mgr, heartbeat.Config{Namespace: os.Getenv("POD_NAMESPACE"), ExtensionName: "provider-hello"})
//	...
//	err = healthcheck.Add(mgr, healthcheck.Args[*extensionsv1alpha1.Extension]{
//		Type:      "hello",
//		NewObject: func() *extensionsv1alpha1.Extension { return &extensionsv1alpha1.Extension{} },
//		Checks: []healthcheck.ConditionCheck{{
//			ConditionType: extensionsv1alpha1.ShootSystemComponentsHealthy,
//			Check:         healthcheck.ConfigMapExists("hello"),
//		}},
//	})
//	...
//	err = mgr.Start(ctx)
//
// When the agent writes Extension "hello" of type hello into shoot--dev--demo (after the Cluster of that namespace),
// the reconciler adds the finalizer extensions.gardener.cloud/extension, reports Create Processing, calls Reconcile
// and reports Create Succeeded with observedGeneration; later requests (gardener.cloud/operation=reconcile) report
// Reconcile. The heartbeat renews Lease gardener-extension-heartbeat every 30 s, and the health check writes condition
// SystemComponentsHealthy "(1/1) Health checks successful". Example runs all of this against a real seed.
package extsdk
