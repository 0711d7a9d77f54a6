package shoot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// Viewers of a shoot, as Gardener names them: the group of viewer kubeconfigs and its read-only roles.
const (
	groupViewers       = "gardener.cloud:system:viewers"
	clusterRoleViewers = "gardener.cloud:system:viewers"
)

// ready reports whether a Deployment, DaemonSet or StatefulSet rolled out its spec and all its replicas (pods) are
// ready; the reason when not.
func ready(obj client.Object) (bool, string) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		want := ptrValue(o.Spec.Replicas, 1)
		switch {
		case o.Status.ObservedGeneration < o.Generation:
			return false, "its controller has not observed the latest spec"
		case o.Status.UpdatedReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas updated", o.Status.UpdatedReplicas, want)
		case o.Status.Replicas > want:
			return false, fmt.Sprintf("%d old replicas still terminating", o.Status.Replicas-want)
		case o.Status.AvailableReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas available", o.Status.AvailableReplicas, want)
		}
	case *appsv1.DaemonSet:
		want := o.Status.DesiredNumberScheduled
		switch {
		case o.Status.ObservedGeneration < o.Generation:
			return false, "its controller has not observed the latest spec"
		case o.Status.UpdatedNumberScheduled < want:
			return false, fmt.Sprintf("%d of %d pods updated", o.Status.UpdatedNumberScheduled, want)
		case o.Status.NumberUnavailable > 0 || o.Status.NumberReady < want:
			return false, fmt.Sprintf("%d of %d pods ready", o.Status.NumberReady, want)
		}
	case *appsv1.StatefulSet:
		want := ptrValue(o.Spec.Replicas, 1)
		switch {
		case o.Status.ObservedGeneration < o.Generation:
			return false, "its controller has not observed the latest spec"
		case o.Status.UpdateRevision != "" && o.Status.CurrentRevision != o.Status.UpdateRevision && want > 0:
			return false, "its pods are being updated"
		case o.Status.ReadyReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas ready", o.Status.ReadyReplicas, want)
		}
	}
	return true, ""
}

func ptrValue[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// waitReady polls obj until ready says so or ctx ends.
func (op *operation) waitReady(ctx context.Context, obj client.Object) error {
	t := time.NewTicker(op.c.cfg.WaitInterval * 2)
	defer t.Stop()
	last := ""
	for {
		err := op.c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		why := ""
		if err == nil {
			var ok bool
			if ok, why = ready(obj); ok {
				return nil
			}
		} else {
			why = err.Error()
		}
		if why != last {
			op.log.Debug("waiting", "object", obj.GetName(), "for", why)
			last = why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%T %s/%s is not ready: %s", obj, obj.GetNamespace(), obj.GetName(), why)
		case <-t.C:
		}
	}
}

// controlPlaneWorkloads are the control plane's workloads, in the order they go down: the controllers and the API
// server before etcd.
func (op *operation) controlPlaneWorkloads() []client.Object {
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: op.objectMeta(deployKCM)},
		&appsv1.Deployment{ObjectMeta: op.objectMeta(deployScheduler)},
		&appsv1.Deployment{ObjectMeta: op.objectMeta(deployKubeAPIServer)},
		&appsv1.StatefulSet{ObjectMeta: op.objectMeta(etcdMain)},
		&appsv1.StatefulSet{ObjectMeta: op.objectMeta(etcdEvents)},
	}
}

// scaleDown scales the workloads to zero replicas, each after the ones before it have no pods left.
func (op *operation) scaleDown(ctx context.Context, objs []client.Object) error {
	for _, obj := range objs {
		if err := op.c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if isNotFound(err) {
				continue
			}
			return err
		}
		var selector map[string]string
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.Replicas, selector = ptr(int32(0)), o.Spec.Selector.MatchLabels
		case *appsv1.StatefulSet:
			o.Spec.Replicas, selector = ptr(int32(0)), o.Spec.Selector.MatchLabels
		}
		if err := op.c.cfg.Seed.Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("scale %s/%s to zero: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		if err := op.waitNoPods(ctx, selector); err != nil {
			return fmt.Errorf("scale %s/%s to zero: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// waitOnlyCurrentPods waits until the pods of the namespace that match selector are all of one pod template (label
// pod-template-hash) and none is terminating: after a Deployment's rollout, until its old pods are gone.
func (op *operation) waitOnlyCurrentPods(ctx context.Context, selector map[string]string) error {
	return op.waitPods(ctx, selector, oldPods)
}

// oldPods says which of a Deployment's pods are old (terminating, or of another template than the first
// non-terminating one); "" when there are none.
func oldPods(pods []corev1.Pod) string {
	hash := ""
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			hash = p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			break
		}
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			return p.Name + " is terminating"
		}
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
			return p.Name + " is of another pod template"
		}
	}
	return ""
}

