package local_test

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestFailureInjection makes Reconcile fail through the object's annotation and through the Shoot's, recovers by
// removing them, and gets out of a failing Delete with force deletion.
func TestFailureInjection(t *testing.T) {
	e := newEnv(t)
	ns := e.Namespace

	// On the object, with a code: Error with the code and nothing made; without the annotation it recovers.
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: e.meta("shoot")}
	failInfra := local.AnnotationFailPrefix + "infrastructure"
	infra.Annotations = map[string]string{failInfra: string(extensionsv1alpha1.ErrorRetryableInfraDependencies)}
	e.create(infra)
	e.waitError(infra, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.ErrorRetryableInfraDependencies)
	e.absent(configMap(ns, local.InfrastructureConfigMap))
	e.annotate(infra, extensionsv1alpha1.OperationReconcile, map[string]string{failInfra: ""})
	e.waitReady(infra)
	e.get(configMap(ns, local.InfrastructureConfigMap))

	// On the Shoot, "true": Error without codes, for every object of the kind in the namespace.
	failNetwork := local.AnnotationFailPrefix + "network"
	e.writeShoot(func(s *corev1beta1.Shoot) { s.Metadata.Annotations = map[string]string{failNetwork: "true"} })
	nw := &extensionsv1alpha1.Network{ObjectMeta: e.meta("shoot")}
	e.create(nw)
	e.waitError(nw, extensionsv1alpha1.LastOperationTypeCreate)
	e.absent(configMap(ns, local.RecordConfigMapName("network", "shoot")))
	e.writeShoot(func(s *corev1beta1.Shoot) { s.Metadata.Annotations = nil })
	e.reconcile(nw)
	e.get(configMap(ns, local.RecordConfigMapName("network", "shoot")))

	// Restore fails like Reconcile.
	e.annotate(infra, extensionsv1alpha1.OperationRestore, map[string]string{failInfra: string(extensionsv1alpha1.ErrorInfraQuotaExceeded)})
	e.waitError(infra, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.ErrorInfraQuotaExceeded)
	e.annotate(infra, "", map[string]string{failInfra: ""})
	e.waitOperation(infra, extensionsv1alpha1.LastOperationTypeRestore)

	// Delete fails with fail-delete-<kind>; Migrate with fail-migrate-<kind>.
	b := &extensionsv1alpha1.Bastion{ObjectMeta: e.meta("bastion")}
	b.Spec.UserData = []byte("#!/bin/bash\n")
	b.Spec.Ingress = []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}
	b.Annotations = map[string]string{local.AnnotationFailPrefix + "delete-bastion": string(extensionsv1alpha1.ErrorCleanupClusterResources)}
	e.deploy(b)
	if err := e.Client.Delete(e.ctx(), b); err != nil {
		t.Fatal(err)
	}
	e.waitError(b, extensionsv1alpha1.LastOperationTypeDelete, extensionsv1alpha1.ErrorCleanupClusterResources)
	e.get(service(ns, local.BastionServiceName(b.Name)))

	// Force deletion (on the Shoot) ignores the injected failure and removes everything.
	e.writeShoot(func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{extensionsv1alpha1.AnnotationForceDeletion: "true"}
	})
	e.annotate(b, extensionsv1alpha1.OperationReconcile, nil)
	e.waitGone(b)
	e.absent(service(ns, local.BastionServiceName(b.Name)), secret(ns, local.BastionUserDataSecretName(b.Name)))

	e.annotate(nw, extensionsv1alpha1.OperationMigrate, map[string]string{local.AnnotationFailPrefix + "migrate-network": "true"})
	e.waitError(nw, extensionsv1alpha1.LastOperationTypeMigrate)
	e.get(configMap(ns, local.RecordConfigMapName("network", "shoot")))
}
