package shoot

import (
	"context"
	"fmt"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// What gardenlet publishes of a shoot's credentials in the shoot's project namespace of the garden: <shoot>.<suffix>,
// owned by the Shoot.
const (
	suffixCACluster     = objectnames.ShootProjectSuffixCACluster
	suffixSSHKeypair    = objectnames.ShootProjectSuffixSSHKeypair
	suffixSSHKeypairOld = objectnames.ShootProjectSuffixSSHKeypairOld

	roleCACluster  = "ca-cluster"
	roleSSHKeypair = "ssh-keypair"

	labelDiscoveryPublic   = "discovery.gardener.cloud/public"
	labelShootName         = "shoot.gardener.cloud/name"
	labelShootUID          = "shoot.gardener.cloud/uid"
	labelUpdateRestriction = "gardener.cloud/update-restriction"
	discoveryShootCA       = "shoot-ca"
)

// projectResourceName is Gardener's ComputeShootProjectResourceName: "<shoot>.<suffix>".
var projectResourceName = objectnames.ShootProjectResourceName

// shootOwner is the controller reference to the shoot that the published objects carry.
func shootOwner(s *corev1beta1.Shoot) []*metav1.OwnerReference {
	md := s.GetMetadata()
	return []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: md.GetName(), Uid: md.GetUid(),
		Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}}
}

// publishCredentials writes the shoot's CA bundle (Secret and ConfigMap <shoot>.ca-cluster) and SSH keypairs
// (Secrets <shoot>.ssh-keypair and, while there is an old one, <shoot>.ssh-keypair.old) into its project namespace,
// as gardenlet does, and deletes the keypairs of a shoot that has none.
func (op *operation) publishCredentials(ctx context.Context, set *credentials.Set) error {
	s := op.shoot
	name := s.GetMetadata().GetName()
	ca := map[string][]byte{credentials.DataKeyCertificateCA: set.CABundle}
	if err := op.c.publishSecret(ctx, s, suffixCACluster, map[string]string{labelRole: roleCACluster}, ca); err != nil {
		return err
	}
	if err := op.c.publishConfigMap(ctx, s, suffixCACluster, map[string]string{
		labelRole: roleCACluster, labelDiscoveryPublic: discoveryShootCA, labelShootName: name,
		labelShootUID: s.GetMetadata().GetUid(), labelUpdateRestriction: "true",
	}, map[string]string{credentials.DataKeyCertificateCA: string(set.CABundle)}); err != nil {
		return err
	}
	ssh := map[string]string{labelRole: roleSSHKeypair}
	if set.SSHKeypair == nil {
		return op.c.unpublish(ctx, s, []string{suffixSSHKeypair, suffixSSHKeypairOld}, nil)
	}
	if err := op.c.publishSecret(ctx, s, suffixSSHKeypair, ssh, set.SSHKeypair); err != nil {
		return err
	}
	if set.SSHKeypairOld == nil {
		return op.c.unpublish(ctx, s, []string{suffixSSHKeypairOld}, nil)
	}
	return op.c.publishSecret(ctx, s, suffixSSHKeypairOld, ssh, set.SSHKeypairOld)
}

// publishSecret creates or replaces <shoot>.<suffix> in the shoot's namespace. The seed authorizer admits the
// create of a secret the shoot owns, and afterwards its reads and writes; the agent may not read one that does not
// exist, so it creates first.
func (c *Controller) publishSecret(ctx context.Context, s *corev1beta1.Shoot, suffix string, labels map[string]string, data map[string][]byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	md := s.GetMetadata()
	want := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Type: "Opaque", Data: data,
		Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: projectResourceName(md.GetName(), suffix), Labels: labels, OwnerReferences: shootOwner(s)}}
	_, err := c.secrets.Create(ctx, want)
	if status.Code(err) == codes.AlreadyExists {
		var cur *kcorev1.Secret
		if cur, err = c.secrets.Get(ctx, &metav1.GetRequest{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}); err == nil {
			if maps.EqualFunc(cur.GetData(), data, func(a, b []byte) bool { return string(a) == string(b) }) &&
				maps.Equal(cur.GetMetadata().GetLabels(), labels) && len(cur.GetMetadata().GetOwnerReferences()) == 1 {
				return nil
			}
			want.Metadata.ResourceVersion = cur.GetMetadata().GetResourceVersion()
			_, err = c.secrets.Update(ctx, want)
		}
	}
	if err != nil {
		return fmt.Errorf("publish secret %s/%s: %w", want.Metadata.Namespace, want.Metadata.Name, err)
	}
	return nil
}

// publishConfigMap is publishSecret for a ConfigMap.
func (c *Controller) publishConfigMap(ctx context.Context, s *corev1beta1.Shoot, suffix string, labels map[string]string, data map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	md := s.GetMetadata()
	want := &kcorev1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap", Data: data,
		Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: projectResourceName(md.GetName(), suffix), Labels: labels, OwnerReferences: shootOwner(s)}}
	_, err := c.configMaps.Create(ctx, want)
	if status.Code(err) == codes.AlreadyExists {
		var cur *kcorev1.ConfigMap
		if cur, err = c.configMaps.Get(ctx, &metav1.GetRequest{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}); err == nil {
			if maps.Equal(cur.GetData(), data) && maps.Equal(cur.GetMetadata().GetLabels(), labels) && len(cur.GetMetadata().GetOwnerReferences()) == 1 {
				return nil
			}
			want.Metadata.ResourceVersion = cur.GetMetadata().GetResourceVersion()
			_, err = c.configMaps.Update(ctx, want)
		}
	}
	if err != nil {
		return fmt.Errorf("publish config map %s/%s: %w", want.Metadata.Namespace, want.Metadata.Name, err)
	}
	return nil
}

// unpublish deletes the shoot's <shoot>.<suffix> Secrets and ConfigMaps; missing ones are fine.
func (c *Controller) unpublish(ctx context.Context, s *corev1beta1.Shoot, secrets, configMaps []string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	md := s.GetMetadata()
	for _, suffix := range secrets {
		req := &metav1.DeleteRequest{Namespace: md.GetNamespace(), Name: projectResourceName(md.GetName(), suffix)}
		if _, err := c.secrets.Delete(ctx, req); err != nil && !goneOrHidden(err) {
			return fmt.Errorf("delete secret %s/%s: %w", req.Namespace, req.Name, err)
		}
	}
	for _, suffix := range configMaps {
		req := &metav1.DeleteRequest{Namespace: md.GetNamespace(), Name: projectResourceName(md.GetName(), suffix)}
		if _, err := c.configMaps.Delete(ctx, req); err != nil && !goneOrHidden(err) {
			return fmt.Errorf("delete config map %s/%s: %w", req.Namespace, req.Name, err)
		}
	}
	return nil
}

// goneOrHidden reports an error deleting an object that does not exist. The hub knows a shoot's published objects
// by name, as Gardener's graph does, so deleting a missing one is NotFound; anything else is an error.
func goneOrHidden(err error) bool {
	return status.Code(err) == codes.NotFound
}

// deletePublished removes everything publishCredentials wrote, for the delete flow: the objects go with the shoot
// rather than whenever a garbage collector of the garden notices their owner is gone.
func (op *operation) deletePublished(ctx context.Context) error {
	return op.c.unpublish(ctx, op.shoot, []string{suffixCACluster, suffixSSHKeypair, suffixSSHKeypairOld}, []string{suffixCACluster})
}