// waitNoPods waits until no pod of the namespace matches selector.
func (op *operation) waitNoPods(ctx context.Context, selector map[string]string) error {
	return op.waitPods(ctx, selector, func(pods []corev1.Pod) string {
		if len(pods) == 0 {
			return ""
		}
		return fmt.Sprintf("%d pods still running (%s)", len(pods), pods[0].Name)
	})
}

// waitPods waits until problem finds none in the pods of the namespace that match selector; the error names the
// last one.
func (op *operation) waitPods(ctx context.Context, selector map[string]string, problem func([]corev1.Pod) string) error {
	t := time.NewTicker(op.c.cfg.WaitInterval * 2)
	defer t.Stop()
	last := ""
	for {
		pods := &corev1.PodList{}
		if err := op.c.cfg.Seed.List(ctx, pods, client.InNamespace(op.ns), client.MatchingLabels(selector)); err != nil {
			return err
		}
		why := problem(pods.Items)
		if why == "" {
			return nil
		}
		if why != last {
			op.log.Debug("waiting for pods", "selector", selector, "for", why)
			last = why
		}
		select {
		case <-ctx.Done():
			return errors.New(why)
		case <-t.C:
		}
	}
}

// hibernateControlPlane scales kube-controller-manager, kube-scheduler and kube-apiserver to zero, then etcd: its
// volume stays, and waking up brings the control plane back with its data.
func (op *operation) hibernateControlPlane(ctx context.Context) error {
	return op.scaleDown(ctx, op.controlPlaneWorkloads())
}

// destroyKubeAPIServer scales kube-controller-manager, kube-scheduler and kube-apiserver down, in this order, and
// deletes them.
func (op *operation) destroyKubeAPIServer(ctx context.Context) error {
	objs := op.controlPlaneWorkloads()[:3]
	if err := op.scaleDown(ctx, objs); err != nil {
		return err
	}
	return op.deleteAll(ctx, objs)
}

