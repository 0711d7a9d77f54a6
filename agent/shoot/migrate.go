package shoot

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/flow"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Task names of the migrate flow.
const (
	taskMigrateExtensions = "Migrating extension resources"
	taskPersistState      = "Persisting ShootState in the garden"
	taskDeleteMigrated    = "Deleting migrated extension resources"
)

// migrateGraph is the migrate flow on the source seed: every extension object is annotated migrate (the extensions
// clean up what they made in the seed, keep what is outside it, and save their state), the states go into the
// ShootState on the hub, and the objects, the Cluster and the namespace are deleted without deleting anything
// outside the seed. Meanwhile the control plane stops: kube-apiserver and its controllers scale to zero, etcd's
// backup sidecar takes a final full snapshot into the shoot's BackupEntry, and etcd is deleted with its volume. The
// destination's agent restores from the ShootState, and its etcd from that snapshot.
func (op *operation) migrateGraph() *flow.Graph {
	g := flow.New("migrate")
	t := op.timeout()
	migrate := g.Add(flow.Task{Name: taskMigrateExtensions, Fn: op.migrateAll, Timeout: t})
	persist := g.Add(flow.Task{Name: taskPersistState, Fn: op.persistShootState, Dependencies: []string{migrate}, Timeout: t})
	del := g.Add(flow.Task{Name: taskDeleteMigrated, Fn: op.deleteMigrated, Dependencies: []string{persist}, Timeout: t})
	cluster := g.Add(flow.Task{Name: taskDestroyCluster, Fn: op.deleteCluster, Dependencies: []string{del}, Timeout: t})
	// etcd's data moves through the backup: the API server stops taking writes, etcd's sidecar takes a last full
	// snapshot into the BackupEntry, and etcd goes with its volume; the destination restores the snapshot.
	runs := op.controlPlane
	kapi := g.Add(flow.Task{Name: taskScaleDownKAPI, Fn: op.scaleDownKubeAPIServer, Skip: !runs, Timeout: t})
	snap := g.Add(flow.Task{Name: taskSnapshotETCD, Fn: op.snapshotETCD, Skip: !runs, Dependencies: []string{kapi}, Timeout: t})
	etcd := g.Add(flow.Task{Name: taskMigrateETCD, Fn: op.destroyETCD, Skip: !runs, Dependencies: []string{snap}, Timeout: t})
	g.Add(flow.Task{Name: taskDestroyNamespace, Fn: op.deleteNamespace, Dependencies: []string{cluster, etcd}, Timeout: t, RetryInterval: namespaceRetry})
	return g
}

// namespacedExtensionLists are the extension kinds that live in a shoot's namespace.
func namespacedExtensionLists() []client.ObjectList {
	return []client.ObjectList{
		&extensionsv1alpha1.ExtensionList{}, &extensionsv1alpha1.ContainerRuntimeList{}, &extensionsv1alpha1.WorkerList{},
		&extensionsv1alpha1.OperatingSystemConfigList{}, &extensionsv1alpha1.NetworkList{}, &extensionsv1alpha1.ControlPlaneList{},
		&extensionsv1alpha1.InfrastructureList{}, &extensionsv1alpha1.DNSRecordList{}, &extensionsv1alpha1.BastionList{},
	}
}

