package shoot

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/flow"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Task names of the delete and migrate flows.
const (
	taskDestroyNetwork      = "Destroying shoot network plugin"
	taskDestroyWorker       = "Destroying shoot workers"
	taskDestroyOSC          = "Destroying operating system configs"
	taskDestroyCR           = "Destroying container runtime resources"
	taskDestroyExtBefore    = "Destroying extension resources before kube-apiserver"
	taskDestroyControlPlane = "Destroying shoot control plane"
	taskDestroyExtAfter     = "Destroying extension resources after kube-apiserver"
	taskDestroyInfra        = "Destroying shoot infrastructure"
	taskDestroyExternalDNS  = "Destroying external domain DNS record"
	taskDestroyInternalDNS  = "Destroying internal domain DNS record"
	taskDestroyBackupEntry  = "Destroying BackupEntry"
	taskDestroyCluster      = "Deleting Cluster resource"
	taskDestroyNamespace    = "Deleting shoot namespace in Seed"
	taskDestroyShootState   = "Deleting ShootState"
	taskDestroyPublished    = "Deleting the shoot's CA bundle and SSH keypairs in the project namespace"
)

// deleteGraph is the delete flow: Gardener's reconcile order reversed, each extension object deleted and waited for
// until its extension removed its finalizer, then the Cluster, the namespace and the ShootState.
func (op *operation) deleteGraph() *flow.Graph {
	g := flow.New("delete")
	t := op.timeout()
	name := op.shoot.GetMetadata().GetName()
	one := func(obj extensionsv1alpha1.Object) flow.TaskFn {
		return func(ctx context.Context) error { return op.ext.DestroyAndWait(ctx, obj) }
	}
	network := g.Add(flow.Task{Name: taskDestroyNetwork, Fn: one(&extensionsv1alpha1.Network{ObjectMeta: op.objectMeta(name)}), Timeout: t})
	worker := g.Add(flow.Task{Name: taskDestroyWorker, Fn: one(&extensionsv1alpha1.Worker{ObjectMeta: op.objectMeta(name)}), Dependencies: []string{network}, Timeout: t})
	osc := g.Add(flow.Task{Name: taskDestroyOSC, Fn: op.destroyAll(&extensionsv1alpha1.OperatingSystemConfigList{}), Dependencies: []string{worker}, Timeout: t})
	cr := g.Add(flow.Task{Name: taskDestroyCR, Fn: op.destroyAll(&extensionsv1alpha1.ContainerRuntimeList{}), Dependencies: []string{worker}, Timeout: t})
	before := g.Add(flow.Task{Name: taskDestroyExtBefore, Fn: op.destroyExtensions(extensionsv1alpha1.BeforeKubeAPIServer), Dependencies: []string{worker}, Timeout: t})
	cp := g.Add(flow.Task{Name: taskDestroyControlPlane, Fn: one(&extensionsv1alpha1.ControlPlane{ObjectMeta: op.objectMeta(name)}), Dependencies: []string{osc, cr, before}, Timeout: t})
	// The API server and its controllers go after the ControlPlane extension, etcd and its volumes near the end.
	apiServer := g.Add(flow.Task{Name: taskDestroyKAPI, Fn: op.destroyKubeAPIServer, Dependencies: []string{cp}, Timeout: t})
	after := g.Add(flow.Task{Name: taskDestroyExtAfter, Fn: op.destroyAll(&extensionsv1alpha1.ExtensionList{}), Dependencies: []string{cp, apiServer}, Timeout: t})
	infra := g.Add(flow.Task{Name: taskDestroyInfra, Fn: one(&extensionsv1alpha1.Infrastructure{ObjectMeta: op.objectMeta(name)}), Dependencies: []string{cp}, Timeout: t})
	external := g.Add(flow.Task{Name: taskDestroyExternalDNS, Fn: one(&extensionsv1alpha1.DNSRecord{ObjectMeta: op.objectMeta(name + "-external")}), Dependencies: []string{infra}, Timeout: t})
	internal := g.Add(flow.Task{Name: taskDestroyInternalDNS, Fn: op.destroyAll(&extensionsv1alpha1.DNSRecordList{}), Dependencies: []string{external, after}, Timeout: t})
	backup := g.Add(flow.Task{Name: taskDestroyBackupEntry, Fn: op.destroyBackupEntry, Skip: op.seed.GetSpec().GetBackup() == nil,
		Dependencies: []string{internal}, Timeout: t})
	cluster := g.Add(flow.Task{Name: taskDestroyCluster, Fn: op.deleteCluster, Dependencies: []string{internal, after}, Timeout: t})
	etcd := g.Add(flow.Task{Name: taskDestroyETCD, Fn: op.destroyETCD, Dependencies: []string{apiServer, internal}, Timeout: t})
	ns := g.Add(flow.Task{Name: taskDestroyNamespace, Fn: op.deleteNamespace, Dependencies: []string{cluster, backup, etcd}, Timeout: t, RetryInterval: namespaceRetry})
	g.Add(flow.Task{Name: taskDestroyShootState, Fn: func(ctx context.Context) error { return op.c.deleteShootState(ctx, op.shoot) }, Dependencies: []string{ns}, Timeout: t})
	// What the agent published for the shoot in its project namespace goes with it.
	g.Add(flow.Task{Name: taskDestroyPublished, Fn: op.deletePublished, Dependencies: []string{ns}, Timeout: t})
	g.Add(flow.Task{Name: taskDestroyCAClient, Fn: op.unpublishCAClient, Dependencies: []string{ns}, Timeout: t})
	return g
}