// destroyETCD scales etcd-main and etcd-events down and deletes them, their client Services and their volumes, and
// waits until the volumes are gone.
func (op *operation) destroyETCD(ctx context.Context) error {
	etcds := op.controlPlaneWorkloads()[3:]
	if err := op.scaleDown(ctx, etcds); err != nil {
		return err
	}
	objs := append(etcds, &corev1.Service{ObjectMeta: op.objectMeta(serviceETCDClient)}, &corev1.Service{ObjectMeta: op.objectMeta(serviceETCDEventsClient)})
	if err := op.deleteAll(ctx, objs); err != nil {
		return err
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := op.c.cfg.Seed.List(ctx, pvcs, client.InNamespace(op.ns)); err != nil {
		return fmt.Errorf("list the volumes of %s: %w", op.ns, err)
	}
	var volumes []client.Object
	for i := range pvcs.Items {
		volumes = append(volumes, &pvcs.Items[i])
	}
	return op.deleteAll(ctx, volumes)
}

// deleteAll deletes objs and waits until they are gone.
func (op *operation) deleteAll(ctx context.Context, objs []client.Object) error {
	for _, o := range objs {
		if err := op.c.cfg.Seed.Delete(ctx, o, client.PropagationPolicy(kmetav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
	}
	t := time.NewTicker(op.c.cfg.WaitInterval * 2)
	defer t.Stop()
	for _, o := range objs {
		for {
			err := op.c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(o), o)
			if isNotFound(err) {
				break
			}
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s/%s is still there", o.GetNamespace(), o.GetName())
			case <-t.C:
			}
		}
	}
	return nil
}

// shootRBAC is an RBAC client of the shoot's kube-apiserver as "gardener" (system:masters), issuing its certificate
// first if needed. A shoot's client dials through the seed (cfg.Dial), so client-go does not cache its transport, and
// connections left idle would outlive every use: closeIdle closes them.
func (op *operation) shootRBAC(ctx context.Context) (rbac rbacv1client.RbacV1Interface, closeIdle func(), err error) {
	rbac, _, closeIdle, err = op.shootClients(ctx)
	return rbac, closeIdle, err
}

// shootClients are shootRBAC's RBAC client and a core client over one connection pool, which closeIdle closes.
func (op *operation) shootClients(ctx context.Context) (rbac rbacv1client.RbacV1Interface, core corev1client.CoreV1Interface, closeIdle func(), err error) {
	cs, closeIdle, err := op.shootClientset(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return cs.RbacV1(), cs.CoreV1(), closeIdle, nil
}

// shootClientset is a clientset of the shoot's kube-apiserver as "gardener" (system:masters) over one connection
// pool, which closeIdle closes (see shootRBAC), issuing its certificate first if needed.
func (op *operation) shootClientset(ctx context.Context) (cs clientset, closeIdle func(), err error) {
	set, err := op.credentialSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := op.credentialsManager().Certificate(ctx, gardenerCert(set)); err != nil {
		return nil, nil, err
	}
	cfg, err := op.c.shootREST(ctx, op.ns)
	if err != nil {
		return nil, nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	if cs, err = newClientset(cfg, hc); err != nil {
		hc.CloseIdleConnections()
		return nil, nil, err
	}
	return cs, hc.CloseIdleConnections, nil
}

// gardenerCert is the agent's own client certificate for the shoot's kube-apiserver: "gardener" in system:masters.
func gardenerCert(set *credentials.Set) credentials.CertConfig {
	return credentials.CertConfig{Name: certGardener, CA: set.CAClient, CommonName: userGardener, Organization: []string{groupMasters}, Client: true}
}

// shootREST is the REST configuration of the shoot's kube-apiserver in namespace ns as "gardener", from what the
// flow wrote into the namespace (it generates nothing): reached at its Service's cluster IP through the agent's
// service dialer (a host process on a local seed's machine and an agent in a pod both reach cluster IPs), verified
// with the cluster CA bundle.
func (c *Controller) shootREST(ctx context.Context, ns string) (*rest.Config, error) {
	return AdminREST(ctx, c.cfg.Seed, ns, c.cfg.DialService)
}

// AdminREST is the REST configuration of the kube-apiserver of the shoot whose control plane is in namespace ns of
// the seed, as the agent's own user "gardener" (system:masters), from what the shoot flow wrote into the namespace:
// the agent's client certificate, the cluster CA bundle and the kube-apiserver's Service, reached at its cluster IP
// through dial (nil: directly). It fails until the flow deployed the control plane. Other controllers of the agent
// that act in a shoot (ManagedSeeds) use it.
func AdminREST(ctx context.Context, seed client.Client, ns string, dial func(ctx context.Context, network, address string) (net.Conn, error)) (*rest.Config, error) {
	certs := &corev1.SecretList{}
	if err := seed.List(ctx, certs, client.InNamespace(ns), client.MatchingLabels{credentials.LabelName: certGardener}); err != nil {
		return nil, fmt.Errorf("read the agent's client certificate: %w", err)
	}
	if len(certs.Items) == 0 {
		return nil, fmt.Errorf("the agent has no client certificate for the shoot's API server yet")
	}
	cert := certs.Items[0]
	bundle := &corev1.Secret{}
	if err := seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: credentials.NameCABundle}, bundle); err != nil {
		return nil, fmt.Errorf("read the cluster CA bundle: %w", err)
	}
	svc := &corev1.Service{}
	if err := seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: serviceKubeAPIServer}, svc); err != nil {
		return nil, fmt.Errorf("read the API server service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("the API server service has no address yet")
	}
	cfg := &rest.Config{
		Host: "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(portKubeAPIServer)),
		TLSClientConfig: rest.TLSClientConfig{CAData: bundle.Data[credentials.DataKeyCertificateBundle], ServerName: serviceKubeAPIServer,
			CertData: cert.Data[credentials.DataKeyCertificate], KeyData: cert.Data[credentials.DataKeyPrivateKey]},
		Timeout: 10 * time.Second,
		QPS:     50, Burst: 100,
	}
	if dial != nil {
		cfg.Dial = dial
	}
	return cfg, nil
}

