package shoot

import (
	"net/http"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
)

// clientset is what the shoot flow and care use of a client-go clientset of a shoot's kube-apiserver (a clientset of
// k8s.io/client-go/kubernetes is one).
type clientset interface {
	CoreV1() corev1client.CoreV1Interface
	AppsV1() appsv1client.AppsV1Interface
	RbacV1() rbacv1client.RbacV1Interface
	StorageV1() storagev1client.StorageV1Interface
	DiscoveryV1() discoveryv1client.DiscoveryV1Interface
}

// typedClients is a clientset of only the typed clients the agent uses: a whole clientset of client-go links
// every typed client and apply configuration of every API group, several MB of the agent's binary.
type typedClients struct {
	core      *corev1client.CoreV1Client
	apps      *appsv1client.AppsV1Client
	rbac      *rbacv1client.RbacV1Client
	storage   *storagev1client.StorageV1Client
	discovery *discoveryv1client.DiscoveryV1Client
}

// newClientset is a clientset of cfg's API server over the HTTP client hc.
func newClientset(cfg *rest.Config, hc *http.Client) (clientset, error) {
	var c typedClients
	var err error
	if c.core, err = corev1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, err
	}
	if c.apps, err = appsv1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, err
	}
	if c.rbac, err = rbacv1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, err
	}
	if c.storage, err = storagev1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, err
	}
	if c.discovery, err = discoveryv1client.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c typedClients) CoreV1() corev1client.CoreV1Interface                { return c.core }
func (c typedClients) AppsV1() appsv1client.AppsV1Interface                { return c.apps }
func (c typedClients) RbacV1() rbacv1client.RbacV1Interface                { return c.rbac }
func (c typedClients) StorageV1() storagev1client.StorageV1Interface       { return c.storage }
func (c typedClients) DiscoveryV1() discoveryv1client.DiscoveryV1Interface { return c.discovery }
