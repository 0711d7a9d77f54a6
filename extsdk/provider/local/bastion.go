package local

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// BastionIngressIP is the "public" address of every bastion: provider-local's load balancer fake, which gives the
// seed's loopback address as Gardener's provider-local service controller gives the host's.
const BastionIngressIP = "127.0.0.1"

// bastion makes a bastion "instance": a headless Service bastion-<name> (SSH port 22, the allowed CIDRs in an
// annotation) and a Secret bastion-<name>-user-data with spec.userData; status.ingress is BastionIngressIP.
type bastion struct{ seed }

// BastionServiceName is the Service standing for the bastion name.
func BastionServiceName(name string) string { return shorten("bastion-"+name, 63) }

// BastionUserDataSecretName is the Secret with the user data of the bastion name.
func BastionUserDataSecretName(name string) string { return shorten("bastion-"+name+"-user-data", 253) }

func (a *bastion) Reconcile(ctx context.Context, _ logr.Logger, b *extensionsv1alpha1.Bastion, _ *extsdk.Cluster) error {
	labels := ownerLabels("bastion", b.Name)
	if err := a.apply(ctx, corev1ac.Secret(BastionUserDataSecretName(b.Name), b.Namespace).WithLabels(labels).
		WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{"userData": b.Spec.UserData})); err != nil {
		return fmt.Errorf("deploy the bastion's user data: %w", err)
	}
	cidrs := make([]string, 0, len(b.Spec.Ingress))
	for _, in := range b.Spec.Ingress {
		cidrs = append(cidrs, in.IPBlock.CIDR)
	}
	svc := corev1ac.Service(BastionServiceName(b.Name), b.Namespace).WithLabels(labels).
		WithAnnotations(map[string]string{"provider.local.trellis.dev/ingress-cidrs": strings.Join(cidrs, ",")}).
		WithSpec(corev1ac.ServiceSpec().WithClusterIP(corev1.ClusterIPNone).
			WithPorts(corev1ac.ServicePort().WithName("ssh").WithPort(22).WithProtocol(corev1.ProtocolTCP)))
	if err := a.apply(ctx, svc); err != nil {
		return fmt.Errorf("deploy the bastion: %w", err)
	}
	b.Status.Ingress = &corev1.LoadBalancerIngress{IP: BastionIngressIP}
	return nil
}

func (a *bastion) Delete(ctx context.Context, _ logr.Logger, b *extensionsv1alpha1.Bastion, _ *extsdk.Cluster) error {
	return a.removeAll(ctx, false, a.objects(b)...)
}

// Migrate deletes the bastion; it is seed-local.
func (a *bastion) Migrate(ctx context.Context, log logr.Logger, b *extensionsv1alpha1.Bastion, cluster *extsdk.Cluster) error {
	return a.Delete(ctx, log, b, cluster)
}

func (a *bastion) objects(b *extensionsv1alpha1.Bastion) []client.Object {
	return []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: BastionServiceName(b.Name), Namespace: b.Namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: BastionUserDataSecretName(b.Name), Namespace: b.Namespace}},
	}
}