// deployShootSystem writes what Gardener's shoot system component writes for users into the shoot: the read-only
// ClusterRole of viewers (everything but secrets) and its bindings to the viewers' group.
func (op *operation) deployShootSystem(ctx context.Context) error {
	cs, closeClient, err := op.shootRBAC(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: kmetav1.ObjectMeta{Name: clusterRoleViewers}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces", "persistentvolumes", "componentstatuses"}, Verbs: read},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csidrivers", "csinodes", "volumeattachments"}, Verbs: read},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: read},
		{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: read},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, Verbs: read},
		{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: read},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: read},
	}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: groupViewers}}
	bindings := []*rbacv1.ClusterRoleBinding{
		// Everything namespaced but secrets: the built-in "view" role.
		{ObjectMeta: kmetav1.ObjectMeta{Name: clusterRoleViewers + ":view"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}},
		{ObjectMeta: kmetav1.ObjectMeta{Name: clusterRoleViewers}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRoleViewers}},
	}
	roles := cs.ClusterRoles()
	if _, err := roles.Update(ctx, role, kmetav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = roles.Create(ctx, role, kmetav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("shoot: create cluster role %s: %w", role.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("shoot: update cluster role %s: %w", role.Name, err)
	}
	for _, b := range bindings {
		_, err := cs.ClusterRoleBindings().Create(ctx, b, kmetav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("shoot: create cluster role binding %s: %w", b.Name, err)
		}
	}
	return nil
}

// publishCAClient writes the shoot's client CA into the garden as the InternalSecret <shoot>.ca-client in its
// project namespace, owned by the Shoot: ca.crt and ca.key of the CA that signs new client certificates, and
// bundle.crt of every client CA the kube-apiserver trusts. The hub issues the shoot's kubeconfigs from it.
func (op *operation) publishCAClient(ctx context.Context, set *credentials.Set) error {
	c := op.c
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	md := op.shoot.GetMetadata()
	data := map[string][]byte{
		credentials.DataKeyCertificateCA:     set.CAClient.Data[credentials.DataKeyCertificateCA],
		credentials.DataKeyPrivateKeyCA:      set.CAClient.Data[credentials.DataKeyPrivateKeyCA],
		credentials.DataKeyCertificateBundle: set.CAClientBundle,
	}
	want := &corev1beta1.InternalSecret{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "InternalSecret", Type: "Opaque", Data: data,
		Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: objectnames.ShootProjectResourceName(md.GetName(), objectnames.ShootProjectSuffixCAClient),
			Labels: map[string]string{labelRole: objectnames.ShootProjectSuffixCAClient}, OwnerReferences: shootOwner(op.shoot)}}
	_, err := c.internalSecrets.Create(ctx, want)
	if status.Code(err) == codes.AlreadyExists {
		var cur *corev1beta1.InternalSecret
		if cur, err = c.internalSecrets.Get(ctx, &metav1.GetRequest{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}); err == nil {
			if sameData(cur.GetData(), data) && len(cur.GetMetadata().GetOwnerReferences()) == 1 {
				return nil
			}
			want.Metadata.ResourceVersion = cur.GetMetadata().GetResourceVersion()
			_, err = c.internalSecrets.Update(ctx, want)
		}
	}
	if err != nil {
		return fmt.Errorf("publish internal secret %s/%s: %w", want.Metadata.Namespace, want.Metadata.Name, err)
	}
	return nil
}

// unpublishCAClient deletes the shoot's <shoot>.ca-client InternalSecret; a missing one is fine.
func (op *operation) unpublishCAClient(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, op.c.cfg.HubTimeout)
	defer cancel()
	md := op.shoot.GetMetadata()
	req := &metav1.DeleteRequest{Namespace: md.GetNamespace(), Name: objectnames.ShootProjectResourceName(md.GetName(), objectnames.ShootProjectSuffixCAClient)}
	if _, err := op.c.internalSecrets.Delete(ctx, req); err != nil && !goneOrHidden(err) {
		return fmt.Errorf("delete internal secret %s/%s: %w", req.Namespace, req.Name, err)
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}
