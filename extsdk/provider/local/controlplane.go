package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// ControlPlane outputs in the shoot's namespace: stand-ins for the components a provider deploys there.
const (
	// CCMConfigMap is the "cloud-controller-manager" (its cloud config); backs ControlPlaneHealthy.
	CCMConfigMap = "cloud-controller-manager"
	// CCMServerSecret holds the CA and server certificate of the cloud-controller-manager; backs ControlPlaneHealthy.
	CCMServerSecret = "cloud-controller-manager-server"
	// StorageConfigMap is the "local-path-provisioner" and its StorageClass; backs SystemComponentsHealthy.
	StorageConfigMap = "local-path-provisioner"
	// ObservabilityConfigMap is the cloud-controller-manager's dashboard; backs ObservabilityComponentsHealthy.
	ObservabilityConfigMap = "cloud-controller-manager-observability"
)

// controlPlane deploys the stand-ins of a provider's control-plane components. Everything it makes is seed-local:
// Migrate deletes it, Restore is Reconcile.
type controlPlane struct{ seed }

func (a *controlPlane) Reconcile(ctx context.Context, log logr.Logger, cp *extensionsv1alpha1.ControlPlane, _ *extsdk.Cluster) error {
	infra, err := parseInfrastructureStatus(cp.Spec.InfrastructureProviderStatus)
	if err != nil {
		return err
	}
	labels := ownerLabels("controlplane", cp.Name)
	if err := a.ensureServerSecret(ctx, log, cp.Namespace, labels); err != nil {
		return err
	}
	cloudConfig := fmt.Sprintf("[Global]\nregion=%q\nnetwork-id=%q\nnodes-cidr=%q\n", cp.Spec.Region, infra.Network.ID, infra.Network.NodesCIDR)
	for _, cm := range []*corev1ac.ConfigMapApplyConfiguration{
		corev1ac.ConfigMap(CCMConfigMap, cp.Namespace).WithLabels(labels).
			WithData(map[string]string{"cloud-provider-config": cloudConfig, "serverSecret": CCMServerSecret}),
		corev1ac.ConfigMap(StorageConfigMap, cp.Namespace).WithLabels(labels).
			WithData(map[string]string{"storageClass": "default", "provisioner": "rancher.io/local-path", "isDefaultClass": "true"}),
		corev1ac.ConfigMap(ObservabilityConfigMap, cp.Namespace).WithLabels(labels).
			WithLabels(map[string]string{"dashboard.monitoring.gardener.cloud/shoot": "true"}).
			WithData(map[string]string{"cloud-controller-manager.json": `{"title":"Cloud Controller Manager","panels":[]}`}),
	} {
		if err := a.apply(ctx, cm); err != nil {
			return fmt.Errorf("deploy %s: %w", *cm.GetName(), err)
		}
	}
	return nil
}

// ensureServerSecret makes the CA and server certificate once; later reconciles keep them.
func (a *controlPlane) ensureServerSecret(ctx context.Context, log logr.Logger, namespace string, labels map[string]string) error {
	existing := &corev1.Secret{}
	err := a.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: CCMServerSecret}, existing)
	switch {
	case err == nil && len(existing.Data["ca.crt"]) > 0 && len(existing.Data["tls.crt"]) > 0 && len(existing.Data["tls.key"]) > 0:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("read %s: %w", CCMServerSecret, err)
	}
	data, err := serverCertificate(namespace, time.Now())
	if err != nil {
		return fmt.Errorf("generate the cloud-controller-manager's certificates: %w", err)
	}
	log.Info("Generated the cloud-controller-manager's certificates")
	s := corev1ac.Secret(CCMServerSecret, namespace).WithLabels(labels).WithType(corev1.SecretTypeTLS).WithData(data)
	if err := a.apply(ctx, s); err != nil {
		return fmt.Errorf("deploy %s: %w", CCMServerSecret, err)
	}
	return nil
}

// serverCertificate returns a new CA (ca.crt) and a server certificate it signed for the cloud-controller-manager's
// Service in namespace (tls.crt, tls.key), PEM-encoded.
func serverCertificate(namespace string, now time.Time) (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "ca-provider-local-controlplane"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: CCMConfigMap},
		DNSNames:     []string{CCMConfigMap, CCMConfigMap + "." + namespace, CCMConfigMap + "." + namespace + ".svc"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, server, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func (a *controlPlane) Delete(ctx context.Context, _ logr.Logger, cp *extensionsv1alpha1.ControlPlane, _ *extsdk.Cluster) error {
	return a.removeAll(ctx, false, controlPlaneObjects(cp.Namespace)...)
}

// Migrate deletes the stand-ins; the destination seed deploys them again.
func (a *controlPlane) Migrate(ctx context.Context, log logr.Logger, cp *extensionsv1alpha1.ControlPlane, cluster *extsdk.Cluster) error {
	return a.Delete(ctx, log, cp, cluster)
}

// controlPlaneObjects names what the ControlPlane actuator makes in namespace.
func controlPlaneObjects(namespace string) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: namespace} }
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta(CCMServerSecret)},
		&corev1.ConfigMap{ObjectMeta: meta(CCMConfigMap)},
		&corev1.ConfigMap{ObjectMeta: meta(StorageConfigMap)},
		&corev1.ConfigMap{ObjectMeta: meta(ObservabilityConfigMap)},
	}
}