// destroyAll deletes every object of a list kind in the namespace and waits until they are gone.
func (op *operation) destroyAll(list client.ObjectList) flow.TaskFn {
	return func(ctx context.Context) error {
		objs, err := op.listExtensions(ctx, list)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := op.ext.Destroy(ctx, o); err != nil {
				return err
			}
		}
		for _, o := range objs {
			if err := op.ext.WaitGone(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
}

// listExtensions lists the extension objects of one kind in the shoot's namespace.
func (op *operation) listExtensions(ctx context.Context, list client.ObjectList) ([]extensionsv1alpha1.Object, error) {
	if err := op.c.cfg.Seed.List(ctx, list, client.InNamespace(op.ns)); err != nil {
		return nil, fmt.Errorf("list %T: %w", list, err)
	}
	return extensionItems(list)
}

// destroyExtensions deletes the Extension objects whose delete lifecycle is point; unknown ones go with the rest after
// the control plane.
func (op *operation) destroyExtensions(point string) flow.TaskFn {
	return func(ctx context.Context) error {
		objs, err := op.listExtensions(ctx, &extensionsv1alpha1.ExtensionList{})
		if err != nil {
			return err
		}
		lc := op.deleteLifecycles()
		var doomed []extensionsv1alpha1.Object
		for _, o := range objs {
			if cmpOr(lc[o.GetExtensionSpec().Type], extensionsv1alpha1.BeforeKubeAPIServer) == point {
				doomed = append(doomed, o)
			}
		}
		for _, o := range doomed {
			if err := op.ext.Destroy(ctx, o); err != nil {
				return err
			}
		}
		for _, o := range doomed {
			if err := op.ext.WaitGone(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
}

// deleteLifecycles maps Extension types to their registered delete lifecycle.
func (op *operation) deleteLifecycles() map[string]string {
	out := map[string]string{}
	for _, r := range op.registrations {
		for _, res := range r.GetSpec().GetResources() {
			if res.GetKind() == "Extension" {
				out[res.GetType()] = res.GetLifecycle().GetDelete()
			}
		}
	}
	return out
}

func (op *operation) deleteCluster(ctx context.Context) error {
	cl := &extensionsv1alpha1.Cluster{ObjectMeta: kmetav1.ObjectMeta{Name: op.ns}}
	if err := op.c.cfg.Seed.Delete(ctx, cl); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete cluster %s: %w", op.ns, err)
	}
	return nil
}

// deleteNamespace deletes the shoot's namespace and waits until the seed removed it.
func (op *operation) deleteNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: kmetav1.ObjectMeta{Name: op.ns}}
	if err := op.c.cfg.Seed.Delete(ctx, ns); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", op.ns, err)
	}
	err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Name: op.ns}, ns)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read namespace %s: %w", op.ns, err)
	}
	return fmt.Errorf("namespace %s is still terminating (phase %s)", op.ns, ns.Status.Phase)
}

// namespaceRetry is how often the namespace's deletion is checked.
const namespaceRetry = 500 * time.Millisecond