// allExtensions lists every extension object in the shoot's namespace.
func (op *operation) allExtensions(ctx context.Context) ([]extensionsv1alpha1.Object, error) {
	var out []extensionsv1alpha1.Object
	for _, l := range namespacedExtensionLists() {
		if err := op.c.cfg.Seed.List(ctx, l, client.InNamespace(op.ns)); err != nil {
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
		items, err := extensionItems(l)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// extensionItems returns the items of an extension list as Objects.
func extensionItems(l client.ObjectList) ([]extensionsv1alpha1.Object, error) {
	var out []extensionsv1alpha1.Object
	switch l := l.(type) {
	case *extensionsv1alpha1.ExtensionList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.ContainerRuntimeList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.WorkerList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.OperatingSystemConfigList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.NetworkList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.ControlPlaneList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.InfrastructureList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.DNSRecordList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *extensionsv1alpha1.BastionList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unsupported extension list %T", l)
	}
	return out, nil
}

// migrateAll annotates every extension object with migrate and waits until each reports Migrate Succeeded.
func (op *operation) migrateAll(ctx context.Context) error {
	objs, err := op.allExtensions(ctx)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := op.ext.Migrate(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// persistShootState saves the state and resources of every extension object, and the data of the Secrets they
// refer to, in the ShootState named after the shoot.
func (op *operation) persistShootState(ctx context.Context) error {
	objs, err := op.allExtensions(ctx)
	if err != nil {
		return err
	}
	spec := &corev1beta1.ShootStateSpec{}
	seen := map[string]bool{}
	for _, o := range objs {
		st := o.GetExtensionStatus()
		if st.State == nil && len(st.Resources) == 0 {
			continue
		}
		e := &corev1beta1.ExtensionResourceState{Kind: extension.KindOf(o), Name: proto.String(o.GetName())}
		if osc, ok := o.(*extensionsv1alpha1.OperatingSystemConfig); ok {
			e.Purpose = proto.String(string(osc.Spec.Purpose))
		}
		if st.State != nil && len(st.State.Raw) > 0 {
			e.State = &metav1.RawExtension{Raw: st.State.Raw}
		}
		for _, r := range st.Resources {
			e.Resources = append(e.Resources, &corev1beta1.NamedResourceReference{Name: r.Name,
				ResourceRef: &metav1.CrossVersionObjectReference{Kind: r.ResourceRef.Kind, Name: r.ResourceRef.Name, ApiVersion: r.ResourceRef.APIVersion}})
			if r.ResourceRef.Kind != "Secret" || seen[r.ResourceRef.Name] {
				continue
			}
			seen[r.ResourceRef.Name] = true
			sec := &corev1.Secret{}
			if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: r.ResourceRef.Name}, sec); err != nil {
				return fmt.Errorf("read secret %s referred to by %s: %w", r.ResourceRef.Name, extension.Describe(o), err)
			}
			data, err := jsonMarshal(sec.Data)
			if err != nil {
				return err
			}
			spec.Resources = append(spec.Resources, &corev1beta1.ResourceData{Kind: "Secret", Name: sec.Name, ApiVersion: "v1",
				Data: &metav1.RawExtension{Raw: data}})
		}
		spec.Extensions = append(spec.Extensions, e)
	}
	if spec.Gardener, err = op.persistedCredentials(ctx); err != nil {
		return err
	}
	return op.c.writeShootState(ctx, op.shoot, spec)
}

// writeShootState creates or replaces the spec of the shoot's ShootState.
func (c *Controller) writeShootState(ctx context.Context, s *corev1beta1.Shoot, spec *corev1beta1.ShootStateSpec) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	md := s.GetMetadata()
	cur, err := c.states.Get(ctx, &metav1.GetRequest{Namespace: md.GetNamespace(), Name: md.GetName()})
	switch status.Code(err) {
	case codes.NotFound:
		_, err = c.states.Create(ctx, &corev1beta1.ShootState{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ShootState",
			Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: md.GetName(),
				OwnerReferences: []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: md.GetName(), Uid: md.GetUid()}}},
			Spec: spec})
	case codes.OK:
		cur.Spec = spec
		_, err = c.states.Update(ctx, cur)
	}
	if err != nil {
		return fmt.Errorf("write ShootState %s/%s: %w", md.GetNamespace(), md.GetName(), err)
	}
	return nil
}

// deleteMigrated deletes the migrated extension objects; their extensions removed the finalizers when they migrated,
// so nothing outside the seed is touched.
func (op *operation) deleteMigrated(ctx context.Context) error {
	objs, err := op.allExtensions(ctx)
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

// jsonMarshal encodes the data of a Secret as Gardener's ShootState stores it: a JSON object of base64 values.
func jsonMarshal(data map[string][]byte) ([]byte, error) { return json.Marshal(data) }
